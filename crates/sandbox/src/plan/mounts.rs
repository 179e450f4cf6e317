//! The run's own mount namespace, decided in the parent once per sandbox:
//! which host directories a run gets private copies of, which it does not
//! see at all, and which paths beneath them stay visible because the
//! sandbox grants them. The child applies it (`crate::spawn::mounts`),
//! from one tmpfs of the run's own.
//!
//! - `/tmp`, `/var/tmp` and `/dev/shm` become private directories of that
//!   tmpfs, writable by the child user (mode 1777) and gone with the run's
//!   last process. Its size limit bounds what a run can keep in memory
//!   there (all three together); with a cgroup memory limit the pages also
//!   count against it.
//! - `/run` (and `/var/run` when it is a directory of its own), `/home`
//!   and `/root` are covered by an empty read-only directory of it: their
//!   sockets, users' files and even their metadata (which Landlock cannot
//!   hide) are gone from the run's view.
//! - A path the sandbox grants (the root, `read` and `write` paths, the
//!   run's own directory) that lies beneath a covered directory is bound
//!   back at its own path. A directory that a granted path equals or
//!   contains is not covered at all: the grant wins. Neither is a scratch
//!   directory with a granted path beneath it (a root under `/tmp`): its
//!   read-write Landlock rule would reach the path bound back beneath it.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use std::os::unix::fs::MetadataExt;

use crate::spawn::mounts::{Cover, Dir, FileBind, Keep, MountPlan, SCRATCH_MAX};

/// Private writable directories.
const SCRATCH: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Directories the run does not see.
const HIDDEN: &[&str] = &["/run", "/var/run", "/home", "/root"];

/// The run's tmpfs: what `/tmp`, `/var/tmp` and `/dev/shm` may hold
/// together. The root directory is reachable only while the covers are
/// made.
const TMPFS_DATA: &CStr = c"size=512m,nr_inodes=65536,mode=755";

/// The covers of one sandbox, and where its runs' own directories go.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The first is the staging point (see `crate::spawn::mounts`).
    covers: Vec<Cover>,
    run_base: Option<RunBase>,
    /// Files bound over host files (the synthesized `/etc/passwd`).
    files: Vec<FileBind>,
    /// The runs make their namespaces in a user namespace of their own
    /// (a non-root supervisor), where only their own ids are mapped.
    in_user_namespace: bool,
}

/// The base of the run directories, when it lies beneath a cover.
#[derive(Debug)]
struct RunBase {
    cover: usize,
    /// Canonical.
    base: PathBuf,
    /// The base relative to the cover.
    rel: PathBuf,
    /// The directories from the cover down to the base, the base included.
    dirs: Vec<Dir>,
}

fn cstring(p: &Path) -> Option<CString> {
    CString::new(p.as_os_str().as_bytes()).ok()
}

/// `path` as a directory made like the host's: its mode (permission and
/// sticky bits) and owner, or 0711 and root when it cannot be read.
fn like_host(path: &Path) -> Option<Dir> {
    let (mode, uid, gid) = match std::fs::metadata(path) {
        Ok(md) => (md.mode() & 0o1777, md.uid(), md.gid()),
        Err(_) => (0o711, 0, 0),
    };
    Some(Dir {
        path: cstring(path)?,
        mode,
        uid,
        gid,
    })
}

/// `dir` and its ancestors up to (not including) `cover`, outermost
/// first, each made like the host's. `dir` must lie beneath `cover`.
fn chain(cover: &Path, dir: &Path) -> Option<Vec<Dir>> {
    let mut dirs: Vec<Dir> = Vec::new();
    let mut at = dir;
    while at != cover {
        dirs.push(like_host(at)?);
        at = at.parent()?;
    }
    dirs.reverse();
    Some(dirs)
}

impl Layout {
    /// The covers for children that may use `granted` (canonical paths,
    /// with whether each is a directory), of which they may write those in
    /// `writable` and what lies beneath them, and whose run directories
    /// are made in `run_base`.
    pub(crate) fn new(
        granted: &[(PathBuf, bool)],
        writable: &[PathBuf],
        run_base: &Path,
    ) -> Layout {
        let run_base = run_base.canonicalize().ok();
        let mut chosen: Vec<(PathBuf, bool)> = Vec::new();
        let kinds = SCRATCH
            .iter()
            .map(|p| (*p, true))
            .chain(HIDDEN.iter().map(|p| (*p, false)));
        for (path, scratch) in kinds {
            // A symlink (`/var/run` -> `/run`) is covered where it lands.
            let Ok(real) = Path::new(path).canonicalize() else {
                continue;
            };
            let granted_over = granted.iter().any(|(g, _)| real.starts_with(g));
            // A scratch directory gets a read-write Landlock rule, and
            // Landlock judges a path by every directory above it, mount
            // points included: a writable path bound back beneath it (a
            // root under /tmp) would become writable in a read-only run.
            // Such a scratch directory stays the host's. A path granted
            // only for reading is bound back read-only (`Keep::remount`),
            // which no Landlock right can widen.
            let grants_beneath = scratch && writable.iter().any(|g| g.starts_with(&real));
            let overlaps = chosen
                .iter()
                .any(|(p, _)| real.starts_with(p) || p.starts_with(&real));
            let in_run_base = run_base.as_deref().is_some_and(|b| real.starts_with(b));
            let scratch_full = scratch && chosen.iter().filter(|(_, s)| *s).count() >= SCRATCH_MAX;
            if real.is_dir()
                && !granted_over
                && !grants_beneath
                && !overlaps
                && !in_run_base
                && !scratch_full
            {
                chosen.push((real, scratch));
            }
        }
        // The staging point: a hidden directory where one is covered (the
        // tmpfs's root, beneath it, is never seen), one with nothing kept
        // by preference (no descriptor of what lies beneath is needed).
        let keeps_of = |p: &Path| granted.iter().any(|(g, _)| g.starts_with(p) && g != p);
        let stage = chosen
            .iter()
            .position(|(p, s)| !s && !keeps_of(p))
            .or_else(|| chosen.iter().position(|(_, s)| !s));
        if let Some(i) = stage {
            let first = chosen.remove(i);
            chosen.insert(0, first);
        }
        let staging = chosen.first().map(|(p, _)| p.clone());
        let covers = chosen
            .iter()
            .enumerate()
            .filter_map(|(i, (real, scratch))| {
                let staged = staging.as_ref()?.join(i.to_string());
                cover(real, &staged, *scratch, granted)
            })
            .collect::<Vec<_>>();
        // A path that cannot be a C string leaves the whole namespace out
        // of shape: cover nothing rather than something else.
        let covers = if covers.len() == chosen.len() {
            covers
        } else {
            Vec::new()
        };
        let paths: Vec<&Path> = chosen.iter().map(|(p, _)| p.as_path()).collect();
        let run_base = run_base.filter(|_| !covers.is_empty()).and_then(|base| {
            let cover = paths.iter().position(|p| base.starts_with(p))?;
            // A kept path that holds the base brings it along.
            let kept = granted
                .iter()
                .any(|(g, _)| base.starts_with(g) && g.starts_with(paths[cover]));
            if kept {
                return None;
            }
            Some(RunBase {
                cover,
                rel: base.strip_prefix(paths[cover]).ok()?.to_path_buf(),
                dirs: chain(paths[cover], &base)?,
                base,
            })
        });
        let mut covers = covers;
        // The run directories' base beneath an otherwise empty hidden
        // cover: the way to it is the host's too.
        if let Some(rb) = &run_base
            && let Some(cover) = covers.get_mut(rb.cover)
            && !cover.scratch
            && cover.keeps.is_empty()
            && let Some(host) = like_host(paths[rb.cover])
        {
            cover.staged = Dir {
                path: cover.staged.path.clone(),
                ..host
            };
        }
        Layout {
            covers,
            run_base,
            files: Vec::new(),
            in_user_namespace: false,
        }
    }

    /// Binds `source` read-only over `target` in every run's view.
    pub(crate) fn bind_file(&mut self, source: &Path, target: &Path) {
        if let (Some(source), Some(target)) = (cstring(source), cstring(target)) {
            self.files.push(FileBind { source, target });
        }
    }

    /// The covered directories, for diagnostics and the probe.
    pub(crate) fn covered(&self) -> impl Iterator<Item = &CStr> {
        self.covers.iter().map(|c| c.path.as_c_str())
    }

    /// The keep for one run's own directory `name` (made in the run base):
    /// the cover it lies beneath and how to bind it back. `None` when the
    /// base is not covered.
    pub(crate) fn run_keep(&self, name: &std::ffi::OsStr) -> Option<(usize, Keep)> {
        let rb = self.run_base.as_ref()?;
        Some((
            rb.cover,
            Keep {
                source: cstring(&rb.rel.join(name))?,
                target: cstring(&rb.base.join(name))?,
                dirs: rb.dirs.clone(),
                is_dir: true,
                // The run's own directory: writable in every run.
                remount: None,
            },
        ))
    }

    /// What a child of one run applies, with the run's own keep.
    pub(crate) fn plan<'a>(&'a self, run_keep: Option<&'a (usize, Keep)>) -> MountPlan<'a> {
        MountPlan {
            data: TMPFS_DATA,
            covers: &self.covers,
            run_keep: run_keep.map(|(at, keep)| (*at, keep)),
            files: &self.files,
            chown: !self.in_user_namespace,
        }
    }

    /// Whether the run directories' base lies beneath a cover: each run's
    /// own directory is then bound back in its namespace.
    pub(crate) fn run_base_covered(&self) -> bool {
        self.run_base.is_some()
    }

    /// The runs make these namespaces inside the sandbox's user namespace.
    pub(crate) fn set_in_user_namespace(&mut self) {
        self.in_user_namespace = true;
    }
}

/// The flags that remount a bind of `path` read-only: its mount's
/// `noexec` kept (a mount a user namespace inherited has it locked; the
/// other flags are only added), `nosuid` and `nodev` always.
fn read_only_flags(path: &Path) -> libc::c_ulong {
    use nix::sys::statvfs::{FsFlags, statvfs};
    let noexec = statvfs(path).is_ok_and(|v| v.flags().contains(FsFlags::ST_NOEXEC));
    let mut flags =
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    if noexec {
        flags |= libc::MS_NOEXEC;
    }
    flags
}

/// One cover of `real`, staged at `staged`, keeping the granted paths
/// beneath it (those not beneath another kept one). `None` if a path
/// cannot be a C string.
fn cover(real: &Path, staged: &Path, scratch: bool, granted: &[(PathBuf, bool)]) -> Option<Cover> {
    let mut under: Vec<&(PathBuf, bool)> = granted
        .iter()
        .filter(|(g, _)| g.starts_with(real) && g != real)
        .collect();
    under.sort_by(|a, b| a.0.cmp(&b.0));
    under.dedup_by(|later, earlier| later.0.starts_with(&earlier.0));
    let keeps = under
        .into_iter()
        .map(|(g, is_dir)| {
            let parent = g.parent()?;
            Some(Keep {
                source: cstring(g.strip_prefix(real).ok()?)?,
                target: cstring(g)?,
                dirs: chain(real, parent)?,
                is_dir: *is_dir,
                // Beneath a scratch cover only paths granted for reading
                // are kept (`Layout::new`): read-only where they are.
                remount: scratch.then(|| read_only_flags(g)),
            })
        })
        .collect::<Option<Vec<Keep>>>()?;
    // A scratch directory is the run's own; an empty cover hides names
    // that are not there anyway; a cover with kept paths keeps the host's
    // permissions on the way to them.
    let (mode, uid, gid) = match (scratch, keeps.is_empty()) {
        (true, _) => (0o1777, 0, 0),
        (false, true) => (0o755, 0, 0),
        (false, false) => {
            let host = like_host(real)?;
            (host.mode, host.uid, host.gid)
        }
    };
    Some(Cover {
        path: cstring(real)?,
        staged: Dir {
            path: cstring(staged)?,
            mode,
            uid,
            gid,
        },
        scratch,
        keeps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn cover_of<'a>(l: &'a Layout, path: &str) -> Option<&'a Cover> {
        l.covers
            .iter()
            .find(|cv| cv.path.as_bytes() == path.as_bytes())
    }

    /// A layout over a fake tree, since the host's `/home` and `/tmp` are
    /// what the real one covers.
    #[test]
    fn granted_paths_beneath_a_cover_are_kept_and_over_one_uncover_it() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().canonicalize().unwrap();
        let home = top.join("home");
        let proj = home.join("u").join("proj");
        let nested = proj.join("sub");
        std::fs::create_dir_all(&nested).unwrap();
        let file = home.join("v").join(".gitconfig");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "").unwrap();
        let granted = vec![
            (nested.clone(), true),
            (proj.clone(), true),
            (file.clone(), false),
            (PathBuf::from("/usr"), true),
        ];
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(&home, 0o750);
        mode(&home.join("u"), 0o700);
        let staged = top.join("run").join("2");
        let cv = cover(&home, &staged, false, &granted).unwrap();
        assert_eq!(cv.staged.path, cstring(&staged).unwrap());
        // The way to a kept path takes the host's permissions.
        assert_eq!(cv.staged.mode, 0o750);
        assert_eq!(cv.staged.uid, std::fs::metadata(&home).unwrap().uid());
        // The nested grant rides on its parent's bind.
        assert_eq!(cv.keeps.len(), 2, "{cv:?}");
        let by_target = |p: &Path| {
            cv.keeps
                .iter()
                .find(|k| k.target.as_bytes() == p.as_os_str().as_bytes())
                .unwrap()
        };
        let k = by_target(&proj);
        assert_eq!(k.source, c("u/proj"));
        let paths = |dirs: &[Dir]| dirs.iter().map(|d| d.path.clone()).collect::<Vec<_>>();
        assert_eq!(paths(&k.dirs), vec![cstring(&home.join("u")).unwrap()]);
        assert_eq!(k.dirs[0].mode, 0o700);
        assert!(k.is_dir);
        let k = by_target(&file);
        assert_eq!(k.source, c("v/.gitconfig"));
        assert!(!k.is_dir);
        assert!(!cv.scratch);
        // Nothing kept: an empty 0755 directory of root's; scratch: 1777.
        let cv = cover(&home, &staged, false, &[]).unwrap();
        assert_eq!((cv.staged.mode, cv.staged.uid), (0o755, 0));
        let cv = cover(&home, &staged, true, &granted).unwrap();
        assert_eq!((cv.staged.mode, cv.staged.uid), (0o1777, 0));
        // Kept beneath a writable cover: bound back read-only, or a
        // Landlock rule on the cover would make them writable.
        assert!(!cv.keeps.is_empty());
        for k in &cv.keeps {
            let flags = k.remount.expect("read-only beneath a scratch cover");
            assert_ne!(flags & libc::MS_RDONLY, 0);
            assert_ne!(flags & libc::MS_REMOUNT, 0);
        }
        let cv = cover(&home, &staged, false, &granted).unwrap();
        assert!(cv.keeps.iter().all(|k| k.remount.is_none()));
    }

    /// A path granted for reading beneath the temp dir leaves it the
    /// run's own (bound back read-only); a writable one leaves it the
    /// host's.
    #[test]
    fn only_a_writable_grant_keeps_the_temp_dir_the_hosts() {
        let tmp = std::env::temp_dir().canonicalize().unwrap();
        if tmp != Path::new("/tmp") {
            return;
        }
        let made = tempfile::Builder::new().prefix("ae-ro").tempdir().unwrap();
        let inside = made.path().canonicalize().unwrap();
        let base = Path::new("/nonexistent-base");
        let read_only = [(inside.clone(), true)];
        let l = Layout::new(&read_only, &[], base);
        let cv = cover_of(&l, "/tmp").expect("/tmp covered");
        assert!(cv.scratch);
        assert_eq!(cv.keeps.len(), 1);
        assert!(cv.keeps[0].remount.is_some());
        let l = Layout::new(&read_only, std::slice::from_ref(&inside), base);
        assert!(cover_of(&l, "/tmp").is_none());
    }

    #[test]
    fn the_host_layout_covers_what_no_grant_needs() {
        let granted = vec![(PathBuf::from("/usr"), true)];
        let tmp = std::env::temp_dir().canonicalize().unwrap();
        let made = tempfile::Builder::new().prefix("ae-x").tempdir().unwrap();
        let base = made.path().canonicalize().unwrap();
        let base_name = base.file_name().unwrap().to_str().unwrap().to_string();
        let l = Layout::new(&granted, &[], &base);
        if let Some(cv) = cover_of(&l, "/tmp") {
            assert!(cv.scratch);
            assert!(cv.keeps.is_empty());
        }
        // The tmpfs is staged at a hidden directory when one is covered,
        // and every cover has its own directory in it.
        if l.covers.iter().any(|c| !c.scratch) {
            assert!(!l.covers[0].scratch, "{:?}", l.covers);
        }
        for (i, cv) in l.covers.iter().enumerate() {
            let staged = format!("{}/{i}", l.covers[0].path.to_str().unwrap());
            assert_eq!(cv.staged.path, c(&staged));
        }
        assert!(l.covers.iter().filter(|c| c.scratch).count() <= SCRATCH_MAX);
        // `/var/run` -> `/run` is covered once, where it lands.
        let runs = l
            .covers
            .iter()
            .filter(|c| c.path.as_bytes() == b"/run")
            .count();
        assert!(runs <= 1);
        // The run directory beneath a covered temp dir is bound back.
        let name = std::ffi::OsStr::new("run-1");
        let tmp_cover = l
            .covers
            .iter()
            .position(|c| tmp.as_os_str().as_bytes() == c.path.as_bytes());
        match tmp_cover {
            Some(i) => {
                let (at, keep) = l.run_keep(name).unwrap();
                assert_eq!(at, i);
                assert_eq!(keep.source, c(&format!("{base_name}/run-1")));
                assert_eq!(keep.dirs.len(), 1);
                assert_eq!(keep.dirs[0].path, cstring(&base).unwrap());
                assert!(keep.is_dir);
            }
            None => assert!(l.run_keep(name).is_none()),
        }
        // A grant of the temp dir itself leaves it uncovered.
        let l = Layout::new(&[(tmp.clone(), true)], &[], &base);
        assert!(
            !l.covered()
                .any(|p| p.to_bytes() == tmp.as_os_str().as_bytes())
        );
        assert!(l.run_keep(name).is_none());
    }
}
