//! The per-run HOME/TMPDIR: private to the child user, removed afterwards,
//! under a base directory only the supervisor's user (or root) could have
//! made.
//!
//! Why not a fixed name in the shared temp directory: any local user can
//! create `/tmp/agent-exec-<uid>` first, as a directory of their own or a
//! symlink, and so block every run of that uid or steer its run
//! directories into a tree they control. The base is therefore chosen
//! among places whose every ancestor belongs to root or the supervisor's
//! user and is writable by nobody else:
//! - root: `/var/lib/agent-exec/run` (on disk: run directories are the
//!   children's TMPDIR, which must not fill the small `/run` tmpfs the
//!   host's services need), else `/run/agent-exec`;
//! - another user: `$XDG_RUNTIME_DIR/agent-exec` when that directory is the
//!   user's own with mode 0700, else `~/.cache/agent-exec`;
//! - either, when none of those can be used (a read-only `/var`, a user
//!   without a home): a directory with a random name in the temp
//!   directory, made for this process alone. Nobody can create it first,
//!   and nobody can rename it away in a sticky directory.
//!
//! Whatever the base, it is opened without following a symlink after it
//! is made and must then be owned by the supervisor's user and writable by
//! nobody else, or the setup is refused.

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{OFlag, open};
use nix::sys::stat::{Mode, fchmod, fstat};

use crate::error::SandboxError;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Mode of the base: others may traverse it to reach their own run dir
/// (a root supervisor's child is another user) but not list it.
const BASE_MODE: u32 = 0o711;

/// Name prefix of the per-process fallback bases in the temp directory.
const FALLBACK_PREFIX: &str = "agent-exec-";

/// Creates (or checks) the base of the per-run directories and returns
/// it. The first base found is kept for the life of the process (the
/// per-process fallback must stay the same), and checked again at each
/// call.
pub(crate) fn ensure_base() -> Result<PathBuf, SandboxError> {
    static CHOSEN: OnceLock<PathBuf> = OnceLock::new();
    let euid = nix::unistd::Uid::effective().as_raw();
    if let Some(base) = CHOSEN.get() {
        return make_base(base, euid).map(|()| base.clone());
    }
    let base = choose_base(euid)?;
    Ok(CHOSEN.get_or_init(|| base).clone())
}

/// The first usable base for `euid` (see the module's documentation).
fn choose_base(euid: u32) -> Result<PathBuf, SandboxError> {
    for (parent, name) in preferred_places(euid) {
        let Some(parent) = trusted_dir(&parent, euid, false) else {
            continue;
        };
        let base = parent.join(name);
        match make_base(&base, euid) {
            Ok(()) => return Ok(base),
            // Could not be made here (read-only, no space): the next place.
            Err(SandboxError::RunDir { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    fallback_base(euid)
}

/// Directories a base may be made in, with its name there, most preferred
/// first. For root `/var/lib/agent-exec` itself is made when missing, for
/// another user `~/.cache`.
fn preferred_places(euid: u32) -> Vec<(PathBuf, &'static str)> {
    if euid == 0 {
        let lib = Path::new("/var/lib/agent-exec");
        if trusted_dir(Path::new("/var/lib"), 0, false).is_some() {
            let _ = fs::DirBuilder::new().mode(0o755).create(lib);
        }
        return vec![
            (lib.to_path_buf(), "run"),
            (PathBuf::from("/run"), "agent-exec"),
        ];
    }
    let mut places = Vec::new();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && runtime.is_absolute()
        && fs::symlink_metadata(&runtime)
            .is_ok_and(|m| m.is_dir() && m.uid() == euid && m.mode() & 0o077 == 0)
    {
        places.push((runtime, "agent-exec"));
    }
    if let Some(home) = home_dir(euid) {
        let cache = home.join(".cache");
        if trusted_dir(&home, euid, false).is_some() {
            let _ = fs::DirBuilder::new().mode(0o700).create(&cache);
        }
        places.push((cache, "agent-exec"));
    }
    places
}

/// `$HOME` when absolute, else the user's passwd entry.
fn home_dir(euid: u32) -> Option<PathBuf> {
    match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if h.is_absolute() => Some(h),
        _ => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(euid))
            .ok()
            .flatten()
            .map(|u| u.dir),
    }
}

/// `dir`'s canonical path when only root and `euid` can add, rename or
/// remove entries anywhere on the way to it: every directory on the path
/// belongs to one of them, and none is writable by group or others, except
/// an ancestor with the sticky bit (such as `/tmp`), where only an entry's
/// owner may rename or remove it. `dir` itself may be such a sticky
/// directory only with `sticky_ok` (a fresh random name is made in it).
fn trusted_dir(dir: &Path, euid: u32, sticky_ok: bool) -> Option<PathBuf> {
    let real = dir.canonicalize().ok()?;
    let mut at = PathBuf::new();
    for c in real.components() {
        match c {
            Component::RootDir | Component::Normal(_) => at.push(c),
            _ => return None,
        }
        let md = fs::symlink_metadata(&at).ok()?;
        let shared = md.mode() & 0o022 != 0;
        let sticky = md.mode() & 0o1000 != 0;
        let last = at == real;
        let shared_ok = sticky && (!last || sticky_ok);
        if !md.is_dir() || (md.uid() != 0 && md.uid() != euid) || (shared && !shared_ok) {
            return None;
        }
    }
    Some(real)
}

/// Makes `base` when missing and checks what is there, through a
/// descriptor opened without following a symlink: a directory owned by
/// `euid`, writable by nobody else; its mode is then set to 0711.
fn make_base(base: &Path, euid: u32) -> Result<(), SandboxError> {
    match fs::DirBuilder::new().mode(BASE_MODE).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(SandboxError::RunDir {
                path: base.to_path_buf(),
                source,
            });
        }
    }
    let refused = || SandboxError::RunDirBase {
        path: base.to_path_buf(),
        uid: euid,
    };
    let fd = open_nofollow_dir(base).map_err(|_| refused())?;
    let st = fstat(&fd).map_err(|_| refused())?;
    if st.st_uid != euid || st.st_mode & 0o022 != 0 {
        return Err(refused());
    }
    if st.st_mode & 0o7777 != BASE_MODE {
        fchmod(&fd, Mode::from_bits_truncate(BASE_MODE)).map_err(|e| SandboxError::RunDir {
            path: base.to_path_buf(),
            source: e.into(),
        })?;
    }
    Ok(())
}

fn open_nofollow_dir(path: &Path) -> nix::Result<OwnedFd> {
    open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// A base with a random name in the temp directory, for this process only.
fn fallback_base(euid: u32) -> Result<PathBuf, SandboxError> {
    let tmp = std::env::temp_dir();
    let Some(parent) = trusted_dir(&tmp, euid, true) else {
        return Err(SandboxError::RunDirUntrusted {
            path: tmp,
            uid: euid,
        });
    };
    let mut last = None;
    for _ in 0..16 {
        let base = parent.join(format!(
            "{FALLBACK_PREFIX}{euid}-{}-{:016x}",
            std::process::id(),
            random_u64()
        ));
        // A fresh name: an entry already there was made by someone else.
        match fs::DirBuilder::new().mode(BASE_MODE).create(&base) {
            Ok(()) => return make_base(&base, euid).map(|()| base),
            Err(e) => last = Some((base, e)),
        }
    }
    let (path, source) = last.unwrap_or_else(|| (parent, std::io::ErrorKind::Other.into()));
    Err(SandboxError::RunDir { path, source })
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    match fs::File::open("/dev/urandom").and_then(|f| std::io::Read::read_exact(&mut &f, &mut b)) {
        Ok(()) => u64::from_ne_bytes(b),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            nanos ^ (u64::from(std::process::id()) << 32) ^ SEQ.fetch_add(1, Ordering::Relaxed)
        }
    }
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

/// Removes run dirs left by supervisors that died without cleaning up, and
/// the per-process fallback bases of dead supervisors of this user.
pub(crate) fn sweep_stale(base: &Path) {
    if let Ok(rd) = fs::read_dir(base) {
        for e in rd.flatten() {
            if super::cgroup::is_stale(&e.file_name().to_string_lossy()) {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    sweep_fallbacks(base, &std::env::temp_dir(), std::time::SystemTime::now());
}

/// How often a base's processes search the temp directory for dead
/// supervisors' fallback bases. Not on every call: the temp directory is
/// shared and often large (415 entries on the project's machine, 0.25 ms
/// of `getdents` a search and 0.3-0.6 ms of a one-shot call; BENCHMARKS.md),
/// while a fallback base is rare (made only where no preferred place can
/// be used) and small. One left by a crash is gone within this long of a
/// later call.
const TEMP_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The file in a base whose modification time says when its processes last
/// searched the temp directory; only the base's user can write it.
const TEMP_SWEPT: &str = "temp-swept";

/// Removes from `temp` the fallback bases of this user's dead supervisors,
/// unless a process of `base` searched it less than [`TEMP_SWEEP_EVERY`]
/// before `now`. A fallback base of this process's own is new, without
/// the file: its process searches at once.
fn sweep_fallbacks(base: &Path, temp: &Path, now: std::time::SystemTime) {
    let marker = base.join(TEMP_SWEPT);
    let recent = fs::symlink_metadata(&marker)
        .and_then(|m| m.modified())
        .is_ok_and(|at| {
            // A time ahead of `now` (the clock was set back) is not recent.
            now.duration_since(at)
                .is_ok_and(|age| age < TEMP_SWEEP_EVERY)
        });
    if recent {
        return;
    }
    // Written before the search, so that calls coming while it runs do
    // not search too. Its time is `now`, so the interval is measured on
    // one clock.
    let _ = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&marker)
        .and_then(|f| f.set_modified(now));
    let euid = nix::unistd::Uid::effective().as_raw();
    let prefix = format!("{FALLBACK_PREFIX}{euid}-");
    let Ok(rd) = fs::read_dir(temp) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        // Only a directory this user made (never a symlink, never another
        // user's entry), named by a supervisor that is gone.
        let ours = fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == euid);
        if ours && super::cgroup::is_stale(&format!("run-{rest}")) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_supervisors_fallback_bases_are_swept_at_most_once_a_while() {
        let euid = nix::unistd::Uid::effective().as_raw();
        let (base, temp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // No process has a pid this high: a supervisor that is gone.
        let dead: u32 = fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let named = |pid: u32, n: u64| {
            temp.path()
                .join(format!("{FALLBACK_PREFIX}{euid}-{pid}-{n:016x}"))
        };
        let make = |dir: &Path| {
            fs::create_dir(dir).unwrap();
            fs::write(dir.join("left"), b"x").unwrap();
        };
        let live = named(std::process::id(), 1);
        let other = temp.path().join("agent-exec-someone-else");
        for dir in [&named(dead, 1), &live, &other] {
            make(dir);
        }
        let now = std::time::SystemTime::now();
        sweep_fallbacks(base.path(), temp.path(), now);
        assert!(!named(dead, 1).exists(), "a dead supervisor's base stayed");
        assert!(live.exists() && other.exists());
        // Searched a moment ago: one that died since is left for later...
        make(&named(dead, 2));
        sweep_fallbacks(base.path(), temp.path(), now + TEMP_SWEEP_EVERY / 2);
        assert!(
            named(dead, 2).exists(),
            "searched again within the interval"
        );
        // ...and removed by the first call after the interval.
        sweep_fallbacks(base.path(), temp.path(), now + TEMP_SWEEP_EVERY);
        assert!(!named(dead, 2).exists());
        // A search recorded ahead of the clock (set back) holds none off.
        make(&named(dead, 3));
        sweep_fallbacks(base.path(), temp.path(), now);
        assert!(!named(dead, 3).exists());
        assert!(live.exists() && other.exists());
    }

    #[test]
    fn a_shared_directory_is_not_trusted_unless_sticky_is_allowed() {
        let euid = nix::unistd::Uid::effective().as_raw();
        let tmp = std::env::temp_dir().canonicalize().unwrap();
        let md = fs::metadata(&tmp).unwrap();
        if md.mode() & 0o1022 == 0o1002 || md.mode() & 0o1022 == 0o1022 {
            assert_eq!(trusted_dir(&tmp, euid, false), None);
            assert_eq!(trusted_dir(&tmp, euid, true), Some(tmp.clone()));
        }
        // A directory another uid owns, or that others may write, is out;
        // so is anything beneath it.
        let d = tempfile::tempdir().unwrap();
        let own = d.path().join("own");
        fs::create_dir(&own).unwrap();
        fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let open = d.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        fs::create_dir(open.join("inner")).unwrap();
        assert_eq!(trusted_dir(&open, euid, false), None);
        assert_eq!(trusted_dir(&open, euid, true), None);
        assert_eq!(trusted_dir(&open.join("inner"), euid, true), None);
        // Beneath a sticky directory, an entry of our own is ours alone.
        let sticky = d.path().join("sticky");
        fs::create_dir(&sticky).unwrap();
        fs::set_permissions(
            &sticky,
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        )
        .unwrap();
        fs::create_dir(sticky.join("mine")).unwrap();
        assert_eq!(trusted_dir(&sticky, euid, false), None);
        assert!(trusted_dir(&sticky, euid, true).is_some());
        assert!(trusted_dir(&sticky.join("mine"), euid, false).is_some());
        if euid == 0 {
            std::os::unix::fs::chown(&own, Some(4321), Some(4321)).unwrap();
            assert_eq!(trusted_dir(&own, euid, false), None);
        }
    }

    #[test]
    fn a_base_that_is_a_symlink_or_anothers_is_refused() {
        let euid = nix::unistd::Uid::effective().as_raw();
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        fs::create_dir(&target).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            make_base(&link, euid),
            Err(SandboxError::RunDirBase { .. })
        ));
        let fresh = d.path().join("fresh");
        make_base(&fresh, euid).unwrap();
        assert_eq!(fs::metadata(&fresh).unwrap().mode() & 0o7777, BASE_MODE);
        if euid == 0 {
            std::os::unix::fs::chown(&fresh, Some(4321), Some(4321)).unwrap();
            assert!(matches!(
                make_base(&fresh, euid),
                Err(SandboxError::RunDirBase { .. })
            ));
        }
    }
}
