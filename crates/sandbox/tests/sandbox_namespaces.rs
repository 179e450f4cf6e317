//! Each run's own mount and IPC namespaces, proven by effect: files a run
//! leaves in `/tmp`, `/var/tmp` and `/dev/shm` are its alone and gone with
//! it; the host's temporary files, sockets under `/run`, other users'
//! homes and SysV objects are not there for it; a root beneath `/home`
//! works as before. Each check has its control with `namespaces = off`,
//! where the same program sees the host, so the check can fail. Run as
//! root (as CI does): only root can create the namespaces.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_exec_sandbox::{Namespaces, Sandbox, SandboxConfig};
use common::*;

/// A root outside the run's private scratch directories: a root beneath
/// `/tmp` keeps the host's `/tmp` (its read-write rule would reach the
/// root bound back beneath it), so these tests root their runs elsewhere.
fn ns_root() -> Root {
    root_in(Path::new("/var/lib/agent-exec-tests"))
}

/// Namespace inode numbers are recycled as soon as a namespace dies, so a
/// test that checks a run's namespace is gone must not share the host
/// with tests making new ones: it takes this lock exclusively, every other
/// test in this file shares it.
static NS_CREATION: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    NS_CREATION
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    NS_CREATION
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn require_root() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the namespace tests run as root (only root can create the namespaces)"
    );
}

fn with_namespaces(ns: Namespaces) -> SandboxConfig {
    SandboxConfig {
        namespaces: ns,
        ..config()
    }
}

/// A sandbox whose runs get their own namespaces; `None` (after a loud
/// skip) when this host cannot make them.
fn isolated(root: &Path, cfg: SandboxConfig) -> Option<Sandbox> {
    require_root();
    let sb = sandbox_with(root, cfg);
    let applied = sb.summary().limits.iter().any(|l| l == "mount_namespace");
    require_kernel_feature("mount and IPC namespaces for a root supervisor", applied).then_some(sb)
}

fn off(root: &Path) -> Sandbox {
    sandbox_with(root, with_namespaces(Namespaces::Off))
}

/// What `os.stat` says of each path, one line each: `ok` or the errno name.
fn stat_script(paths: &[&Path]) -> String {
    let list: Vec<String> = paths
        .iter()
        .map(|p| format!("{:?}", p.to_str().unwrap()))
        .collect();
    format!(
        "import os, errno\n\
         for p in [{}]:\n\
         \ttry:\n\
         \t\tos.stat(p)\n\
         \t\tprint(p, 'ok')\n\
         \texcept OSError as e:\n\
         \t\tprint(p, errno.errorcode[e.errno])\n",
        list.join(", ")
    )
}

fn line_of<'a>(out: &'a Out, path: &Path) -> &'a str {
    let p = path.to_str().unwrap();
    out.stdout
        .lines()
        .find(|l| l.strip_prefix(p).is_some_and(|rest| rest.starts_with(' ')))
        .unwrap_or_else(|| panic!("no line for {p}: {out:?}"))
}

/// The namespace a run's main process is in, as the kernel names it.
fn ns_of_run(sb: &Sandbox, root: &Path) -> (String, String) {
    let o = py(
        sb,
        root,
        "import os\nprint(os.readlink('/proc/self/ns/mnt'))\nprint(os.readlink('/proc/self/ns/ipc'))",
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    let mut l = o.stdout.lines();
    (l.next().unwrap().into(), l.next().unwrap().into())
}

fn host_ns(kind: &str) -> String {
    std::fs::read_link(format!("/proc/self/ns/{kind}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_summary_says_what_the_run_is_in() {
    let _serial = shared();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let s = sb.summary();
    for n in ["mount_namespace", "ipc_namespace"] {
        assert!(s.limits.iter().any(|l| l == n), "{s:?}");
        assert!(!s.not_applied.iter().any(|l| l == n), "{s:?}");
    }
    let (mnt, ipc) = ns_of_run(&sb, &r.path);
    assert_ne!(mnt, host_ns("mnt"));
    assert_ne!(ipc, host_ns("ipc"));
    // The kernel's own account of the run's mounts: the private
    // directories writable, the covers read-only.
    let o = run(&sb, &r.path, &["/bin/cat", "/proc/self/mountinfo"]);
    let options = |point: &str| {
        let line = o
            .stdout
            .lines()
            .rev()
            .find(|l| l.split_whitespace().nth(4) == Some(point))
            .unwrap_or_else(|| panic!("no mount on {point}: {o:?}"));
        line.split_whitespace().nth(5).unwrap().to_string()
    };
    for point in ["/tmp", "/var/tmp", "/dev/shm"] {
        assert!(options(point).starts_with("rw,"), "{point}: {o:?}");
    }
    for point in ["/run", "/home", "/root"] {
        if Path::new(point).is_dir() {
            assert!(options(point).starts_with("ro,"), "{point}: {o:?}");
        }
    }

    // Off: the supervisor's namespaces, and the summary claims none.
    let sb = off(&r.path);
    let s = sb.summary();
    assert!(
        !s.limits
            .iter()
            .chain(&s.not_applied)
            .any(|l| l.ends_with("_namespace")),
        "{s:?}"
    );
    assert_eq!(ns_of_run(&sb, &r.path), (host_ns("mnt"), host_ns("ipc")));
}

/// Polls for `path` for up to 20 s.
fn wait_for(path: &Path) -> bool {
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Mount namespaces any process on the host is in.
fn live_mount_namespaces() -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(ns) = std::fs::read_link(e.path().join("ns/mnt")) {
            found.push(ns.to_string_lossy().into_owned());
        }
    }
    found
}

#[test]
fn private_tmp_files_are_the_runs_alone_and_gone_after_it() {
    let _serial = exclusive();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let name = marker();
    let dirs = ["/tmp", "/var/tmp", "/dev/shm"];
    let files: Vec<PathBuf> = dirs.iter().map(|d| Path::new(d).join(&name)).collect();
    let (ready, done) = (r.path.join("ready"), r.path.join("done"));
    // Run A writes a file in each directory, signals, waits, and reports
    // whether its files are still its own (each with its own content: the
    // three directories are distinct too).
    let a_script = format!(
        "import os, time\n\
         files = {files:?}\n\
         for f in files:\n\
         \topen(f, 'w').write('from-A:' + f)\n\
         print(os.readlink('/proc/self/ns/mnt'), flush=True)\n\
         open({ready:?}, 'w').close()\n\
         while not os.path.exists({done:?}):\n\
         \ttime.sleep(0.01)\n\
         print('A-kept', all(open(f).read() == 'from-A:' + f for f in files))\n",
        files = files
            .iter()
            .map(|f| f.to_str().unwrap())
            .collect::<Vec<_>>(),
        ready = ready.to_str().unwrap(),
        done = done.to_str().unwrap(),
    );
    let (sb_a, root_a) = (sb.clone(), r.path.clone());
    let a = std::thread::spawn(move || py(&sb_a, &root_a, &a_script));
    assert!(wait_for(&ready), "run A never got going");

    for f in &files {
        assert!(!f.exists(), "the host sees {}", f.display());
    }
    // Run B, concurrent: none of A's files, and its own writes land in its
    // own directories.
    let b = py(
        &sb,
        &r.path,
        &format!(
            "import os\n\
             files = {:?}\n\
             print('B-sees', [os.path.exists(f) for f in files])\n\
             for f in files:\n\
             \topen(f, 'w').write('from-B')\n",
            files
                .iter()
                .map(|f| f.to_str().unwrap())
                .collect::<Vec<_>>()
        ),
    );
    assert_eq!(b.code, Some(0), "{b:?}");
    assert!(b.stdout.contains("B-sees [False, False, False]"), "{b:?}");

    std::fs::write(&done, "").unwrap();
    let a = a.join().unwrap();
    assert_eq!(a.code, Some(0), "{a:?}");
    assert!(a.stdout.contains("A-kept True"), "{a:?}");
    let a_ns = a.stdout.lines().next().unwrap().to_string();
    drop(a);

    for f in &files {
        assert!(!f.exists(), "the host sees {} after the run", f.display());
    }
    // Gone: no process is left in A's namespace, which held the files, and
    // a later run finds nothing.
    // The lock keeps this test's own runs from recycling the inode; an
    // unrelated process on the host may still be handed it, but only
    // briefly, while a namespace the run left behind would stay: so poll.
    let until = Instant::now() + Duration::from_secs(10);
    while live_mount_namespaces().contains(&a_ns) {
        assert!(
            Instant::now() < until,
            "A's mount namespace outlived the run"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let c = py(&sb, &r.path, &stat_script(&paths));
    for f in &files {
        assert_eq!(line_of(&c, f), format!("{} ENOENT", f.display()));
    }
}

/// A file the host made for one test, removed on drop (a failed
/// assertion included).
struct HostFile(PathBuf);

impl std::ops::Deref for HostFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for HostFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A world-readable file the host made in `dir`.
fn host_file(dir: &Path, content: &str) -> HostFile {
    let f = HostFile(dir.join(marker()));
    std::fs::write(&*f, content).unwrap();
    std::fs::set_permissions(&*f, std::fs::Permissions::from_mode(0o644)).unwrap();
    f
}

#[test]
fn the_hosts_tmp_files_are_not_there() {
    let _serial = shared();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let f = host_file(Path::new("/tmp"), "host-tmp");
    let o = py(&sb, &r.path, &stat_script(&[&f]));
    assert_eq!(line_of(&o, &f), format!("{} ENOENT", f.display()));
    // Control: Landlock has no hook for metadata, so without the namespace
    // the file is there to stat.
    let o = py(&off(&r.path), &r.path, &stat_script(&[&f]));
    assert_eq!(line_of(&o, &f), format!("{} ok", f.display()));
}

#[test]
fn sockets_under_run_are_hidden_and_the_root_works() {
    let _serial = shared();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let sock = HostFile(PathBuf::from(format!("/run/{}.sock", marker())));
    let _listener = std::os::unix::net::UnixListener::bind(&*sock).unwrap();
    std::fs::set_permissions(&*sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(r.path.join("in.txt"), "ROOT-CONTENT").unwrap();

    let o = py(
        &sb,
        &r.path,
        &format!(
            "{}print(open('in.txt').read())\nopen('out.txt', 'w').write('written')\n",
            stat_script(&[&sock])
        ),
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    assert_eq!(line_of(&o, &sock), format!("{} ENOENT", sock.display()));
    assert!(o.stdout.contains("ROOT-CONTENT"), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(r.path.join("out.txt")).unwrap(),
        "written"
    );

    let o = py(&off(&r.path), &r.path, &stat_script(&[&sock]));
    assert_eq!(line_of(&o, &sock), format!("{} ok", sock.display()));
}

/// A directory under `/home` made for one test, removed on drop.
struct HomeDir(PathBuf);

impl HomeDir {
    /// `None` (after a loud skip) on a host without `/home`.
    fn new(mode: u32) -> Option<HomeDir> {
        if !require_kernel_feature("a /home directory", Path::new("/home").is_dir()) {
            return None;
        }
        let d = PathBuf::from("/home").join(marker());
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        Some(HomeDir(d))
    }
}

impl Drop for HomeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn other_homes_and_roots_home_are_hidden() {
    let _serial = shared();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let Some(home) = HomeDir::new(0o755) else {
        return;
    };
    let in_home = host_file(&home.0, "a-users-file");
    let secret = host_file(Path::new("/root"), "roots-secret");
    let o = py(&sb, &r.path, &stat_script(&[&home.0, &in_home, &secret]));
    for p in [home.0.as_path(), &in_home, &secret] {
        // ENOENT, not EACCES: gone from the view, not merely refused.
        assert_eq!(line_of(&o, p), format!("{} ENOENT", p.display()));
    }
    // Control: the open home is there to stat without the namespace.
    let o = py(&off(&r.path), &r.path, &stat_script(&[&home.0, &in_home]));
    assert_eq!(line_of(&o, &in_home), format!("{} ok", in_home.display()));
}

#[test]
fn a_root_under_home_keeps_working() {
    let _serial = shared();
    require_root();
    let Some(home) = HomeDir::new(0o755) else {
        return;
    };
    let proj = home.0.join("proj");
    std::fs::create_dir(&proj).unwrap();
    std::os::unix::fs::chown(&proj, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::write(proj.join("in.txt"), "PROJECT-FILE").unwrap();
    let tool = proj.join("tool.sh");
    std::fs::write(&tool, "#!/bin/sh\necho TOOL-RAN \"$1\"\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A sibling of the root beneath the same home stays hidden.
    let sibling = host_file(&home.0, "sibling");

    let Some(sb) = isolated(&proj, config()) else {
        return;
    };
    let o = run(
        &sb,
        &proj,
        &[
            "/bin/sh",
            "-c",
            "cat in.txt && echo made > out.txt && ./tool.sh arg && mkdir sub && \
             echo home > \"$HOME/h\" && cat \"$HOME/h\" && pwd",
        ],
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    assert!(o.stdout.contains("PROJECT-FILE"), "{o:?}");
    assert!(o.stdout.contains("TOOL-RAN arg"), "{o:?}");
    assert!(
        o.stdout.contains(&format!("home\n{}", proj.display())),
        "{o:?}"
    );
    assert_eq!(
        std::fs::read_to_string(proj.join("out.txt")).unwrap(),
        "made\n"
    );
    assert!(proj.join("sub").is_dir());
    let o = py(&sb, &proj, &stat_script(&[&sibling]));
    assert_eq!(
        line_of(&o, &sibling),
        format!("{} ENOENT", sibling.display())
    );
}

/// A directory made for one test (mode `mode`, root's) holding a file,
/// removed on drop.
struct Planted {
    dir: PathBuf,
    file: HostFile,
}

impl Planted {
    fn new(parent: &Path, mode: u32) -> Planted {
        let dir = parent.join(marker());
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let file = host_file(&dir, "PLANTED-CONTENT");
        Planted { dir, file }
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn granted_paths_under_every_cover_keep_the_hosts_permissions() {
    let _serial = shared();
    require_root();
    if !require_kernel_feature("a /home directory", Path::new("/home").is_dir()) {
        return;
    }
    let r = ns_root();
    // A granted directory under each hidden directory, and one under a
    // home only root may enter.
    let in_run = Planted::new(Path::new("/run"), 0o755);
    let in_root = Planted::new(Path::new("/root"), 0o755);
    let open_home = Planted::new(Path::new("/home"), 0o755);
    let closed_home = Planted::new(Path::new("/home"), 0o700);
    let tools = closed_home.dir.join("tools");
    std::fs::create_dir(&tools).unwrap();
    std::fs::set_permissions(&tools, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hidden = host_file(Path::new("/run"), "run-sibling");
    let read: Vec<String> = [&in_run.dir, &in_root.dir, &open_home.dir, &tools]
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    let cfg = SandboxConfig {
        read: read.clone(),
        ..config()
    };
    let Some(sb) = isolated(&r.path, cfg) else {
        return;
    };
    let script = format!(
        "{}print('read', open({:?}).read(), open({:?}).read())\n",
        stat_script(&[&in_root.file, &tools, &hidden, &in_run.file]),
        in_run.file.to_str().unwrap(),
        open_home.file.to_str().unwrap(),
    );
    let o = py(&sb, &r.path, &script);
    assert_eq!(o.code, Some(0), "{o:?}");
    // Kept and reachable by their modes: readable as on the host.
    assert!(
        o.stdout.contains("read PLANTED-CONTENT PLANTED-CONTENT"),
        "{o:?}"
    );
    assert_eq!(
        line_of(&o, &in_run.file),
        format!("{} ok", in_run.file.display())
    );
    // Kept, but behind a directory the child user may not pass (/root is
    // 0700, and so is the closed home): refused as on the host, not
    // opened up by the cover.
    assert_eq!(
        line_of(&o, &in_root.file),
        format!("{} EACCES", in_root.file.display())
    );
    assert_eq!(line_of(&o, &tools), format!("{} EACCES", tools.display()));
    // Not granted: gone.
    assert_eq!(line_of(&o, &hidden), format!("{} ENOENT", hidden.display()));
}

/// The shm segment of `key` in a `/proc/sysvipc/shm` listing, if any.
fn has_key(listing: &str, key: i32) -> bool {
    listing
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().next() == Some(key.to_string().as_str()))
}

#[test]
fn the_hosts_sysv_objects_are_not_there() {
    let _serial = shared();
    let r = ns_root();
    // Landlock grants no /proc beyond the run's own entries: the listing is
    // made readable so the run can look.
    let cfg = SandboxConfig {
        read: vec!["/proc/sysvipc".into()],
        ..config()
    };
    let Some(sb) = isolated(&r.path, cfg.clone()) else {
        return;
    };
    let key = 0x5ae0_0000 | (std::process::id() as i32 & 0xffff);
    // SAFETY: a fresh 4 KiB segment of our own, removed below.
    let id = unsafe { libc::shmget(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o644) };
    assert!(id >= 0, "{}", std::io::Error::last_os_error());
    let host = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    assert!(has_key(&host, key), "{host}");

    let o = run(&sb, &r.path, &["/bin/cat", "/proc/sysvipc/shm"]);
    let seen_inside = has_key(&o.stdout, key);
    let listed = o.code == Some(0);
    let o_off = run(
        &sandbox_with(
            &r.path,
            SandboxConfig {
                namespaces: Namespaces::Off,
                ..cfg
            },
        ),
        &r.path,
        &["/bin/cat", "/proc/sysvipc/shm"],
    );
    // SAFETY: removes the segment made above.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    assert!(listed, "{o:?}");
    assert!(!seen_inside, "{o:?}");
    assert!(has_key(&o_off.stdout, key), "control: {o_off:?}");
}

/// Set for the child process that runs `without_cap_sys_admin`.
const NO_ADMIN_ENV: &str = "AGENT_EXEC_SANDBOX_TEST_NO_ADMIN";

/// Drops CAP_SYS_ADMIN from the calling thread's effective, permitted and
/// bounding sets, as a supervisor in a container without it would be.
fn drop_cap_sys_admin() {
    const CAP_SYS_ADMIN: u32 = 21;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset/prctl on the calling thread with buffers that
    // outlive the calls.
    unsafe {
        assert_eq!(
            libc::prctl(
                libc::PR_CAPBSET_DROP,
                CAP_SYS_ADMIN as libc::c_ulong,
                0,
                0,
                0
            ),
            0
        );
        assert_eq!(
            libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
            0
        );
        data[0].effective &= !(1 << CAP_SYS_ADMIN);
        data[0].permitted &= !(1 << CAP_SYS_ADMIN);
        assert_eq!(
            libc::syscall(libc::SYS_capset, &header, data.as_ptr()),
            0,
            "{}",
            std::io::Error::last_os_error()
        );
    }
}

/// What a supervisor without CAP_SYS_ADMIN gets: `required` refuses with
/// the typed error, `auto` runs and says what it could not apply. Only
/// the test below runs it, in a child process, since dropping a
/// capability cannot be undone.
#[test]
#[ignore = "run by the test below, in a child process"]
fn without_cap_sys_admin() {
    let _serial = shared();
    if std::env::var_os(NO_ADMIN_ENV).is_none() {
        return;
    }
    drop_cap_sys_admin();
    let r = ns_root();
    let err = Sandbox::prepare(
        supervisor(),
        &with_namespaces(Namespaces::Required),
        &r.path,
    )
    .unwrap_err();
    assert_eq!(err.layer(), "namespaces");
    assert!(
        err.to_string().starts_with("namespaces unavailable: "),
        "{err}"
    );
    println!("required: {err}");

    let sb = sandbox_with(&r.path, config());
    let s = sb.summary();
    for n in ["mount_namespace", "ipc_namespace", "net_namespace"] {
        assert!(s.not_applied.iter().any(|l| l == n), "{s:?}");
        assert!(!s.limits.iter().any(|l| l == n), "{s:?}");
    }
    let o = run_in(
        Arc::new(sb.for_run().unwrap()),
        &r.path,
        &[
            "/bin/sh",
            "-c",
            "readlink /proc/self/ns/mnt && echo ran > ran.txt",
        ],
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    assert_eq!(o.stdout.trim(), host_ns("mnt"), "{o:?}");
    println!("auto: ran in the supervisor's namespace");
}

#[test]
fn required_fails_closed_without_cap_sys_admin() {
    let _serial = shared();
    require_root();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "without_cap_sys_admin",
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(NO_ADMIN_ENV, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("required: namespaces unavailable"),
        "{stdout}"
    );
    assert!(
        stdout.contains("auto: ran in the supervisor's namespace"),
        "{stdout}"
    );
}

/// The supervisor's own descriptors, as the kernel names what they open.
fn own_fd_targets() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|t| t.to_string_lossy().into_owned())
        .collect()
}

/// While a run goes on, the supervisor holds its mount and IPC namespaces
/// (so their teardown is no longer part of the run's exit), and once the
/// run is over it lets them go: no handle outlives the run.
#[test]
fn a_runs_namespaces_are_held_while_it_runs_and_released_after() {
    let _serial = exclusive();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let (ready, done) = (r.path.join("ready"), r.path.join("done"));
    let script = format!(
        "import os, time\n\
         print(os.readlink('/proc/self/ns/mnt'), os.readlink('/proc/self/ns/ipc'), flush=True)\n\
         open({ready:?}, 'w').close()\n\
         while not os.path.exists({done:?}):\n\
         \ttime.sleep(0.01)\n",
        ready = ready.to_str().unwrap(),
        done = done.to_str().unwrap(),
    );
    let (sb_a, root_a) = (sb.clone(), r.path.clone());
    let run = std::thread::spawn(move || py(&sb_a, &root_a, &script));
    assert!(wait_for(&ready), "the run never got going");
    let during = own_fd_targets();
    std::fs::write(&done, "").unwrap();
    let out = run.join().unwrap();
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut names = out.stdout.split_whitespace();
    let (mnt, ipc) = (names.next().unwrap(), names.next().unwrap());
    assert_ne!(mnt, host_ns("mnt"));
    assert!(during.iter().any(|t| t == mnt), "{during:?} lacks {mnt}");
    assert!(during.iter().any(|t| t == ipc), "{during:?} lacks {ipc}");
    // Released on another thread right after the run: give it a moment.
    let until = Instant::now() + Duration::from_secs(10);
    let held = || own_fd_targets().iter().any(|t| t == mnt || t == ipc);
    while held() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!held(), "a handle on {mnt} or {ipc} outlived the run");
}

/// What the run's main process reads in `/proc/self/net/{unix,tcp}`, and
/// the network namespace it is in.
fn net_view(sb: &Sandbox, root: &Path) -> Out {
    py(
        sb,
        root,
        "import os\n\
         print(os.readlink('/proc/self/ns/net'))\n\
         print(open('/proc/self/net/unix').read())\n\
         print(open('/proc/self/net/tcp').read())\n",
    )
}

#[test]
fn runs_without_network_see_none_of_the_hosts_sockets() {
    let _serial = shared();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let s = sb.summary();
    assert!(s.limits.iter().any(|l| l == "net_namespace"), "{s:?}");
    // On the host: a listening pathname socket and a TCP listener, both
    // in the host's tables.
    let name = marker();
    let sock = Path::new("/var/lib/agent-exec-tests").join(format!("{name}.sock"));
    let _unix = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = format!(":{:04X}", tcp.local_addr().unwrap().port());
    let host_unix = std::fs::read_to_string("/proc/self/net/unix").unwrap();
    let host_tcp = std::fs::read_to_string("/proc/self/net/tcp").unwrap();
    assert!(host_unix.contains(&name));
    assert!(host_tcp.contains(&port));

    let o = net_view(&sb, &r.path);
    assert_eq!(o.code, Some(0), "{o:?}");
    let run_ns = o.stdout.lines().next().unwrap().to_string();
    assert_ne!(run_ns, host_ns("net"), "{o:?}");
    assert!(
        !o.stdout.contains(&name),
        "the host's socket is listed: {o:?}"
    );
    assert!(
        !o.stdout.contains(&port),
        "the host's listener is listed: {o:?}"
    );
    // One namespace per sandbox, made once: the next run is in the same.
    let again = net_view(&sb, &r.path);
    assert_eq!(again.stdout.lines().next(), Some(run_ns.as_str()));
    let _ = std::fs::remove_file(&sock);

    // A policy that grants loopback ports keeps the host's network (which
    // Landlock then narrows to those ports), and the summary says so.
    let ported = sandbox_with(
        &r.path,
        SandboxConfig {
            connect_ports: vec![tcp.local_addr().unwrap().port()],
            ..config()
        },
    );
    let s = ported.summary();
    assert!(
        !s.limits
            .iter()
            .chain(&s.not_applied)
            .any(|l| l == "net_namespace"),
        "{s:?}"
    );
    let o = net_view(&ported, &r.path);
    assert_eq!(
        o.stdout.lines().next(),
        Some(host_ns("net").as_str()),
        "{o:?}"
    );
}

/// A long-lived service makes its runs' mount and IPC namespaces ahead,
/// on a thread between runs, and each run's child only joins them: every
/// run still has namespaces of its own (never the host's, never another
/// run's), files one run leaves in `/tmp` and `/dev/shm` are not there
/// for the next, and the view is the one a child makes itself
/// (the host's `/tmp` file hidden, the root reachable).
#[test]
fn namespaces_made_ahead_serve_one_run_each_with_the_same_view() {
    let _serial = shared();
    let r = ns_root();
    let Some(sb) = isolated(&r.path, config()) else {
        return;
    };
    let host_tmp = host_file(Path::new("/tmp"), "host");
    let script = format!(
        "import os, sys\n\
         i = sys.argv[1]\n\
         print(os.readlink('/proc/self/ns/mnt'), os.readlink('/proc/self/ns/ipc'))\n\
         print('earlier', sorted(f for f in os.listdir('/tmp') if f.startswith('ahead-')))\n\
         open('/tmp/ahead-' + i, 'w').close()\n\
         print('shm', sorted(f for f in os.listdir('/dev/shm') if f.startswith('ahead-')))\n\
         open('/dev/shm/ahead-' + i, 'w').close()\n\
         print('host', os.path.exists({host:?}))\n\
         print('root', os.access({root:?}, os.W_OK))\n",
        host = host_tmp.to_str().unwrap(),
        root = r.path.to_str().unwrap(),
    );
    // (Namespace numbers are reused once a namespace is gone, so "never
    // another run's" is shown by what the runs leave, not by the numbers.)
    let mut ahead = 0;
    for i in 0..6 {
        let run = Arc::new(sb.for_run().unwrap());
        ahead += usize::from(run.namespaces_made_ahead());
        let o = run_in(run, &r.path, &[PYTHON, "-c", &script, &i.to_string()]);
        assert_eq!(o.code, Some(0), "run {i}: {o:?}");
        let lines: Vec<&str> = o.stdout.lines().collect();
        let mut ns = lines[0].split_whitespace();
        let (mnt, ipc) = (ns.next().unwrap(), ns.next().unwrap());
        assert_ne!(mnt, host_ns("mnt"), "run {i}");
        assert_ne!(ipc, host_ns("ipc"), "run {i}");
        assert_eq!(lines[1], "earlier []", "run {i} saw an earlier run's /tmp");
        assert_eq!(lines[2], "shm []", "run {i} saw an earlier run's /dev/shm");
        assert_eq!(lines[3], "host False", "run {i} saw the host's /tmp");
        assert_eq!(lines[4], "root True", "run {i}");
        // The next run comes while the service is idle, as a daemon's do.
        std::thread::sleep(Duration::from_millis(50));
    }
    // The first run makes its own while the first ones ahead are made.
    assert!(
        ahead >= 5,
        "only {ahead} of 6 runs joined namespaces made ahead"
    );
}

/// A one-shot process makes only its first run's namespaces ahead (made
/// while the run is prepared), and that run sees the same private view; a
/// later run of the same sandbox makes its own.
#[test]
fn a_one_shot_process_makes_its_first_runs_namespaces_ahead_only() {
    let _serial = shared();
    let r = ns_root();
    if isolated(&r.path, config()).is_none() {
        return;
    }
    let one_shot = agent_exec_sandbox::Supervisor::init(agent_exec_sandbox::SupervisorOptions {
        namespaces_ahead: agent_exec_sandbox::NamespacesAhead::FirstRun,
        ..agent_exec_sandbox::SupervisorOptions::none()
    });
    let sb = Sandbox::prepare(&one_shot, &config(), &r.path).unwrap();
    let script = "import os\n\
                  print(sorted(f for f in os.listdir('/tmp') if f.startswith('once-')))\n\
                  open('/tmp/once-' + str(os.getpid()), 'w').close()\n";
    let mut made_ahead = Vec::new();
    for i in 0..3 {
        let run = Arc::new(sb.for_run().unwrap());
        made_ahead.push(run.namespaces_made_ahead());
        let o = run_in(run, &r.path, &[PYTHON, "-c", script]);
        assert_eq!(o.code, Some(0), "run {i}: {o:?}");
        assert_eq!(o.stdout.trim(), "[]", "run {i} saw an earlier run's /tmp");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(made_ahead, [true, false, false]);
}
