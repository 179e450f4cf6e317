//! Path questions the engine asks: where a program name resolves, and where
//! an argument really points once `..` and symlinks are followed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// Where a bare program name resolves through `path` (a `PATH` value), the
/// way `execvp` would find it. Names containing `/` and empty or relative
/// `PATH` entries are never resolved: a relative entry means "the current
/// directory", which the agent controls.
pub fn resolve_program(name: &str, path: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    for dir in path.split(':') {
        if !dir.starts_with('/') {
            continue;
        }
        let candidate = Path::new(dir).join(name);
        if is_executable(&candidate) {
            return Some(candidate);
        }
    }
    None
}

/// A regular file (symlinks followed) with an execute bit.
pub(crate) fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How many symlinks one path may traverse before it is treated as a loop
/// (the kernel's own limit).
const SYMLINK_BUDGET: u32 = 40;

/// Resolves `p` against `base` like the kernel would, as far as the path
/// exists: `..` and symlinks (including a dangling last one) are followed;
/// the part that does not exist yet is appended lexically. `None` for a
/// symlink loop. `base` is expected to be canonical.
pub(crate) fn resolve_path(base: &Path, p: &Path) -> Option<PathBuf> {
    let mut budget = SYMLINK_BUDGET;
    resolve_inner(base, p, &mut budget).map(|(path, _)| path)
}

fn resolve_inner(base: &Path, p: &Path, budget: &mut u32) -> Option<(PathBuf, bool)> {
    let mut cur = if p.is_absolute() {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    // Once a component is missing nothing below it can exist, so stop asking
    // the filesystem.
    let mut exists = true;
    for comp in p.components() {
        match comp {
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                cur.pop();
            }
            Component::Normal(name) => {
                cur.push(name);
                if !exists {
                    continue;
                }
                match std::fs::symlink_metadata(&cur) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        if *budget == 0 {
                            return None;
                        }
                        *budget -= 1;
                        let target = std::fs::read_link(&cur).ok()?;
                        cur.pop();
                        let (resolved, target_exists) = resolve_inner(&cur, &target, budget)?;
                        cur = resolved;
                        exists = target_exists;
                    }
                    Ok(_) => {}
                    Err(_) => exists = false,
                }
            }
        }
    }
    Some((cur, exists))
}

/// `p` against `base`, `.` and `..` removed without touching the
/// filesystem: the one normalization the policy and the service's
/// provenance ledger share, so both name a path alike.
pub fn normalize_lexically(base: &Path, p: &Path) -> PathBuf {
    let mut cur = if p.is_absolute() {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    for comp in p.components() {
        match comp {
            Component::ParentDir => {
                cur.pop();
            }
            Component::Normal(name) => cur.push(name),
            _ => {}
        }
    }
    cur
}

pub(crate) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// True when the word is a symlink (one `lstat`); used for bare operands,
/// which are only looked at when they could redirect somewhere else.
pub(crate) fn is_symlink(base: &Path, name: &str) -> bool {
    std::fs::symlink_metadata(base.join(OsStr::from_bytes(name.as_bytes())))
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}
