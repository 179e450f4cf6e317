//! Policies that compose: an overlay names the policy it `extends` (a
//! shipped one by name, or a file) and adds rules and examples to it. It
//! cannot change the base's limits, environment, sandbox or shell
//! settings, so an overlay only ever adds decisions; and since the
//! strictest matching rule decides, an added allow rule cannot undo a
//! base deny.
//!
//! An overlay changes what the run may do, so it is loaded only from a
//! place the run cannot write: owned by root or the supervisor's user,
//! writable by no one else, and (checked once the root is known, see
//! [`Policy::check_layers_outside`]) outside the project root and the
//! policy's writable areas.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use toml::Spanned;

use crate::Policy;
use crate::engine::Engine;
use crate::error::{Issue, LineIndex, PolicyError};
use crate::load::{
    ExampleFile, RuleFile, check_contradictions, check_examples, compile_all, compile_rules, read,
    syntax_error,
};

/// The policies shipped with agent-exec, by the name `extends` may use.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "code",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../policies/code.toml"
        )),
    ),
    (
        "ci",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../policies/ci.toml"
        )),
    ),
    (
        "readonly",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../policies/readonly.toml"
        )),
    ),
];

/// Overlays extending overlays: deeper is a mistake (or a loop).
const MAX_DEPTH: usize = 4;

/// One overlay layered on a policy.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    /// As shown in messages (the file, or the name the service gave).
    pub(crate) origin: String,
    /// The file it was read from, canonical; `None` for text the service
    /// handed over ([`Policy::with_overlay`]).
    pub(crate) path: Option<PathBuf>,
    /// How many rules it added.
    pub(crate) rules: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverlayFile {
    #[serde(default)]
    extends: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "rule")]
    rules: Vec<Spanned<RuleFile>>,
    #[serde(default, rename = "example")]
    examples: Vec<Spanned<ExampleFile>>,
}

/// Whether policy text is an overlay: `extends` among its top-level keys
/// (which TOML puts before the first table).
pub(crate) fn is_overlay(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .take_while(|l| !l.starts_with('['))
        .any(|l| {
            l.strip_prefix("extends")
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
}

impl Policy {
    /// Reads and validates a policy file: every regex compiled, every
    /// example checked.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let (text, shown) = read(path)?;
        if is_overlay(&text) {
            return Policy::load_overlay(path, &text, &shown, 0);
        }
        Policy::parse(&text, &shown)
    }

    /// `load` for a one-shot CLI: a policy whose exact bytes this exact
    /// binary has fully loaded before is read from its compiled form in
    /// `cache_dir`, a directory only the supervisor's user can write (see
    /// `cache.rs` for what makes an entry usable). Anything else gets the
    /// full load, whose result is cached. Overlays always load in full.
    pub fn load_cached(path: &Path, cache_dir: Option<&Path>) -> Result<Policy, PolicyError> {
        let (text, shown) = read(path)?;
        if is_overlay(&text) {
            return Policy::load_overlay(path, &text, &shown, 0);
        }
        let Some(dir) = cache_dir else {
            return Policy::parse(&text, &shown);
        };
        let sha256 = hex::encode(Sha256::digest(text.as_bytes()));
        if let Some(policy) = crate::cache::load(dir, &sha256, &shown) {
            return Ok(policy);
        }
        let policy = Policy::parse(&text, &shown)?;
        crate::cache::store(dir, &policy);
        Ok(policy)
    }

    /// The overlays layered on the base policy, in order: where each came
    /// from and how many rules it added.
    pub fn layers(&self) -> Vec<(String, usize)> {
        self.layers
            .iter()
            .map(|l| (l.origin.clone(), l.rules))
            .collect()
    }

    /// This policy with an overlay's rules added (and its examples checked
    /// against the result). `text` is an overlay without `extends`: the
    /// service layers, for example, the rules a human approved and asked
    /// to remember. Only rules and examples are taken; rule ids must be
    /// new.
    pub fn with_overlay(&self, text: &str, origin: &str) -> Result<Policy, PolicyError> {
        self.layer(text, origin, None)
    }

    /// [`with_overlay`](Self::with_overlay) with a file, which must be in a
    /// place the run cannot write (see the module's documentation).
    pub fn extend_with_file(&self, path: &Path) -> Result<Policy, PolicyError> {
        let canon = check_protected(path)?;
        let (text, shown) = read(path)?;
        self.layer(&text, &shown, Some(canon))
    }

    /// Refuses a policy whose overlay files (or the files they extend) are
    /// inside `root` or a `[sandbox] write` area: the run could rewrite
    /// its own rules for the next call.
    pub fn check_layers_outside(&self, root: &Path) -> Result<(), PolicyError> {
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        for layer in &self.layers {
            let Some(path) = &layer.path else { continue };
            let writable = path.starts_with(&root)
                || self
                    .sandbox
                    .write
                    .iter()
                    .any(|w| path.starts_with(Path::new(w)));
            if writable {
                return Err(PolicyError::UnsafeOverlay {
                    path: path.display().to_string(),
                    why: "it is inside the project root or a writable area of the sandbox".into(),
                });
            }
        }
        Ok(())
    }

    /// An overlay file read by `load`: its base first, then its additions.
    pub(crate) fn load_overlay(
        path: &Path,
        text: &str,
        shown: &str,
        depth: usize,
    ) -> Result<Policy, PolicyError> {
        let canon = check_protected(path)?;
        let file: OverlayFile = toml::from_str(text).map_err(|e| syntax_error(text, shown, e))?;
        let extends = file.extends.unwrap_or_default();
        let bad = |why: &str| PolicyError::Extends {
            origin: shown.to_string(),
            extends: extends.clone(),
            why: why.to_string(),
        };
        if depth >= MAX_DEPTH {
            return Err(bad("overlays extend each other too deeply (or in a loop)"));
        }
        let base = match SHIPPED.iter().find(|(name, _)| *name == extends) {
            Some((name, text)) => Policy::parse(text, &format!("shipped policy `{name}`"))?,
            None if extends.contains('/') || extends.ends_with(".toml") => {
                let dir = canon.parent().unwrap_or(Path::new("/"));
                let base_path = dir.join(&extends);
                let (base_text, base_shown) = read(&base_path)?;
                if is_overlay(&base_text) {
                    Policy::load_overlay(&base_path, &base_text, &base_shown, depth + 1)?
                } else {
                    let base_canon = check_protected(&base_path)?;
                    let mut p = Policy::parse(&base_text, &base_shown)?;
                    // The base file is guarded like an overlay: it decides too.
                    p.layers.push(Layer {
                        origin: base_shown,
                        path: Some(base_canon),
                        rules: 0,
                    });
                    p
                }
            }
            None => {
                let names: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
                return Err(bad(&format!(
                    "not a shipped policy ({}) nor a path to a file (`./base.toml`)",
                    names.join(", ")
                )));
            }
        };
        base.layer(text, shown, Some(canon))
    }

    fn layer(
        &self,
        text: &str,
        origin: &str,
        path: Option<PathBuf>,
    ) -> Result<Policy, PolicyError> {
        let file: OverlayFile = toml::from_str(text).map_err(|e| syntax_error(text, origin, e))?;
        let invalid = |issues| PolicyError::Invalid {
            origin: origin.to_string(),
            issues,
        };
        let lines = LineIndex::new(text);
        let mut issues = Vec::new();
        if file.extends.is_some() && path.is_none() {
            issues.push(Issue {
                line: 1,
                key: "extends".into(),
                message: "an overlay handed to with_overlay is layered on the policy it is given; remove `extends`".into(),
            });
        }
        let added = compile_rules(&lines, &file.rules, &mut issues);
        for rule in &added {
            if self.engine.rules.all().iter().any(|r| r.id == rule.id) {
                issues.push(Issue {
                    line: rule.line,
                    key: format!("rule {}", rule.id),
                    message: format!(
                        "the policy it extends ({}) already has a rule with this id; choose another",
                        self.origin
                    ),
                });
            }
        }
        let count = added.len();
        let mut rules = self.engine.rules.all().to_vec();
        rules.extend(added);
        check_contradictions(&rules, &mut issues);
        if !issues.is_empty() {
            return Err(invalid(issues));
        }
        compile_all(&rules[rules.len() - count..]).map_err(invalid)?;
        let mut engine = Engine::build(
            rules,
            &self.env,
            &self.sandbox,
            &self.shell,
            self.engine.secret_names.clone(),
        );
        engine.example_count = self.engine.example_count + file.examples.len();
        let mut digest = Sha256::new();
        digest.update(self.sha256.as_bytes());
        digest.update(text.as_bytes());
        let mut layers = self.layers.clone();
        layers.push(Layer {
            origin: origin.to_string(),
            path,
            rules: count,
        });
        let examples: Vec<(usize, crate::load::ExampleFile)> = file
            .examples
            .iter()
            .map(|e| (lines.line(e.span().start), e.get_ref().clone()))
            .collect();
        // Amendments are checked against every layer's examples.
        let mut all_examples = self.examples.as_ref().clone();
        all_examples.extend(examples.iter().cloned());
        let policy = Policy {
            name: file.name.unwrap_or_else(|| self.name.clone()),
            sha256: hex::encode(digest.finalize()),
            origin: format!("{} + {origin}", self.origin),
            default: self.default,
            limits: self.limits.clone(),
            env: self.env.clone(),
            sandbox: self.sandbox.clone(),
            budget: self.budget.clone(),
            daemon: self.daemon.clone(),
            trace: self.trace.clone(),
            shell: self.shell.clone(),
            description: file.description.unwrap_or_else(|| self.description.clone()),
            default_risk: self.default_risk,
            approvals: self.approvals.clone(),
            provenance: self.provenance.clone(),
            examples: std::sync::Arc::new(all_examples),
            engine,
            layers,
        };
        check_examples(&policy, origin, &examples)?;
        Ok(policy)
    }
}

/// The effective user id, without a system call the policy crate may not
/// make: `/proc/self` belongs to it.
fn euid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Canonicalizes `path` and checks it and every directory above it: owned
/// by root or this process's user, and writable by no one else (a sticky
/// directory, `/tmp`, is fine above the file: others cannot replace what
/// is in it).
fn check_protected(path: &Path) -> Result<PathBuf, PolicyError> {
    let unsafe_at = |p: &Path, why: String| PolicyError::UnsafeOverlay {
        path: p.display().to_string(),
        why,
    };
    let canon = std::fs::canonicalize(path).map_err(|source| PolicyError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let me = euid();
    for p in canon.ancestors() {
        let m = std::fs::metadata(p).map_err(|source| PolicyError::Io {
            path: p.display().to_string(),
            source,
        })?;
        if m.uid() != 0 && Some(m.uid()) != me {
            return Err(unsafe_at(
                p,
                format!(
                    "owned by uid {}, neither root nor this supervisor's user",
                    m.uid()
                ),
            ));
        }
        let sticky_dir = m.is_dir() && m.mode() & 0o1000 != 0 && p != canon;
        if m.mode() & 0o022 != 0 && !sticky_dir {
            return Err(unsafe_at(p, "writable by its group or by others".into()));
        }
    }
    Ok(canon)
}
