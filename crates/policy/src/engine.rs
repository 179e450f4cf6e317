//! What a policy precomputes at load so that a decision only looks things
//! up: the indexed rules, the areas arguments may read and write, how far
//! the PATH can be trusted, and the variable names that may not be set.

use std::path::PathBuf;

use crate::rules::{Rule, RuleSet};
use crate::secret::SecretNames;
use crate::{EnvPolicy, Namespaces, SYSTEM_READ_DIRS, SandboxPolicy, ShellPolicy};

/// The run's private scratch directories when it has a mount namespace
/// (the sandbox's list).
const SCRATCH_DIRS: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Everything precomputed at load for a decision.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    pub rules: RuleSet,
    /// Areas arguments may name for reading, besides the root.
    pub readable: Vec<PathBuf>,
    /// Areas (besides the root) that may be written.
    pub writable: Vec<PathBuf>,
    /// The run's private scratch directories, readable and writable.
    pub scratch: Vec<PathBuf>,
    /// Every PATH entry is a system directory, so a bare name needs no
    /// lookup to be trusted (the common case, and the fast one).
    pub path_trusted: bool,
    pub path_entries: Vec<PathBuf>,
    /// What `~` means (`[env.set] HOME`), if anything.
    pub home: Option<PathBuf>,
    /// `(name, is_prefix)` from `[shell] deny_assignments`.
    deny_assign: Vec<(String, bool)>,
    /// `[shell] allow_assignments`: exact names exempt from the above.
    allow_assign: Vec<String>,
    /// `[env] secret_pattern`, case-insensitive: names of variables whose
    /// values never reach the child or a trace.
    pub secret_names: SecretNames,
    pub example_count: usize,
}

impl Engine {
    pub(crate) fn build(
        rules: Vec<Rule>,
        env: &EnvPolicy,
        sandbox: &SandboxPolicy,
        shell: &ShellPolicy,
        secret_names: SecretNames,
    ) -> Engine {
        let mut readable: Vec<PathBuf> = SYSTEM_READ_DIRS.iter().map(PathBuf::from).collect();
        extend_areas(&sandbox.read, &mut readable);
        let mut writable = Vec::new();
        extend_areas(&sandbox.write, &mut writable);
        // Where the run gets a mount namespace these are its own, fresh and
        // gone with it; where it does not, the kernel refuses the write
        // (they are not granted), so the policy need not. Kept apart from
        // `writable`: a PATH entry there is not one the agent can plant a
        // program in ahead of a run (the run's /tmp is not the host's).
        let mut scratch = Vec::new();
        if sandbox.namespaces != Namespaces::Off && !sandbox.read_only {
            let dirs: Vec<String> = SCRATCH_DIRS.iter().map(|d| d.to_string()).collect();
            extend_areas(&dirs, &mut scratch);
        }

        let path_entries: Vec<PathBuf> = env
            .path
            .split(':')
            .filter(|d| d.starts_with('/'))
            .map(PathBuf::from)
            .collect();
        // A PATH entry the child may write to could be given a fake `git` by
        // an earlier command, so only read-only system entries are trusted
        // without a lookup.
        let path_trusted = path_entries.iter().all(|d| {
            readable.iter().any(|r| d.starts_with(r))
                && !writable
                    .iter()
                    .any(|w| d.starts_with(w) || w.starts_with(d))
        });
        readable.extend(writable.iter().cloned());
        let home = env
            .set
            .get("HOME")
            .filter(|h| h.starts_with('/'))
            .map(PathBuf::from);
        let deny_assign = shell
            .deny_assignments
            .iter()
            .map(|n| match n.strip_suffix('*') {
                Some(prefix) => (prefix.to_string(), true),
                None => (n.clone(), false),
            })
            .collect();

        Engine {
            rules: RuleSet::new(rules),
            readable,
            writable,
            scratch,
            path_trusted,
            path_entries,
            home,
            deny_assign,
            allow_assign: shell.allow_assignments.clone(),
            secret_names,
            example_count: 0,
        }
    }

    /// Whether `[shell] deny_assignments` forbids setting `name`.
    pub(crate) fn denied_name(&self, name: &str) -> bool {
        if self.allow_assign.iter().any(|a| a == name) {
            return false;
        }
        self.deny_assign.iter().any(|(n, prefix)| {
            if *prefix {
                name.starts_with(n.as_str())
            } else {
                name == n
            }
        })
    }
}

/// Adds the absolute paths of `list` to `out`, in both spellings:
/// arguments are compared after symlinks are followed, and a toolchain
/// directory is often a symlink.
fn extend_areas(list: &[String], out: &mut Vec<PathBuf>) {
    for p in list {
        if !p.starts_with('/') {
            continue;
        }
        let lexical = PathBuf::from(p);
        if let Ok(canon) = std::fs::canonicalize(&lexical)
            && canon != lexical
        {
            out.push(canon);
        }
        out.push(lexical);
    }
}
