//! What a run needs of the project's own environment beyond the policy's
//! fixed variables, computed once per service: the run's PATH (the
//! policy's, `{root}` entries expanded, and the sandbox's aliases last),
//! the project's virtualenv, and git's identity, taken from the project
//! owner's git configuration when the policy does not set one.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::toolchains::Toolchains;
use crate::policy::{Policy, resolve_program};

/// Aliases the sandbox provides where the host lacks the plain name:
/// Debian and others install only `python3`, yet agents, scripts and
/// `Makefile`s call `python`.
const ALIASES: &[(&str, &str)] = &[("python", "python3"), ("pip", "pip3")];

/// Largest git configuration file read for the identity.
const GITCONFIG_MAX: u64 = 64 << 10;

/// The project's environment for every run of one service.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProjectEnv {
    /// The run's PATH.
    pub(crate) path: String,
    /// The directory of the sandbox's aliases, for its Landlock rule.
    pub(crate) shim_dir: Option<PathBuf>,
    /// Project PATH directories that may be a virtualenv's `bin`.
    venv_bins: Vec<PathBuf>,
    /// `user.name` and `user.email` for git, when known.
    pub(crate) git_identity: Vec<(String, String)>,
    /// What the policy's toolchains let runs read.
    pub(crate) toolchain_read: Vec<PathBuf>,
    /// The toolchains' variables (those the policy does not set).
    pub(crate) env: Vec<(String, String)>,
}

impl ProjectEnv {
    pub(crate) fn new(policy: &Policy, root: &Path) -> ProjectEnv {
        let owner_home = owner_home(root);
        let toolchains = match (&owner_home, policy.sandbox.toolchains.is_empty()) {
            (Some((home, _)), false) => Toolchains::detect(home, &policy.sandbox.toolchains),
            _ => Toolchains::default(),
        };
        let mut path = with_bins(&policy.env.run_path(root), root, &toolchains.bins);
        let links: Vec<(&str, PathBuf)> = ALIASES
            .iter()
            .filter(|(name, _)| resolve_program(name, &path).is_none())
            .filter_map(|(name, target)| Some((*name, resolve_program(target, &path)?)))
            .collect();
        let shim_dir = match links.is_empty() {
            true => None,
            false => {
                let refs: Vec<(&str, &Path)> =
                    links.iter().map(|(n, t)| (*n, t.as_path())).collect();
                crate::sandbox::shim_dir(&refs)
            }
        };
        if let Some(dir) = &shim_dir {
            // Last: a real `python` anywhere on the policy's PATH wins.
            path.push(':');
            path.push_str(&dir.to_string_lossy());
        }
        let venv_bins = policy
            .env
            .project_dirs()
            .filter(|rel| rel.ends_with("/bin"))
            .map(|rel| root.join(rel))
            .collect();
        let git_identity = match (policy_sets_identity(policy), &owner_home) {
            (false, Some((home, uid))) => identity_in(home, *uid),
            _ => Vec::new(),
        };
        let env = toolchains
            .env
            .into_iter()
            .filter(|(k, _)| !policy.env.set.contains_key(k))
            .collect();
        ProjectEnv {
            path,
            shim_dir,
            venv_bins,
            git_identity,
            toolchain_read: toolchains.read,
            env,
        }
    }

    /// `VIRTUAL_ENV` as `activate` would set it, for the first project
    /// PATH directory that is a virtualenv's `bin` (looked at per run: the
    /// agent may create the virtualenv).
    pub(crate) fn virtual_env(&self) -> Option<PathBuf> {
        self.venv_bins
            .iter()
            .filter_map(|bin| bin.parent())
            .find(|venv| venv.join("pyvenv.cfg").is_file())
            .map(Path::to_path_buf)
    }
}

/// Whether the policy's `[env] set` gives git an identity itself.
fn policy_sets_identity(policy: &Policy) -> bool {
    policy
        .env
        .set
        .keys()
        .any(|k| k.starts_with("GIT_AUTHOR_") || k.starts_with("GIT_COMMITTER_"))
}

/// The home and uid of the user who owns `root`: the supervisor's own
/// `$HOME` when that user runs it (as their shell has it), else the
/// passwd database's.
fn owner_home(root: &Path) -> Option<(PathBuf, u32)> {
    let uid = std::fs::metadata(root).ok()?.uid();
    if uid == nix::unistd::geteuid().as_raw()
        && let Some(home) = std::env::var_os("HOME").map(PathBuf::from)
        && home.is_absolute()
    {
        return Some((home, uid));
    }
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    user.dir.is_absolute().then_some((user.dir, uid))
}

/// `path` with `bins` inserted after its leading entries inside `root`
/// (the project's own programs still come first, as `activate` would
/// have them, then the toolchains, then the rest).
fn with_bins(path: &str, root: &Path, bins: &[PathBuf]) -> String {
    if bins.is_empty() {
        return path.to_string();
    }
    let entries: Vec<&str> = path.split(':').collect();
    let at = entries
        .iter()
        .position(|e| !Path::new(e).starts_with(root))
        .unwrap_or(entries.len());
    let bins = bins.iter().map(|b| b.to_string_lossy());
    let mut out: Vec<String> = entries[..at].iter().map(|e| e.to_string()).collect();
    out.extend(bins.map(|b| b.into_owned()));
    out.extend(entries[at..].iter().map(|e| e.to_string()));
    out.join(":")
}

/// `user.name` and `user.email` from the git configuration files of
/// `home` (`~/.gitconfig`, then `~/.config/git/config`), read only when
/// `uid` owns them: a symlink could make the supervisor read something
/// else for them.
fn identity_in(home: &Path, uid: u32) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for file in [home.join(".gitconfig"), home.join(".config/git/config")] {
        let Some(text) = read_owned(&file, uid) else {
            continue;
        };
        for (key, value) in user_entries(&text) {
            if !found.iter().any(|(k, _)| *k == key) {
                found.push((key, value));
            }
        }
    }
    found
}

fn read_owned(file: &Path, uid: u32) -> Option<String> {
    let md = std::fs::symlink_metadata(file).ok()?;
    if !md.is_file() || md.uid() != uid || md.len() > GITCONFIG_MAX {
        return None;
    }
    std::fs::read_to_string(file).ok()
}

/// `user.name` and `user.email` of a git configuration file's `[user]`
/// sections (the last value wins, as in git). Values with quotes,
/// escapes or comments are taken as git would read the simple cases;
/// anything else is skipped rather than guessed.
fn user_entries(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut in_user = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_user = line.eq_ignore_ascii_case("[user]");
            continue;
        }
        if !in_user {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        if key != "name" && key != "email" {
            continue;
        }
        let Some(value) = plain_value(value) else {
            continue;
        };
        let key = format!("user.{key}");
        out.retain(|(k, _)| *k != key);
        out.push((key, value));
    }
    out
}

fn plain_value(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let value = match raw.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"')?,
        None => raw
            .split(['#', ';'])
            .next()
            .map(str::trim)
            .unwrap_or_default(),
    };
    let clean =
        !value.is_empty() && !value.contains(['\\', '"']) && !value.chars().any(char::is_control);
    clean.then(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_section_gives_name_and_email() {
        let text = "[core]\n\tname = not-this\n[user]\n\tname = Ada Lovelace\n\temail = ada@example.org # work\n[User]\n email = \"ada@home.example\"\n[alias]\n email = x\n";
        assert_eq!(
            user_entries(text),
            [
                ("user.name".to_string(), "Ada Lovelace".to_string()),
                ("user.email".to_string(), "ada@home.example".to_string())
            ]
        );
        // Escapes are not guessed at.
        assert!(user_entries("[user]\nname = \"a\\\"b\"\n").is_empty());
    }

    #[test]
    fn the_identity_comes_from_the_owners_files_only() {
        let home = tempfile::tempdir().unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        std::fs::create_dir_all(home.path().join(".config/git")).unwrap();
        std::fs::write(home.path().join(".gitconfig"), "[user]\n name = Ada\n").unwrap();
        std::fs::write(
            home.path().join(".config/git/config"),
            "[user]\n name = Other\n email = ada@example.org\n",
        )
        .unwrap();
        assert_eq!(
            identity_in(home.path(), uid),
            [
                ("user.name".to_string(), "Ada".to_string()),
                ("user.email".to_string(), "ada@example.org".to_string())
            ]
        );
        // Files of another user, or a symlink, are not read.
        assert!(identity_in(home.path(), uid + 1).is_empty());
        std::fs::remove_file(home.path().join(".gitconfig")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", home.path().join(".gitconfig")).unwrap();
        assert_eq!(identity_in(home.path(), uid).len(), 2);
        std::fs::remove_file(home.path().join(".config/git/config")).unwrap();
        assert!(identity_in(home.path(), uid).is_empty());
        assert!(user_entries("[user]\nname = \"a\\\"b\"\n").is_empty());
    }
}
