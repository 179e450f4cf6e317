//! One session's ledger: every path and identifier its results showed,
//! with the call that showed it, bounded by least recent use.
//!
//! Paths are kept normalized: resolved lexically against the run's
//! working directory and made relative to the project root (`.` is the
//! root itself), so `./a.py`, `a.py`, `src/../a.py` and `/root/a.py` are
//! one entry. Paths outside the root stay absolute. Nothing of a file's
//! contents is kept, only names.

use std::collections::HashMap;
use std::path::Path;

use super::extract::Extracted;
use crate::policy::PathArgument;
use crate::result::{ArgProvenance, ProvenanceTag};
use crate::store::LedgerRow;

#[derive(Debug, Clone)]
struct Entry {
    source: String,
    tick: u64,
}

/// What changed since the ledger was last saved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub upsert: Vec<LedgerRow>,
    pub remove: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.upsert.is_empty() && self.remove.is_empty()
    }
}

/// One session's ledger.
#[derive(Debug, Clone)]
pub struct Ledger {
    entries: HashMap<String, Entry>,
    tick: u64,
    cap: usize,
    dirty: Vec<String>,
    removed: Vec<String>,
}

impl Ledger {
    /// An empty ledger keeping at most `cap` entries (at least 16).
    pub fn new(cap: usize) -> Ledger {
        Ledger {
            entries: HashMap::new(),
            tick: 0,
            cap: cap.max(16),
            dirty: Vec::new(),
            removed: Vec::new(),
        }
    }

    /// A ledger holding `rows` (as loaded from a store).
    pub fn from_rows(cap: usize, rows: Vec<LedgerRow>) -> Ledger {
        let mut l = Ledger::new(cap);
        for r in rows {
            l.tick = l.tick.max(r.tick);
            l.entries.insert(
                r.key,
                Entry {
                    source: r.source,
                    tick: r.tick,
                },
            );
        }
        l.evict();
        l.removed.clear();
        l
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The changes to save, and forgets them.
    pub fn take_changes(&mut self) -> Changes {
        let mut upsert: Vec<LedgerRow> = std::mem::take(&mut self.dirty)
            .into_iter()
            .filter_map(|key| {
                let e = self.entries.get(&key)?;
                Some(LedgerRow {
                    source: e.source.clone(),
                    tick: e.tick,
                    key,
                })
            })
            .collect();
        upsert.sort_by(|a, b| a.key.cmp(&b.key));
        upsert.dedup_by(|a, b| a.key == b.key);
        Changes {
            upsert,
            remove: std::mem::take(&mut self.removed),
        }
    }

    /// Every entry, oldest first.
    pub fn rows(&self) -> Vec<LedgerRow> {
        let mut rows: Vec<LedgerRow> = self
            .entries
            .iter()
            .map(|(k, e)| LedgerRow {
                key: k.clone(),
                source: e.source.clone(),
                tick: e.tick,
            })
            .collect();
        rows.sort_by_key(|r| r.tick);
        rows
    }

    /// A lookup that counts as a use. Only in memory: a lookup changes no
    /// stored row, so a restarted process ranks entries by when they were
    /// last shown.
    fn touch(&mut self, key: &str) -> Option<String> {
        self.tick += 1;
        let tick = self.tick;
        let e = self.entries.get_mut(key)?;
        e.tick = tick;
        Some(e.source.clone())
    }

    fn insert(&mut self, key: String, source: &str) {
        self.tick += 1;
        let tick = self.tick;
        // The first call that showed a name stays its source.
        self.entries
            .entry(key.clone())
            .and_modify(|e| e.tick = tick)
            .or_insert_with(|| Entry {
                source: source.to_string(),
                tick,
            });
        self.dirty.push(key);
    }

    /// Drops the least recently used tenth once over the bound, so a
    /// full ledger pays for a sort once per `cap / 10` insertions.
    fn evict(&mut self) {
        if self.entries.len() <= self.cap {
            return;
        }
        let keep = self.cap - self.cap / 10;
        let mut ticks: Vec<u64> = self.entries.values().map(|e| e.tick).collect();
        let drop = ticks.len() - keep;
        let (_, &mut threshold, _) = ticks.select_nth_unstable(drop - 1);
        let removed: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.tick <= threshold)
            .map(|(k, _)| k.clone())
            .collect();
        for k in removed {
            self.entries.remove(&k);
            self.removed.push(k);
        }
    }

    /// Tags one argument of a new request.
    pub fn tag(&mut self, root: &Path, arg: &PathArgument) -> ArgProvenance {
        let path = normalize(root, &arg.base, &arg.value);
        let (tag, source) = self.classify(&path, &arg.value);
        ArgProvenance {
            arg: arg.shown.clone(),
            path,
            tag,
            source,
            write: arg.write,
        }
    }

    fn classify(&mut self, path: &str, value: &str) -> (ProvenanceTag, Option<String>) {
        if path == "." {
            return (ProvenanceTag::Observed, None);
        }
        if let Some(s) = self.touch(&format!("p:{path}")) {
            return (ProvenanceTag::Observed, Some(s));
        }
        if is_hash(value)
            && let Some(s) = self.touch(&format!("h:{}", &value[..7]))
        {
            return (ProvenanceTag::Observed, Some(s));
        }
        if let Some(s) = self.touch(&format!("r:{value}")) {
            return (ProvenanceTag::Observed, Some(s));
        }
        if let Some(s) = self.touch(&format!("d:{}", parent(path))) {
            return (ProvenanceTag::Invented, Some(s));
        }
        (ProvenanceTag::Assumed, None)
    }

    /// Records what the result of `source` showed. `cwd` is the run's
    /// working directory; `own` are the request's own path arguments,
    /// normalized, which its output cannot make observed.
    pub fn record(
        &mut self,
        root: &Path,
        cwd: &Path,
        source: &str,
        found: &Extracted,
        own: &[String],
    ) {
        let is_own = |p: &str| own.iter().any(|o| o == p);
        for (dir, path) in &found.paths {
            let base = crate::policy::normalize_lexically(cwd, Path::new(dir));
            let p = normalize(root, &base, path);
            if is_own(&p) || p == "." {
                continue;
            }
            // A path shown means its directories exist too.
            let mut ancestor = parent(&p).to_string();
            self.insert(format!("p:{p}"), source);
            while ancestor != "." && ancestor != "/" && !is_own(&ancestor) {
                let key = format!("p:{ancestor}");
                if self.entries.contains_key(&key) {
                    break;
                }
                self.insert(key, source);
                ancestor = parent(&ancestor).to_string();
            }
        }
        for dir in &found.listed {
            let p = normalize(root, cwd, dir);
            self.insert(format!("d:{p}"), source);
        }
        for h in &found.hashes {
            // `get`: an argument may have a multibyte character anywhere.
            if !own
                .iter()
                .any(|o| o.get(..7).is_some_and(|p| h.starts_with(p)))
            {
                self.insert(format!("h:{}", &h[..7]), source);
            }
        }
        for r in &found.refs {
            if !is_own(r) {
                self.insert(format!("r:{r}"), source);
            }
        }
        self.evict();
    }
}

fn is_hash(s: &str) -> bool {
    (7..=40).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The directory part of a normalized path (`.` for a name at the root).
fn parent(p: &str) -> &str {
    match p.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((d, _)) => d,
        None if p == "." => "/",
        None => ".",
    }
}

/// `value` resolved lexically against `base`, relative to `root` when
/// inside it (`.` for the root), absolute otherwise.
pub fn normalize(root: &Path, base: &Path, value: &str) -> String {
    let full = crate::policy::normalize_lexically(base, Path::new(value));
    match full.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => full.to_string_lossy().into_owned(),
    }
}
