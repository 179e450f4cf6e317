//! The daemon's listening socket: safe creation, stale-socket recovery, and
//! the peer check every connection passes before a byte is read.

use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use nix::sys::stat::{Mode, umask};
use nix::unistd::{Group, Uid, chown, geteuid};

use super::ServeError;

/// The socket file's owner. Dropping it removes the file, but only while the
/// path still names the socket this process created, so a successor's
/// socket is never deleted by a predecessor shutting down late.
#[derive(Debug)]
pub struct SocketGuard {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketGuard {
    /// Removes the socket file now (stop accepting), keeping the guard inert.
    pub fn remove_file(&mut self) {
        if let Ok(meta) = std::fs::symlink_metadata(&self.path)
            && meta.dev() == self.dev
            && meta.ino() == self.ino
        {
            let _ = std::fs::remove_file(&self.path);
        }
        self.ino = 0;
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if self.ino != 0 {
            self.remove_file();
        }
    }
}

/// Creates the socket at `path` with mode 0600, or 0660 owned by `group`.
///
/// The parent directory must belong to this user and be writable by no one
/// else: whoever can write there could replace the socket with their own and
/// receive the agent's commands. A stale socket (nothing accepts on it) is
/// replaced; a live one is left alone and the start is refused.
///
/// The umask that makes the socket private from its first instant is
/// process-wide: call this while no other thread creates files.
pub fn bind(path: &Path, group: Option<&str>) -> Result<(UnixListener, SocketGuard), ServeError> {
    let bad = |reason: String| ServeError::Socket {
        path: path.to_path_buf(),
        reason,
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::metadata(&parent).map_err(|e| {
        bad(format!(
            "its directory {} is not usable: {e}",
            parent.display()
        ))
    })?;
    if !dir.is_dir() {
        return Err(bad(format!("{} is not a directory", parent.display())));
    }
    let me = geteuid().as_raw();
    if dir.uid() != me {
        return Err(bad(format!(
            "its directory {} belongs to uid {}, not to this user (uid {me})",
            parent.display(),
            dir.uid()
        )));
    }
    if dir.mode() & 0o022 != 0 {
        return Err(bad(format!(
            "its directory {} is writable by other users (mode {:o}); use a private directory",
            parent.display(),
            dir.mode() & 0o7777
        )));
    }
    let gid = match group {
        None => None,
        Some(name) => match Group::from_name(name) {
            Ok(Some(g)) => Some(g.gid),
            Ok(None) => return Err(bad(format!("daemon.socket_group {name:?} does not exist"))),
            Err(e) => return Err(bad(format!("looking up daemon.socket_group {name:?}: {e}"))),
        },
    };

    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(bad(
                    "another daemon is listening on it; stop it first".to_string()
                ));
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                tracing::warn!(socket = %path.display(), "replacing a stale socket left by a previous run");
                std::fs::remove_file(path)
                    .map_err(|e| bad(format!("removing the stale socket: {e}")))?;
            }
            Err(e) => return Err(bad(format!("probing the existing socket: {e}"))),
        },
        Ok(_) => {
            return Err(bad(
                "the path exists and is not a socket; refusing to replace it".to_string(),
            ));
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(bad(e.to_string())),
    }

    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    umask(old);
    let listener = bound.map_err(|e| bad(format!("bind: {e}")))?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| bad(e.to_string()))?;
    let guard = SocketGuard {
        path: path.to_path_buf(),
        dev: meta.dev(),
        ino: meta.ino(),
    };
    if let Some(gid) = gid {
        chown(path, None, Some(gid)).map_err(|e| bad(format!("chown to the socket group: {e}")))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
            .map_err(|e| bad(format!("chmod 0660: {e}")))?;
    } else {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| bad(format!("chmod 0600: {e}")))?;
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| bad(format!("set_nonblocking: {e}")))?;
    Ok((listener, guard))
}

/// The uids allowed to talk to the daemon: the policy's list, or only the
/// daemon's own uid when the list is empty.
pub fn allowed_uids(policy_uids: &[u32]) -> Vec<u32> {
    if policy_uids.is_empty() {
        vec![Uid::effective().as_raw()]
    } else {
        policy_uids.to_vec()
    }
}
