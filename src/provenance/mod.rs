//! Argument provenance: every path argument of a request is tagged
//! `observed` (an earlier result of the session showed it), `invented` (a
//! new name directly inside a directory an earlier result listed) or
//! `assumed` (a guess), from a per-session ledger of what results showed.
//!
//! - [`extract`] reads paths and identifiers out of a result;
//! - [`Ledger`] normalizes, keeps and matches them, bounded;
//! - [`LedgerStore`] persists a ledger with the session's state (the
//!   daemon's `state.db`, or one [`SessionFile`] for one-shot CLI calls);
//! - [`Provenance`] holds the ledgers of a service's sessions, keyed like
//!   the rest of its per-session state ([`SessionId`]), so every transport
//!   that goes through the service gets the same ledger.
//!
//! Which arguments are paths is the policy's knowledge
//! ([`Policy::path_arguments`](crate::policy::Policy::path_arguments)).

pub mod extract;
mod ledger;
mod session_file;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

pub use extract::{Extracted, Producer, extract};
pub use ledger::{Changes, Ledger, normalize};
pub use session_file::SessionFile;

use crate::policy::{PathArgument, ProvenanceMode, ProvenancePolicy};
use crate::request::{CommandSpec, SessionId};
use crate::result::{ArgProvenance, ProvenanceTag, ToolResult};
pub use crate::store::{LedgerRow, LedgerStore};

/// How many sessions' ledgers stay in memory (each up to
/// `max_entries` names); others are reloaded from the store when their
/// session calls again, or start empty without one.
const CACHED_SESSIONS: usize = 64;

type Shared = Arc<Mutex<Ledger>>;

/// The cached ledgers, each with when it was last used, and the clock.
#[derive(Default)]
struct Sessions {
    clock: u64,
    ledgers: HashMap<SessionId, (Shared, u64)>,
}

fn lock(l: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    // A ledger is consistent after every method, so a poisoned lock is
    // usable.
    l.lock().unwrap_or_else(|p| p.into_inner())
}

/// A service's ledgers, one per session.
pub struct Provenance {
    policy: ProvenancePolicy,
    store: Option<Arc<dyn LedgerStore>>,
    sessions: Mutex<Sessions>,
}

/// Why a call is held back: the message and the read that would help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldBack {
    pub message: String,
    pub suggestion: String,
    pub argument: String,
}

impl Provenance {
    /// `None` when the policy's mode is `off`.
    pub fn new(
        policy: &ProvenancePolicy,
        store: Option<Arc<dyn LedgerStore>>,
    ) -> Option<Provenance> {
        (policy.mode != ProvenanceMode::Off).then(|| Provenance {
            policy: policy.clone(),
            store,
            sessions: Mutex::new(Sessions::default()),
        })
    }

    pub fn mode(&self) -> ProvenanceMode {
        self.policy.mode
    }

    fn ledger(&self, session: &SessionId) -> Shared {
        let mut guard = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let Sessions {
            clock,
            ledgers: map,
        } = &mut *guard;
        *clock += 1;
        if let Some((l, used)) = map.get_mut(session) {
            *used = *clock;
            return l.clone();
        }
        if map.len() >= CACHED_SESSIONS
            && let Some(oldest) = map
                .iter()
                .filter(|(_, (l, _))| Arc::strong_count(l) == 1)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        let rows = match &self.store {
            Some(s) => s.ledger_load(session).unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot load the provenance ledger");
                Vec::new()
            }),
            None => Vec::new(),
        };
        let l = Arc::new(Mutex::new(Ledger::from_rows(self.policy.max_entries, rows)));
        map.insert(session.clone(), (l.clone(), *clock));
        l
    }

    /// How many entries `session`'s ledger holds.
    pub fn entries(&self, session: &SessionId) -> usize {
        lock(&self.ledger(session)).len()
    }

    /// Tags every argument in `args` against `session`'s ledger.
    pub fn tag(
        &self,
        session: &SessionId,
        root: &Path,
        args: &[PathArgument],
    ) -> Vec<ArgProvenance> {
        if args.is_empty() {
            return Vec::new();
        }
        let l = self.ledger(session);
        let mut ledger = lock(&l);
        args.iter().map(|a| ledger.tag(root, a)).collect()
    }

    /// Under `enforce`, whether a command that writes (`read_only` false)
    /// must be held back: more assumed arguments than the budget. Only
    /// written arguments count: reading is how a path becomes observed.
    pub fn hold_back(
        &self,
        tags: &[ArgProvenance],
        read_only: bool,
        cwd: &Path,
    ) -> Option<HoldBack> {
        if self.policy.mode != ProvenanceMode::Enforce || read_only {
            return None;
        }
        let assumed: Vec<&ArgProvenance> = tags
            .iter()
            .filter(|t| t.tag == ProvenanceTag::Assumed && t.write)
            .collect();
        if assumed.len() <= self.policy.assumed_budget as usize {
            return None;
        }
        let first = assumed[0];
        let names: Vec<String> = assumed.iter().map(|t| format!("`{}`", t.arg)).collect();
        let (it, it_is) = if assumed.len() == 1 {
            ("it", "it is")
        } else {
            ("them", "they are")
        };
        let message = format!(
            "{} would be written without having been seen: no earlier result of this session showed {it}, nor listed the directory {it_is} in (assumed arguments a command that writes may have: {})",
            names.join(", "),
            self.policy.assumed_budget
        );
        Some(HoldBack {
            suggestion: suggest_read(&first.arg, cwd),
            message,
            argument: first.arg.clone(),
        })
    }

    /// Records what `result` showed into `session`'s ledger, and saves the
    /// change. Refusals, duplicates and empty results add nothing.
    pub fn record(
        &self,
        session: &SessionId,
        root: &Path,
        cwd: &Path,
        command: &CommandSpec,
        tags: &[ArgProvenance],
        result: &ToolResult,
    ) {
        if result.duplicate || result.exit_code.is_none() && result.signal.is_none() {
            return;
        }
        if result.stdout.is_empty() && result.stderr.is_empty() {
            return;
        }
        let producer = Producer::of(command);
        let is_dir = |p: &str| cwd.join(p).is_dir();
        let stdout = extract::whole_lines(&result.stdout);
        let stderr = extract::whole_lines(&result.stderr);
        let found = extract(producer.as_ref(), &stdout, &stderr, result.ok, &is_dir);
        if found == Extracted::default() {
            return;
        }
        let own: Vec<String> = tags
            .iter()
            .map(|t| t.path.clone())
            .chain(tags.iter().map(|t| t.arg.clone()))
            .collect();
        let l = self.ledger(session);
        let changes = {
            let mut ledger = lock(&l);
            ledger.record(root, cwd, &result.call_id, &found, &own);
            ledger.take_changes()
        };
        if let Some(store) = &self.store
            && !changes.is_empty()
            && let Err(e) = store.ledger_save(session, &changes.upsert, &changes.remove)
        {
            tracing::error!(error = %e, "cannot save the provenance ledger");
        }
    }
}

/// The read that would observe `arg`: a listing of its nearest existing
/// directory, or a search of the tracked files by name.
pub fn suggest_read(arg: &str, cwd: &Path) -> String {
    let name = arg.rsplit('/').next().unwrap_or(arg);
    let mut dir = match arg.rsplit_once('/') {
        Some(("", _)) => "/".to_string(),
        Some((d, _)) => d.to_string(),
        None => ".".to_string(),
    };
    while dir != "." && dir != "/" && !cwd.join(&dir).is_dir() {
        dir = match dir.rsplit_once('/') {
            Some(("", _)) => "/".to_string(),
            Some((d, _)) => d.to_string(),
            None => ".".to_string(),
        };
    }
    format!(
        "Look before writing: run `ls {dir}` (or `git ls-files | grep {name}`) to see what is there, then send the command again with a path the result showed, or a new name inside a listed directory."
    )
}

#[cfg(test)]
mod tests;
