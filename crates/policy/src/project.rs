//! The project's own environment: `[env] path` entries written
//! `{root}/...` (a virtualenv's `bin`, `node_modules/.bin`) are the
//! project's programs. They go on the run's PATH, and a program found in
//! one matches its rule by name: `.venv/bin/python -m pytest` is decided
//! like `python -m pytest`.
//!
//! Why that is safe to allow: whatever the project puts in those
//! directories is code of the project, which its tests and builds run
//! anyway; the kernel sandbox contains what it does. Refusing rules still
//! match such a program by its name too, so a `git` planted there meets
//! the `git push` refusal like the real one.

use std::path::{Component, Path, PathBuf};

use crate::EnvPolicy;
use crate::resolve::normalize_lexically;

/// How an `[env] path` entry names the project root.
pub const ROOT_PLACEHOLDER: &str = "{root}";

impl EnvPolicy {
    /// The `[env] path` entries inside the project, relative to the root
    /// (`.venv/bin`); empty for a policy without `{root}` entries.
    pub fn project_dirs(&self) -> impl Iterator<Item = &str> {
        self.path.split(':').filter_map(project_rel)
    }

    /// The PATH of a run in `root`: `[env] path` with `{root}` replaced.
    pub fn run_path(&self, root: &Path) -> String {
        let root = root.to_string_lossy();
        self.path
            .split(':')
            .map(|entry| match project_rel(entry) {
                Some("") => root.to_string(),
                Some(rel) => format!("{root}/{rel}"),
                None => entry.to_string(),
            })
            .collect::<Vec<_>>()
            .join(":")
    }
}

/// `.venv/bin` for `{root}/.venv/bin`, `""` for `{root}` itself.
fn project_rel(entry: &str) -> Option<&str> {
    let rest = entry.strip_prefix(ROOT_PLACEHOLDER)?;
    if rest.is_empty() {
        return Some("");
    }
    rest.strip_prefix('/')
}

/// Why a `{root}` entry of `[env] path` cannot be used, if it cannot: it
/// must stay inside the root, spelled plainly.
pub(crate) fn check_path_entries(path: &str) -> Option<String> {
    for entry in path.split(':') {
        if entry.contains(ROOT_PLACEHOLDER) && project_rel(entry).is_none() {
            return Some(format!(
                "`{entry}`: {ROOT_PLACEHOLDER} may only start an entry, followed by `/` and a path inside the root"
            ));
        }
        if let Some(rel) = project_rel(entry) {
            let plain = Path::new(rel)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
            if !plain {
                return Some(format!(
                    "`{entry}`: a path inside the root without `.`, `..` or `//`"
                ));
            }
        }
    }
    None
}

/// The name `prog` matches rules under when it is one of the project's
/// programs: a bare name found in a project directory, or a path whose
/// directory is one. `None` otherwise.
pub(crate) fn project_program<'w>(
    env: &EnvPolicy,
    root: &Path,
    cwd: &Path,
    prog: &'w str,
) -> Option<&'w str> {
    let mut dirs = env.project_dirs().map(|rel| root.join(rel)).peekable();
    dirs.peek()?;
    if !prog.contains('/') {
        let found = dirs
            .into_iter()
            .any(|d| crate::resolve::is_executable(&d.join(prog)));
        return found.then_some(prog);
    }
    let at: PathBuf = normalize_lexically(cwd, Path::new(prog));
    let parent = at.parent()?;
    let name = at.file_name()?.to_str()?;
    let inside = dirs.into_iter().any(|d| d == parent);
    // The name the rules know is the file's, which is the word's last part.
    (inside && prog.ends_with(name)).then(|| crate::resolve::basename(prog))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: &str) -> EnvPolicy {
        EnvPolicy {
            path: path.into(),
            ..EnvPolicy::default()
        }
    }

    #[test]
    fn root_entries_are_expanded_in_place() {
        let e = env("{root}/.venv/bin:{root}/node_modules/.bin:/usr/bin:{root}");
        assert_eq!(
            e.run_path(Path::new("/p")),
            "/p/.venv/bin:/p/node_modules/.bin:/usr/bin:/p"
        );
        assert_eq!(
            e.project_dirs().collect::<Vec<_>>(),
            [".venv/bin", "node_modules/.bin", ""]
        );
        assert_eq!(env("/usr/bin").project_dirs().count(), 0);
    }

    #[test]
    fn root_entries_must_stay_inside() {
        assert!(check_path_entries("{root}/.venv/bin:/usr/bin").is_none());
        for bad in [
            "{root}/../x",
            "{root}/a/../../x",
            "/x{root}",
            "{root}x",
            "{root}/./bin",
            "{root}//bin",
        ] {
            assert!(check_path_entries(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_program_in_a_project_dir_keeps_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let bin = root.join(".venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let py = bin.join("python");
        std::fs::write(&py, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&py, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let e = env("{root}/.venv/bin:/usr/bin");
        let sub = root.join("src");
        assert_eq!(project_program(&e, &root, &root, "python"), Some("python"));
        assert_eq!(
            project_program(&e, &root, &root, ".venv/bin/python"),
            Some("python")
        );
        assert_eq!(
            project_program(&e, &root, &sub, "../.venv/bin/python"),
            Some("python")
        );
        // Elsewhere in the root, or not there at all: not the project's.
        assert_eq!(project_program(&e, &root, &root, "./python"), None);
        assert_eq!(project_program(&e, &root, &root, "pytest"), None);
        assert_eq!(
            project_program(&env("/usr/bin"), &root, &root, "python"),
            None
        );
    }
}
