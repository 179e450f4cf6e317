//! A minimal `/etc/passwd` and `/etc/group` for runs with a mount
//! namespace of their own: `root`, `nobody` and the run's user, so `ls -l`
//! and `id` print names and `getpwuid` finds the user, while the host's
//! accounts stay out of view. Written under the run directories' base
//! (only the supervisor's user can write there) and bound read-only over
//! the host's files in each run's view.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The pair for a child of `uid`/`gid`, made (or refreshed) under `base`:
/// `(passwd, group)`. `None` when they cannot be made safely.
pub(crate) fn files(base: &Path, uid: u32, gid: u32) -> Option<(PathBuf, PathBuf)> {
    let dir = base.join(format!("identity-{uid}-{gid}"));
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
    // Names are looked up only for the lines that need them: a lookup of
    // a uid the files do not list walks every NSS source (about 50 µs
    // here, with systemd's).
    let mut passwd = String::from("root:x:0:0:root:/root:/bin/sh\n");
    passwd.push_str("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    if uid != 0 && uid != 65534 {
        let user = name_of_user(uid);
        passwd.push_str(&format!(
            "{user}:x:{uid}:{gid}:{user}:/nonexistent:/bin/sh\n"
        ));
    }
    let mut groups = String::from("root:x:0:\nnogroup:x:65534:\n");
    if gid != 0 && gid != 65534 {
        let group = name_of_group(gid);
        groups.push_str(&format!("{group}:x:{gid}:\n"));
    }
    let p = write(&dir, "passwd", &passwd)?;
    let g = write(&dir, "group", &groups)?;
    Some((p, g))
}

/// Written aside and renamed over, so a run never sees half a file.
fn write(dir: &Path, name: &str, text: &str) -> Option<PathBuf> {
    let path = dir.join(name);
    if fs::read_to_string(&path).is_ok_and(|t| t == text) {
        return Some(path);
    }
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .ok()?;
    f.write_all(text.as_bytes()).ok()?;
    fs::rename(&tmp, &path).ok()?;
    Some(path)
}

/// The host's name for `uid` when it is a plain one, else `agent`.
fn name_of_user(uid: u32) -> String {
    let host = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name);
    plain(host).unwrap_or_else(|| "agent".into())
}

fn name_of_group(gid: u32) -> String {
    let host = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|g| g.name);
    plain(host).unwrap_or_else(|| "agent".into())
}

/// A name that cannot break the file's lines.
fn plain(name: Option<String>) -> Option<String> {
    name.filter(|n| {
        !n.is_empty()
            && n.len() <= 32
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_nobody_and_the_user() {
        let base = tempfile::tempdir().unwrap();
        let (p, g) = files(base.path(), 47999, 47999).unwrap();
        let passwd = fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = passwd.lines().collect();
        assert_eq!(lines.len(), 3, "{passwd}");
        assert!(lines[0].starts_with("root:x:0:0:"));
        assert!(lines[1].starts_with("nobody:x:65534:"));
        assert!(lines[2].contains(":x:47999:47999:"), "{passwd}");
        assert!(fs::read_to_string(&g).unwrap().contains(":x:47999:"));
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o644);
        // Root's own pair has no third line; a second call changes nothing.
        let (p0, _) = files(base.path(), 0, 0).unwrap();
        assert_eq!(fs::read_to_string(&p0).unwrap().lines().count(), 2);
        assert_eq!(files(base.path(), 47999, 47999), Some((p, g)));
        assert_eq!(plain(Some("a:b".into())), None);
    }
}
