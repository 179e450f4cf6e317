//! Who the child runs as, decided in the parent.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::unistd::{Uid, User};

use super::SandboxError;

/// The credentials the child takes, and whether the supervisor can change
/// them (only root can).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Creds {
    pub uid: u32,
    pub gid: u32,
    /// The supervisor is root: drop the bounding set, lock securebits and
    /// switch ids. A non-root supervisor has nothing to drop (no_new_privs
    /// keeps file capabilities and setuid bits inert).
    pub privileged: bool,
}

/// Resolves `run_as` (a name or a numeric uid) per the policy's rules.
pub fn resolve(
    run_as: Option<&str>,
    allow_root_child: bool,
    root: &Path,
) -> Result<Creds, SandboxError> {
    let euid = Uid::effective();
    if !euid.is_root() {
        return Ok(Creds {
            uid: euid.as_raw(),
            gid: nix::unistd::Gid::effective().as_raw(),
            privileged: false,
        });
    }
    let lookup_err = |who: &str, e: String| SandboxError::User(format!("run_as {who:?}: {e}"));
    let user = match run_as {
        Some(spec) => {
            if let Ok(n) = spec.parse::<u32>() {
                match User::from_uid(Uid::from_raw(n))
                    .map_err(|e| lookup_err(spec, e.to_string()))?
                {
                    Some(u) => (u.uid.as_raw(), u.gid.as_raw()),
                    // A uid without a passwd entry is legitimate in
                    // containers; give it the same-numbered group.
                    None => (n, n),
                }
            } else {
                let u = User::from_name(spec)
                    .map_err(|e| lookup_err(spec, e.to_string()))?
                    .ok_or_else(|| lookup_err(spec, "no such user".into()))?;
                (u.uid.as_raw(), u.gid.as_raw())
            }
        }
        None if allow_root_child => (0, 0),
        None => {
            let md = std::fs::metadata(root)
                .map_err(|e| SandboxError::Io(format!("{}: {e}", root.display())))?;
            if md.uid() != 0 {
                (md.uid(), md.gid())
            } else {
                let u = User::from_name("nobody")
                    .map_err(|e| lookup_err("nobody", e.to_string()))?
                    .ok_or_else(|| {
                        lookup_err("nobody", "no such user; set sandbox.run_as".into())
                    })?;
                (u.uid.as_raw(), u.gid.as_raw())
            }
        }
    };
    if user.0 == 0 && !allow_root_child {
        return Err(SandboxError::User(
            "the child would run as root; set sandbox.run_as to another user or allow_root_child = true".into(),
        ));
    }
    Ok(Creds {
        uid: user.0,
        gid: user.1,
        privileged: true,
    })
}

/// Whether `uid`/`gid` can create files in `dir` by its mode bits (root
/// always can). Supplementary groups are cleared in the child, so only the
/// primary group counts.
pub fn can_write(dir: &Path, uid: u32, gid: u32) -> bool {
    if uid == 0 {
        return true;
    }
    let Ok(md) = std::fs::metadata(dir) else {
        return false;
    };
    let mode = md.mode();
    if md.uid() == uid {
        mode & 0o300 == 0o300
    } else if md.gid() == gid {
        mode & 0o030 == 0o030
    } else {
        mode & 0o003 == 0o003
    }
}

/// Highest capability number the kernel knows.
pub fn cap_last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}
