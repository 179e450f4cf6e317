//! Who the child runs as, decided in the parent.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::unistd::{Uid, User};

use crate::error::SandboxError;
use crate::spawn::Creds;

/// Resolves `run_as` (a name or a numeric uid) per the policy's rules.
/// Without one, the root's owner; for a root-owned root, uid 0 (without
/// capabilities) when `root_owned_as_root`, else `nobody`.
pub(crate) fn resolve(
    run_as: Option<&str>,
    allow_root_child: bool,
    root_owned_as_root: bool,
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
    let lookup_err = |who: &str, source| SandboxError::UserLookup {
        who: who.to_string(),
        source,
    };
    let no_user = |who: &str, why: &str| SandboxError::User(format!("run_as {who:?}: {why}"));
    let user = match run_as {
        Some(spec) => {
            if let Ok(n) = spec.parse::<u32>() {
                match User::from_uid(Uid::from_raw(n)).map_err(|e| lookup_err(spec, e))? {
                    Some(u) => (u.uid.as_raw(), u.gid.as_raw()),
                    // A uid without a passwd entry is legitimate in
                    // containers; give it the same-numbered group.
                    None => (n, n),
                }
            } else {
                let u = User::from_name(spec)
                    .map_err(|e| lookup_err(spec, e))?
                    .ok_or_else(|| no_user(spec, "no such user"))?;
                (u.uid.as_raw(), u.gid.as_raw())
            }
        }
        None if allow_root_child => (0, 0),
        None => {
            let md = std::fs::metadata(root).map_err(|source| SandboxError::Metadata {
                path: root.to_path_buf(),
                source,
            })?;
            if md.uid() != 0 {
                (md.uid(), md.gid())
            } else if root_owned_as_root {
                return Ok(Creds {
                    uid: 0,
                    gid: 0,
                    privileged: true,
                });
            } else {
                let u = User::from_name("nobody")
                    .map_err(|e| lookup_err("nobody", e))?
                    .ok_or_else(|| no_user("nobody", "no such user; set sandbox.run_as"))?;
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
pub(crate) fn can_write(dir: &Path, uid: u32, gid: u32) -> bool {
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

/// Highest capability number the kernel knows; read once a process (the
/// one-shot CLI sets up twice: stdio first, then the run's layers).
pub(crate) fn cap_last_cap() -> u32 {
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63)
    })
}
