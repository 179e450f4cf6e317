//! The run's own mount and IPC namespaces, made by the child before it
//! drops its privileges: which directories get covered and which paths
//! stay visible is decided in `crate::plan::mounts`; this file holds that
//! decision as plain data and the raw syscalls that apply it.
//!
//! How a path under a covered directory stays visible: the child changes
//! its working directory to the directory before covering it, so a
//! relative path still resolves in what lies beneath the new mount, and
//! binds it back at its own path on top. The covers then leave the working
//! directory at `/`, never beneath a cover, and the `Chdir` step sets the
//! real one. Binding from descriptors the parent opened is not possible:
//! they name mounts of the parent's namespace, which the kernel refuses as
//! a bind source in another one.

use std::ffi::CString;

use super::steps::Step;

/// At most this many covers are writable (`/tmp`, `/var/tmp`,
/// `/dev/shm`): the child keeps a descriptor of each, for its Landlock
/// rule, in a fixed array.
pub(crate) const SCRATCH_MAX: usize = 4;

/// One directory covered by a fresh tmpfs in the run's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cover {
    /// Absolute and free of symlinks.
    pub path: CString,
    /// The tmpfs options (`size=...,nr_inodes=...,mode=...`).
    pub data: CString,
    /// Mount flags (`MS_NOSUID`, ...), without `MS_RDONLY`.
    pub flags: libc::c_ulong,
    /// A private writable directory (it gets a Landlock rule of its own);
    /// otherwise an empty read-only one.
    pub scratch: bool,
    /// Paths beneath it that stay visible.
    pub keeps: Vec<Keep>,
}

/// A path beneath a cover, bound back at its own place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keep {
    /// Relative to the cover's path: resolved in what lies beneath it.
    pub source: CString,
    /// Absolute: where it is bound, inside the cover.
    pub target: CString,
    /// The directories between the cover and `target`, outermost first,
    /// created in the cover as mount points' parents.
    pub dirs: Vec<CString>,
    /// Whether `target` is made as a directory (else as an empty file).
    pub is_dir: bool,
}

/// The namespaces of one child, borrowed for a spawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MountPlan<'a> {
    /// Scratch covers first, then the hidden ones (the plan's order).
    pub covers: &'a [Cover],
    /// The run's own directory (HOME, TMPDIR) when it lies beneath cover
    /// number `.0`: kept visible like the cover's own keeps.
    pub run_keep: Option<(usize, &'a Keep)>,
}

// Everything below runs in the child between clone and exec: raw
// syscalls on data prepared in the parent, no allocation (see
// `crate::spawn`). Each leaves errno set by the failing call.

fn check(ret: libc::c_long, step: Step) -> Result<(), Step> {
    if ret < 0 { Err(step) } else { Ok(()) }
}

fn errno() -> libc::c_int {
    // SAFETY: the calling thread's errno location is always valid.
    unsafe { *libc::__errno_location() }
}

/// A new mount and IPC namespace for the child alone.
///
/// # Safety
/// Child side only.
pub(super) unsafe fn unshare() -> Result<(), Step> {
    // SAFETY: integer argument only.
    let r = unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS | libc::CLONE_NEWIPC) };
    check(r, Step::Unshare)
}

/// Makes every mount of the new namespace private: a mount made in it
/// would otherwise propagate to the host's peers of a shared mount.
///
/// # Safety
/// Child side only.
pub(super) unsafe fn make_private() -> Result<(), Step> {
    // SAFETY: static NUL-terminated path, null source, type and data.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount,
            std::ptr::null::<libc::c_char>(),
            c"/".as_ptr(),
            std::ptr::null::<libc::c_char>(),
            (libc::MS_REC | libc::MS_PRIVATE) as libc::c_ulong,
            std::ptr::null::<libc::c_void>(),
        )
    };
    check(r, Step::MountPrivate)
}

/// Mounts the plan's covers of one kind (`scratch` or hidden), with the
/// paths kept beneath them, and stores a descriptor of each scratch cover
/// in `scratch_fds` (closed at exec). The umask is lifted meanwhile so
/// the mount points get exactly their modes, and restored for the program.
///
/// # Safety
/// Child side only, in a private mount namespace (after `make_private`).
pub(super) unsafe fn mount_covers(
    plan: &MountPlan<'_>,
    scratch: bool,
    scratch_fds: &mut [libc::c_int; SCRATCH_MAX],
) -> Result<(), Step> {
    let step = if scratch {
        Step::PrivateTmp
    } else {
        Step::HideDirs
    };
    // SAFETY: umask takes and returns an integer.
    let old_umask = unsafe { libc::syscall(libc::SYS_umask, 0) };
    let mut n = 0;
    for (i, cover) in plan.covers.iter().enumerate() {
        if cover.scratch != scratch {
            continue;
        }
        let run_keep = match plan.run_keep {
            Some((at, keep)) if at == i => Some(keep),
            _ => None,
        };
        // SAFETY: a cover of the plan, alive for the spawn.
        unsafe { mount_cover(cover, run_keep, step)? };
        if scratch {
            let slot = scratch_fds.get_mut(n).ok_or(step)?;
            // SAFETY: the cover's NUL-terminated path; raw openat.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    cover.path.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            check(fd, step)?;
            *slot = fd as libc::c_int;
            n += 1;
        }
    }
    // SAFETY: umask takes an integer; chdir a static path.
    unsafe {
        libc::syscall(libc::SYS_umask, old_umask);
        // The working directory may be a covered one, seen from beneath
        // its cover: a relative path from there (a relative cwd, `..`)
        // would reach what the cover hides.
        check(libc::syscall(libc::SYS_chdir, c"/".as_ptr()), step)?;
    }
    Ok(())
}

/// One cover: tmpfs over the directory, its keeps bound back, and for a
/// hidden cover the mount made read-only (at once when nothing is kept).
///
/// # Safety
/// Child side only.
unsafe fn mount_cover(cover: &Cover, run_keep: Option<&Keep>, step: Step) -> Result<(), Step> {
    let has_keeps = !cover.keeps.is_empty() || run_keep.is_some();
    let mut flags = cover.flags;
    if !cover.scratch && !has_keeps {
        flags |= libc::MS_RDONLY;
    }
    // SAFETY (whole body): raw syscalls on NUL-terminated strings of the
    // plan, alive for the spawn.
    unsafe {
        if has_keeps {
            // Relative sources now resolve beneath the cover.
            check(libc::syscall(libc::SYS_chdir, cover.path.as_ptr()), step)?;
        }
        check(
            libc::syscall(
                libc::SYS_mount,
                c"tmpfs".as_ptr(),
                cover.path.as_ptr(),
                c"tmpfs".as_ptr(),
                flags,
                cover.data.as_ptr(),
            ),
            step,
        )?;
        for keep in cover.keeps.iter().chain(run_keep) {
            bind_back(keep, step)?;
        }
        if !cover.scratch && has_keeps {
            check(
                libc::syscall(
                    libc::SYS_mount,
                    std::ptr::null::<libc::c_char>(),
                    cover.path.as_ptr(),
                    std::ptr::null::<libc::c_char>(),
                    cover.flags | libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                    std::ptr::null::<libc::c_void>(),
                ),
                step,
            )?;
        }
    }
    Ok(())
}

/// Creates `keep`'s mount point in the cover and binds the path beneath
/// the cover onto it. A source that vanished since the plan was made is
/// left out: that hides more, never less.
///
/// # Safety
/// Child side only, with the working directory in the covered directory.
unsafe fn bind_back(keep: &Keep, step: Step) -> Result<(), Step> {
    // SAFETY (whole body): raw syscalls on NUL-terminated strings of the
    // plan.
    unsafe {
        for dir in &keep.dirs {
            make_node(dir, true, step)?;
        }
        make_node(&keep.target, keep.is_dir, step)?;
        let r = libc::syscall(
            libc::SYS_mount,
            keep.source.as_ptr(),
            keep.target.as_ptr(),
            std::ptr::null::<libc::c_char>(),
            (libc::MS_BIND | libc::MS_REC) as libc::c_ulong,
            std::ptr::null::<libc::c_void>(),
        );
        if r < 0 && errno() != libc::ENOENT {
            return Err(step);
        }
    }
    Ok(())
}

/// A directory (mode 0711: the child user may pass, not list) or an empty
/// file (a mount point for a file); one that exists already is fine.
///
/// # Safety
/// Child side only.
unsafe fn make_node(path: &CString, dir: bool, step: Step) -> Result<(), Step> {
    // SAFETY: NUL-terminated path; integer mode.
    let r = unsafe {
        if dir {
            libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, path.as_ptr(), 0o711)
        } else {
            libc::syscall(
                libc::SYS_mknodat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::S_IFREG | 0o600,
                0,
            )
        }
    };
    if r < 0 && errno() != libc::EEXIST {
        return Err(step);
    }
    Ok(())
}
