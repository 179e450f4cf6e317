//! The per-run HOME/TMPDIR: private to the child user, removed afterwards.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::SandboxError;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Creates (or checks) the supervisor-owned 0711 base: others may traverse
/// it to reach their own run dir but not list it. A pre-existing base that
/// is a symlink or owned by someone else is refused, since whoever owns it
/// could swap run dirs under us.
pub(crate) fn ensure_base() -> Result<PathBuf, SandboxError> {
    let euid = nix::unistd::Uid::effective().as_raw();
    let base = std::env::temp_dir().join(format!("agent-exec-{euid}"));
    let err = |source| SandboxError::RunDir {
        path: base.clone(),
        source,
    };
    match fs::DirBuilder::new().mode(0o711).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(e)),
    }
    let md = fs::symlink_metadata(&base).map_err(err)?;
    if !md.is_dir() || md.uid() != euid {
        return Err(SandboxError::RunDirBase {
            path: base,
            uid: euid,
        });
    }
    if md.mode() & 0o7777 != 0o711 {
        fs::set_permissions(&base, fs::Permissions::from_mode(0o711)).map_err(err)?;
    }
    Ok(base)
}

/// A directory only the supervisor's user can enter, for state worth
/// keeping between runs of a CLI (it lives under the base of the per-run
/// directories, which children cannot write, so they cannot plant one).
/// `None` when it cannot be made safe.
pub fn private_dir(name: &str) -> Option<PathBuf> {
    let base = ensure_base().ok()?;
    let dir = base.join(name);
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let md = fs::symlink_metadata(&dir).ok()?;
    let euid = nix::unistd::Uid::effective().as_raw();
    (md.is_dir() && md.uid() == euid && md.mode() & 0o077 == 0).then_some(dir)
}

/// Removes run dirs left by supervisors that died without cleaning up.
pub(crate) fn sweep_stale(base: &Path) {
    let Ok(rd) = fs::read_dir(base) else { return };
    for e in rd.flatten() {
        if super::cgroup::is_stale(&e.file_name().to_string_lossy()) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Whether a run dir is as `RunDir::create` made it: a real directory (not
/// a symlink), owned by the child user, mode 0700, with no entry at all.
pub(crate) fn is_pristine(path: &Path, uid: u32) -> bool {
    let Ok(md) = fs::symlink_metadata(path) else {
        return false;
    };
    md.is_dir()
        && md.uid() == uid
        && md.mode() & 0o7777 == 0o700
        && md.nlink() == 2
        && fs::read_dir(path).is_ok_and(|mut rd| rd.next().is_none())
}

/// A run dir; removed on drop.
#[derive(Debug)]
pub(crate) struct RunDir {
    pub path: PathBuf,
}

impl RunDir {
    pub(crate) fn create(base: &Path, uid: u32, gid: u32) -> Result<RunDir, SandboxError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "run-{}-{}-{nanos:08x}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let path = base.join(name);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|source| SandboxError::RunDir {
                path: path.clone(),
                source,
            })?;
        let dir = RunDir { path };
        if nix::unistd::Uid::effective().as_raw() != uid {
            nix::unistd::chown(
                &dir.path,
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .map_err(|source| SandboxError::RunDirChown {
                path: dir.path.clone(),
                source,
            })?;
        }
        Ok(dir)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        // remove_dir_all does not follow symlinks the child may have left.
        if let Err(e) = fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.path.display(), error = %e, "could not remove a run dir");
        }
    }
}
