//! Each kernel layer, proven by its effect: canary bytes absent, files not
//! created, connections not accepted, processes not signalled. Run as root
//! (as CI does): the child drops to `nobody`.

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;
use std::time::Duration;

use agent_exec_sandbox::{
    Namespaces, SandboxConfig, SpawnError, Supervisor, SupervisorOptions, landlock_abi,
};
use common::*;

fn require_root() -> bool {
    if nix::unistd::Uid::effective().is_root() {
        return true;
    }
    panic!("the sandbox tests run as root (the privilege drop is part of what they check)");
}

/// The default configuration without the run's own namespaces, for the
/// tests that prove Landlock by what it refuses on host paths.
fn landlock_alone() -> SandboxConfig {
    SandboxConfig {
        namespaces: Namespaces::Off,
        ..config()
    }
}

#[test]
fn reading_outside_the_root_is_denied_inside_works() {
    require_root();
    let r = root();
    let out_dir = outside();
    let canary = out_dir.path().join("canary.txt");
    std::fs::write(&canary, "CANARY-outside-7f3a").unwrap();
    std::fs::set_permissions(&canary, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(r.path.join("inside.txt"), "INSIDE-ok-91c2").unwrap();
    // Landlock alone: the run's own mount namespace would hide the
    // outside directory (it is under /tmp) before Landlock is asked.
    let sb = sandbox_with(&r.path, landlock_alone());

    let o = py(
        &sb,
        &r.path,
        &format!("print(open({:?}).read())", canary.to_str().unwrap()),
    );
    assert!(!o.stdout.contains("CANARY-outside-7f3a"), "{o:?}");
    assert!(o.stderr.contains("PermissionError"), "{o:?}");

    let o = py(&sb, &r.path, "print(open('inside.txt').read())");
    assert_eq!(o.code, Some(0), "{o:?}");
    assert!(o.stdout.contains("INSIDE-ok-91c2"), "{o:?}");

    // The host's accounts stay unreadable too: without a mount namespace
    // the file is refused; with one the run reads a synthesized pair
    // (root, nobody, its user) and never the host's other entries.
    let o = run(&sb, &r.path, &["/bin/cat", "/etc/passwd"]);
    assert!(!o.stdout.contains("daemon:"), "{o:?}");
    assert!(o.stdout.lines().count() <= 3, "{o:?}");
}

#[test]
fn other_processes_proc_entries_are_unreadable() {
    require_root();
    let r = root();
    // A root process with a planted secret in its environment, standing in
    // for the supervisor.
    let mut victim = std::process::Command::new("/bin/sleep")
        .arg("60")
        .env("AGENT_EXEC_PLANTED", "SECRET-environ-5d1e")
        .spawn()
        .unwrap();
    for allow_root_child in [false, true] {
        let cfg = SandboxConfig {
            allow_root_child,
            ..config()
        };
        let sb = sandbox_with(&r.path, cfg);
        let o = run(
            &sb,
            &r.path,
            &["/bin/cat", &format!("/proc/{}/environ", victim.id())],
        );
        assert!(!o.stdout.contains("SECRET-environ-5d1e"), "{o:?}");
        assert_ne!(o.code, Some(0));
        // cmdline is world-readable by DAC: only Landlock keeps the
        // supervisor's arguments private.
        let me = std::process::id();
        let o = run(&sb, &r.path, &["/bin/cat", &format!("/proc/{me}/cmdline")]);
        assert!(o.stdout.is_empty(), "{o:?}");
        assert_ne!(o.code, Some(0));
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
fn writing_outside_the_root_is_denied_inside_works() {
    require_root();
    let r = root();
    let out_dir = outside();
    let target = out_dir.path().join("escaped");
    // Landlock alone: the run's own mount namespace would hide the
    // outside directory and give the run a /tmp of its own.
    let sb = sandbox_with(&r.path, landlock_alone());
    let o = run(
        &sb,
        &r.path,
        &[
            "/bin/sh",
            "-c",
            &format!("echo pwned > {}", target.display()),
        ],
    );
    assert_ne!(o.code, Some(0), "{o:?}");
    assert!(!target.exists());
    // /tmp itself is not writable either (only the per-run TMPDIR).
    let o = run(
        &sb,
        &r.path,
        &[
            "/bin/sh",
            "-c",
            "echo x > /tmp/ae-sbx-escaped-$$ && echo wrote",
        ],
    );
    assert!(!o.stdout.contains("wrote"), "{o:?}");

    let o = run(
        &sb,
        &r.path,
        &[
            "/bin/sh",
            "-c",
            "echo hi > inside && mkdir d && echo t > \"$TMPDIR/t\"",
        ],
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(r.path.join("inside")).unwrap(),
        "hi\n"
    );
    assert!(r.path.join("d").is_dir());
}

#[test]
fn tcp_is_off_unix_sockets_in_the_root_work() {
    require_root();
    let r = root();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let sb = sandbox(&r.path);
    let o = py(
        &sb,
        &r.path,
        &format!(
            "import socket\ns=socket.create_connection(('127.0.0.1',{port}),timeout=5)\nprint('connected')"
        ),
    );
    assert!(!o.stdout.contains("connected"), "{o:?}");
    assert_ne!(o.code, Some(0));
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the listener accepted a connection: {accepted:?}"
    );

    // Unix sockets are an opt-in (`allow_unix_sockets`); with it, sockets
    // bound inside the root work.
    let sb = sandbox_with(
        &r.path,
        SandboxConfig {
            allow_unix_sockets: true,
            ..config()
        },
    );
    let o = py(
        &sb,
        &r.path,
        "import socket,os\n\
         s=socket.socket(socket.AF_UNIX); s.bind('sock'); s.listen(1)\n\
         c=socket.socket(socket.AF_UNIX); c.connect('sock')\n\
         a,_=s.accept(); c.sendall(b'unix-ok'); print(a.recv(16).decode())",
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    assert!(o.stdout.contains("unix-ok"), "{o:?}");
}

#[test]
fn an_allowed_port_connects_others_do_not() {
    require_root();
    if !require_kernel_feature("Landlock ABI 4 (TCP port rules)", landlock_abi() >= 4) {
        return;
    }
    let r = root();
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let (pa, po) = (
        allowed.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let cfg = SandboxConfig {
        connect_ports: vec![pa],
        ..config()
    };
    let sb = sandbox_with(&r.path, cfg);
    let code = format!(
        "import socket\n\
         socket.create_connection(('127.0.0.1',{pa}),timeout=5).sendall(b'hello')\n\
         print('first')\n\
         socket.create_connection(('127.0.0.1',{po}),timeout=5)\n\
         print('second')"
    );
    let o = py(&sb, &r.path, &code);
    assert!(o.stdout.contains("first"), "{o:?}");
    assert!(!o.stdout.contains("second"), "{o:?}");
    let (mut s, _) = allowed.accept().unwrap();
    let mut buf = String::new();
    std::io::Read::read_to_string(&mut s, &mut buf).unwrap();
    assert_eq!(buf, "hello");
    assert!(matches!(other.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
}

#[test]
fn privileged_syscalls_fail() {
    require_root();
    let r = root();
    std::fs::create_dir(r.path.join("mnt")).unwrap();
    std::os::unix::fs::chown(r.path.join("mnt"), Some(NOBODY), Some(NOBODY)).unwrap();
    for allow_root_child in [false, true] {
        let cfg = SandboxConfig {
            allow_root_child,
            ..config()
        };
        let sb = sandbox_with(&r.path, cfg);
        let me = std::process::id();

        // ptrace attach to the supervisor: refused, and it is not traced.
        let o = py(
            &sb,
            &r.path,
            &format!(
                "import ctypes,os\nl=ctypes.CDLL(None,use_errno=True)\n\
                 print(l.ptrace(16,{me},0,0), ctypes.get_errno())"
            ),
        );
        assert!(o.stdout.starts_with("-1 "), "{o:?}");
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(status.contains("TracerPid:\t0\n"));
        // ptrace of its own child (same uid, a descendant: allowed by DAC
        // and Yama) is refused too, and the child is not traced.
        let o = py(
            &sb,
            &r.path,
            "import ctypes,os,time\nl=ctypes.CDLL(None,use_errno=True)\n\
             pid=os.fork()\n\
             if pid==0:\n time.sleep(5); os._exit(0)\n\
             r=l.ptrace(16,pid,0,0); e=ctypes.get_errno(); time.sleep(0.2)\n\
             print(r,e); os.kill(pid,9)",
        );
        assert_eq!(o.stdout.trim(), "-1 1", "{o:?}");

        // A user namespace would give a root-looking uid: never printed.
        let o = run(
            &sb,
            &r.path,
            &["/usr/bin/unshare", "-r", "/usr/bin/id", "-u"],
        );
        assert_ne!(o.code, Some(0), "{o:?}");
        assert!(o.stdout.trim().is_empty(), "{o:?}");

        // mount: fails and nothing appears in the (shared) mount table.
        let mnt = r.path.join("mnt");
        let o = py(
            &sb,
            &r.path,
            &format!(
                "import ctypes\nl=ctypes.CDLL(None,use_errno=True)\n\
                 print(l.mount(b'tmpfs',{:?}.encode(),b'tmpfs',0,None), ctypes.get_errno())",
                mnt.to_str().unwrap()
            ),
        );
        assert!(o.stdout.starts_with("-1 1"), "{o:?}");
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!mounts.contains(mnt.to_str().unwrap()));

        // io_uring_setup (425): EPERM, no ring fd.
        let o = py(
            &sb,
            &r.path,
            "import ctypes\nl=ctypes.CDLL(None,use_errno=True)\n\
             p=ctypes.create_string_buffer(120)\n\
             print(l.syscall(425,4,p), ctypes.get_errno())",
        );
        assert_eq!(o.stdout.trim(), "-1 1", "{o:?}");

        // Signals to a process outside the sandbox: the victim lives on.
        let mut victim = std::process::Command::new("/bin/sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let o = py(
            &sb,
            &r.path,
            &format!(
                "import os\ntry:\n os.kill({},9)\n print('sent')\nexcept OSError as e: print(e.errno)",
                victim.id()
            ),
        );
        let landlock_scopes = landlock_abi() >= 6;
        if !allow_root_child || landlock_scopes {
            assert!(!o.stdout.contains("sent"), "{o:?}");
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                victim.try_wait().unwrap().is_none(),
                "the victim was killed"
            );
        }
        let _ = victim.kill();
        victim.wait().unwrap();
    }
}

#[test]
fn the_child_is_unprivileged() {
    require_root();
    let r = root();
    let sb = sandbox(&r.path);
    let o = run(&sb, &r.path, &["/usr/bin/id", "-u"]);
    assert_eq!(o.code, Some(0), "{o:?}");
    assert_eq!(o.stdout.trim(), NOBODY.to_string());

    // cat is exec'd directly, so /proc/self is the sandboxed child itself.
    let o = run(&sb, &r.path, &["/bin/cat", "/proc/self/status"]);
    assert_eq!(o.code, Some(0), "{o:?}");
    let field = |name: &str| -> String {
        o.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} missing in {}", o.stdout))
            .trim()
            .to_string()
    };
    assert_eq!(field("NoNewPrivs"), "1");
    assert_eq!(field("Seccomp"), "2");
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(cap), "0000000000000000", "{cap}");
    }
    assert!(
        field("Uid")
            .split_whitespace()
            .all(|u| u == NOBODY.to_string())
    );
    assert_eq!(field("Groups"), "");
    // Nothing of the supervisor's signal state leaks into the program.
    assert_eq!(field("SigIgn"), "0000000000000000");
    assert_eq!(field("SigBlk"), "0000000000000000");
    let o = run(&sb, &r.path, &["/bin/sh", "-c", "yes | head -n 1"]);
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (Some(0), "y\n", ""),
        "{o:?}"
    );

    // allow_root_child keeps uid 0 with no capability at all.
    let cfg = SandboxConfig {
        allow_root_child: true,
        ..config()
    };
    let sb = sandbox_with(&r.path, cfg);
    let o = run(&sb, &r.path, &["/bin/cat", "/proc/self/status"]);
    assert!(o.stdout.contains("Uid:\t0\t0\t0\t0"), "{o:?}");
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            o.stdout.contains(&format!("{cap}:\t0000000000000000")),
            "{cap}: {}",
            o.stdout
        );
    }
    // ...and root's DAC override is gone with the capabilities: a 0600
    // file of another user in the root stays unreadable.
    let secret = r.path.join("other-users-secret");
    std::fs::write(&secret, "SECRET-dac-4b8e").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&secret, Some(1234), Some(1234)).unwrap();
    let o = run(&sb, &r.path, &["/bin/cat", secret.to_str().unwrap()]);
    assert!(!o.stdout.contains("SECRET-dac-4b8e"), "{o:?}");
}

#[test]
fn a_fork_bomb_is_contained_and_nothing_survives() {
    require_root();
    let r = root();
    let sb = sandbox(&r.path);
    let run_sb = Arc::new(sb.for_run().unwrap());
    if !require_kernel_feature("a run cgroup", run_sb.is_empty().is_some()) {
        return;
    }
    let mut bomb = spec(
        &run_sb,
        &r.path,
        &["/bin/sh", "-c", "b(){ b | b & }; b; sleep 30"],
    );
    // Stopped only after the check below, made while the bomb runs.
    bomb.timeout = Duration::from_secs(3);
    let running = std::thread::spawn(move || try_exec(bomb).unwrap());
    std::thread::sleep(Duration::from_millis(1500));
    // The supervisor's side can still fork while the bomb runs.
    let ok = std::process::Command::new("/bin/true").status().unwrap();
    assert!(ok.success());
    assert!(!running.is_finished(), "the bomb ended before its deadline");
    let o = out(Arc::clone(&run_sb), running.join().unwrap());
    assert!(o.timed_out);
    let mut empty = false;
    for _ in 0..1000 {
        if o.run.is_empty() == Some(true) {
            empty = true;
            break;
        }
        let _ = o.run.kill_all();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(empty, "processes of the run survived kill_all");
}

#[test]
fn child_failures_are_reported_precisely_and_nothing_runs() {
    require_root();
    let r = root();
    // Landlock alone: the run's own mount namespace would hide the
    // program outside the root before Landlock refuses to execute it.
    let sb = sandbox_with(&r.path, landlock_alone());
    let run_sb = Arc::new(sb.for_run().unwrap());
    let marker = r.path.join("ran");
    let mut spec = spec(
        &run_sb,
        &r.path,
        &["/bin/sh", "-c", &format!("touch {}", marker.display())],
    );
    spec.cwd = std::ffi::CString::new("/nonexistent-dir").unwrap();
    match try_exec(spec) {
        Err(SpawnError::Setup { step, source }) => {
            assert_eq!(step, "chdir");
            assert_eq!(source.raw_os_error(), Some(libc::ENOENT));
        }
        other => panic!("expected a chdir failure, got {other:?}"),
    }
    assert!(!marker.exists());
    match try_exec(common::spec(&run_sb, &r.path, &["/nonexistent/prog"])) {
        Err(SpawnError::NotFound(p)) => assert_eq!(p, "/nonexistent/prog"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    // A program outside the allowed paths cannot even be executed.
    let out_dir = outside();
    let prog = out_dir.path().join("prog.sh");
    let mut f = std::fs::File::create(&prog).unwrap();
    writeln!(f, "#!/bin/sh\ntouch {}", marker.display()).unwrap();
    drop(f);
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    match try_exec(common::spec(&run_sb, &r.path, &[prog.to_str().unwrap()])) {
        Err(SpawnError::NotExecutable(_)) => {}
        other => panic!("expected NotExecutable, got {other:?}"),
    }
    assert!(!marker.exists());
}

#[test]
fn per_run_home_is_private_and_removed() {
    require_root();
    let r = root();
    let sb = sandbox(&r.path);
    let run_sb = sb.for_run().unwrap();
    let home = run_sb.home().to_path_buf();
    let md = std::fs::metadata(&home).unwrap();
    assert_eq!(md.uid(), NOBODY);
    assert_eq!(md.mode() & 0o777, 0o700);
    let base = std::fs::metadata(home.parent().unwrap()).unwrap();
    assert_eq!(base.mode() & 0o777, 0o711);
    let o = run_in(
        Arc::new(run_sb),
        &r.path,
        &[
            "/bin/sh",
            "-c",
            "echo x > \"$HOME/f\" && mkdir \"$TMPDIR/d\"",
        ],
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    assert!(home.join("f").exists());
    drop(o);
    assert!(!home.exists(), "the run dir outlived its run");
}

#[test]
fn git_and_python_work_for_the_dropped_user() {
    require_root();
    let r = root();
    // A checkout owned by root, as when the supervisor cloned it.
    let repo = r.path.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let s = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &r.path)
            .output()
            .unwrap();
        assert!(s.status.success(), "{s:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a").unwrap();
    git(&["add", "a.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "init",
    ]);
    std::fs::write(repo.join("b.txt"), "b").unwrap();
    let sb = sandbox(&repo);
    let git_path = ["/usr/bin/git", "/usr/local/bin/git"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap();
    let o = run(&sb, &repo, &[git_path, "status", "--porcelain"]);
    assert_eq!(o.code, Some(0), "{o:?}");
    assert!(o.stdout.contains("?? b.txt"), "{o:?}");
    let o = py(
        &sb,
        &repo,
        "import json,ssl,hashlib; print(json.dumps({'ok': hashlib.sha256(b'x').hexdigest()[:8]}))",
    );
    assert_eq!(o.code, Some(0), "{o:?}");
    assert!(o.stdout.contains("2d711642"), "{o:?}");
    assert!(o.stderr.is_empty(), "{o:?}");
}

#[test]
fn summary_reports_what_was_applied() {
    require_root();
    let r = root();
    let sb = sandbox(&r.path);
    let s = sb.summary();
    assert!(s.landlock_abi >= 1);
    assert!(s.seccomp && s.no_new_privs);
    assert_eq!(s.network, "none");
    assert_eq!(s.uid, NOBODY);
    assert!(s.limits.iter().any(|l| l == "rlimit_nofile=1024"));
    let run_sb = sb.for_run().unwrap();
    let rs = run_sb.summary();
    // The cgroup pids limit is either applied or reported missing.
    let pids_applied = rs.limits.iter().any(|l| l == "cgroup_pids_max=256");
    let pids_missing = rs
        .not_applied
        .iter()
        .any(|n| n == "cgroup_pids" || n == "cgroup");
    assert!(pids_applied != pids_missing, "{rs:?}");
    if pids_applied {
        // ...and the child really sits in a cgroup with that limit.
        let o = run_in(
            Arc::new(run_sb),
            &r.path,
            &["/bin/cat", "/proc/self/cgroup"],
        );
        let mut limits = Vec::new();
        for line in o.stdout.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, ctl, path) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
            let mounts: &[&str] = match ctl {
                "pids" => &["/sys/fs/cgroup/pids"],
                "" => &["/sys/fs/cgroup", "/sys/fs/cgroup/unified"],
                _ => &[],
            };
            for m in mounts {
                if let Ok(v) = std::fs::read_to_string(format!("{m}{path}/pids.max")) {
                    limits.push(v.trim().to_string());
                }
            }
        }
        assert!(limits.iter().any(|l| l == "256"), "{limits:?} from {o:?}");
    }
    // A root the child user cannot write is flagged with a fix.
    let locked = tempfile::tempdir().unwrap();
    let s = sandbox(locked.path()).summary();
    assert!(s.warnings.iter().any(|w| w.contains("chown")), "{s:?}");
}

#[test]
fn abstract_unix_sockets_outside_the_sandbox_are_unreachable() {
    require_root();
    if !require_kernel_feature("Landlock ABI 6 (scopes)", landlock_abi() >= 6) {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    let name = format!("ae-sbx-abstract-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let r = root();
    let sb = sandbox(&r.path);
    let o = py(
        &sb,
        &r.path,
        &format!(
            "import socket\nc=socket.socket(socket.AF_UNIX)\nc.connect('\\0{name}')\nprint('connected')"
        ),
    );
    assert!(!o.stdout.contains("connected"), "{o:?}");
    assert!(matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
}

#[test]
fn leftovers_of_dead_supervisors_are_swept() {
    require_root();
    let r = root();
    let sb = sandbox(&r.path);
    let home = sb.for_run().unwrap().home().to_path_buf();
    let base = home.parent().unwrap().to_path_buf();
    // No pid can be above pid_max (at most 2^22), so this owner is dead.
    let stale = base.join("run-99999999-0-deadbeef");
    let live = base.join("run-1-0-cafebabe");
    std::fs::create_dir_all(stale.join("sub")).unwrap();
    std::fs::create_dir_all(&live).unwrap();
    let stale_cg: Vec<_> = [
        "/sys/fs/cgroup/pids/agent-exec",
        "/sys/fs/cgroup/agent-exec",
    ]
    .iter()
    .map(|b| std::path::Path::new(b).join("run-99999999-0"))
    .filter(|p| std::fs::create_dir(p).is_ok())
    .collect();
    // A supervisor starting now finds them.
    let _again = Supervisor::init(SupervisorOptions {
        sweep_stale: true,
        ..SupervisorOptions::none()
    });
    assert!(!stale.exists());
    assert!(live.exists(), "a live supervisor's run dir was removed");
    std::fs::remove_dir(&live).unwrap();
    for cg in stale_cg {
        assert!(!cg.exists(), "{} survived", cg.display());
    }
}

#[test]
fn only_an_untouched_run_dir_serves_the_next_run() {
    require_root();
    let r = root();
    // Runs prepared in order: a child made ahead would have taken its
    // directory before the run before it ended.
    let sb =
        agent_exec_sandbox::Sandbox::prepare(supervisor_spawning_each_run(), &config(), &r.path)
            .unwrap();
    let has_cgroup = sb.for_run().unwrap().is_empty().is_some();
    // Each case: what the run does to its HOME, and whether the next run
    // may get the same directory.
    let cases = [
        ("true", true),
        ("true", true),
        ("echo secret > \"$HOME/left-behind\"", false),
        ("mkdir \"$HOME/d\"", false),
        ("chmod 0755 \"$HOME\"", false),
        ("ln -s /etc \"$HOME/l\"", false),
    ];
    for (script, reusable) in cases {
        let run = Arc::new(sb.for_run().unwrap());
        let home = run.home().to_path_buf();
        let o = run_in(run, &r.path, &["/bin/sh", "-c", script]);
        assert_eq!(o.code, Some(0), "{script}: {o:?}");
        // `Out` holds the run: dropping it ends the run.
        drop(o);
        let next = sb.for_run().unwrap();
        let same = next.home() == home;
        assert_eq!(same, reusable && has_cgroup, "{script}");
        if !same {
            assert!(!home.exists(), "{script}: the run dir outlived its run");
        }
        // Whatever the next run gets is empty and private.
        let md = std::fs::symlink_metadata(next.home()).unwrap();
        assert_eq!(md.mode() & 0o7777, 0o700, "{script}");
        assert_eq!(md.uid(), NOBODY);
        assert_eq!(
            std::fs::read_dir(next.home()).unwrap().count(),
            0,
            "{script}"
        );
    }
}
