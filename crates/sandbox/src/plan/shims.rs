//! A directory of program aliases every run may read and execute: where a
//! host has only `python3`, agents and scripts still call `python`. It
//! lives under the base of the run directories, which only the
//! supervisor's user can write, so a run cannot change what an alias
//! points to.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Name of the alias directory under the run directories' base.
const SHIM_DIR: &str = "bin";

/// Makes (or updates) the alias directory with one symlink per
/// `(name, target)` and returns its path; `None` when it cannot be made
/// safe (then runs simply have no aliases). Targets must be absolute.
pub fn shim_dir(links: &[(&str, &Path)]) -> Option<PathBuf> {
    let base = super::rundir::ensure_base().ok()?;
    let dir = base.join(SHIM_DIR);
    match fs::DirBuilder::new().mode(0o755).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let md = fs::symlink_metadata(&dir).ok()?;
    let euid = nix::unistd::Uid::effective().as_raw();
    if !md.is_dir() || md.uid() != euid || md.mode() & 0o022 != 0 {
        return None;
    }
    for (name, target) in links {
        if name.contains('/') || name.starts_with('.') || !target.is_absolute() {
            continue;
        }
        let link = dir.join(name);
        if fs::read_link(&link).is_ok_and(|t| t == *target) {
            continue;
        }
        // Made aside and renamed over: a concurrent run never sees the
        // alias missing.
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        if std::os::unix::fs::symlink(target, &tmp).is_err() || fs::rename(&tmp, &link).is_err() {
            let _ = fs::remove_file(&tmp);
        }
    }
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_point_where_asked_and_are_updated() {
        let dir = shim_dir(&[("shim-test-a", Path::new("/bin/true"))]).unwrap();
        assert_eq!(
            fs::read_link(dir.join("shim-test-a")).unwrap(),
            Path::new("/bin/true")
        );
        shim_dir(&[("shim-test-a", Path::new("/bin/false"))]).unwrap();
        assert_eq!(
            fs::read_link(dir.join("shim-test-a")).unwrap(),
            Path::new("/bin/false")
        );
        // Names that would leave the directory, or hide, are skipped.
        shim_dir(&[
            ("../x", Path::new("/bin/true")),
            (".h", Path::new("/bin/true")),
        ])
        .unwrap();
        assert!(!dir.join(".h").exists());
        let _ = fs::remove_file(dir.join("shim-test-a"));
    }
}
