//! A run's own namespaces in every deployment, a supervisor run by an
//! ordinary user included (its runs make theirs inside a user namespace of
//! the sandbox's own): host sockets in `/tmp`, `/run` and `/home` are out
//! of reach and out of view even for a policy that opts into Unix
//! sockets, their metadata is gone (Landlock has no hook for `stat`), and
//! `/proc/net/unix` lists none of the host's bound paths. Each check is
//! against a control run with `namespaces = "off"`, which reaches them.

mod contain_common;

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use contain_common::{
    Deployment, Project, is_root, missing, outside_dir, require_kernel_feature, stdout, token,
};

/// Host places a run must not see: a listener under `/tmp`, and as root a
/// directory of `/run` and one of `/home`, all open to every uid by their
/// modes, so only the namespace can be what hides them.
struct HostPlaces {
    _tmp: tempfile::TempDir,
    listener: UnixListener,
    socket: PathBuf,
    made: Vec<PathBuf>,
}

impl HostPlaces {
    fn new() -> HostPlaces {
        let tmp = outside_dir();
        let socket = tmp.path().join("host.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut made = Vec::new();
        if is_root() {
            for parent in ["/run", "/home"] {
                let dir = Path::new(parent).join(format!("ae-ns-{}", token()));
                std::fs::create_dir(&dir).unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
                std::fs::write(dir.join("host-file"), "host").unwrap();
                made.push(dir);
            }
        }
        HostPlaces {
            _tmp: tmp,
            listener,
            socket,
            made,
        }
    }

    /// The paths whose metadata a run must not get.
    fn hidden(&self) -> Vec<PathBuf> {
        let mut v = vec![self.socket.clone()];
        v.extend(self.made.iter().map(|d| d.join("host-file")));
        v
    }

    fn connections(&self) -> usize {
        let mut n = 0;
        loop {
            match self.listener.accept() {
                Ok(_) => n += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
                Err(e) => panic!("accept: {e}"),
            }
        }
    }

    /// Prints `connect <result>`, `stat <path> <result>` per hidden path
    /// and whether `/proc/net/unix` names the host socket.
    fn probe(&self) -> String {
        let hidden: Vec<String> = self
            .hidden()
            .iter()
            .map(|p| format!("{:?}", p.to_str().unwrap()))
            .collect();
        format!(
            r#"import os, socket
def result(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return "errno%d" % e.errno
print("connect", result(lambda: socket.socket(socket.AF_UNIX).connect({sock:?})))
for p in [{hidden}]:
    print("stat", p, result(lambda: os.stat(p)))
try:
    listed = open("/proc/net/unix").read()
    print("proc-net-unix", "names-host-socket" if {sock:?} in listed else "clean")
except OSError as e:
    print("proc-net-unix", "errno%d" % e.errno)
"#,
            sock = self.socket.to_str().unwrap(),
            hidden = hidden.join(", "),
        )
    }
}

impl Drop for HostPlaces {
    fn drop(&mut self) {
        for d in &self.made {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn limits(v: &serde_json::Value) -> Vec<String> {
    v["sandbox"]["limits"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A root outside `/tmp` (a root beneath it keeps `/tmp` the host's).
fn project(dep: Deployment, namespaces: &str) -> Project {
    let extra = format!("namespaces = \"{namespaces}\"\n");
    Project::with_tables_in(dep, true, "", &extra, Some(Path::new("/var/tmp")))
}

#[test]
fn host_sockets_and_their_metadata_are_out_of_view_in_every_deployment() {
    let places = HostPlaces::new();
    for dep in Deployment::all() {
        let p = project(dep, "required");
        p.write("probe.py", &places.probe());
        let v = p.run(&["python3", "probe.py"]);
        if v["error_type"] == "SANDBOX_UNAVAILABLE" {
            // Only a supervisor without root depends on the host's leave
            // (unprivileged user namespaces); a root one always has it.
            assert_eq!(dep, Deployment::User, "{v:#}");
            missing("unprivileged user namespaces, for an ordinary user's supervisor");
            continue;
        }
        assert_eq!(v["exit_code"], 0, "{dep:?}: {v:#}");
        let limits = limits(&v);
        for ns in ["mount_namespace", "ipc_namespace", "net_namespace"] {
            assert!(limits.iter().any(|l| l == ns), "{dep:?}: no {ns}: {v:#}");
        }
        // Made in a user namespace exactly when the supervisor is not root.
        let in_user_ns = dep == Deployment::User && is_root() || !is_root();
        assert_eq!(
            limits.iter().any(|l| l == "user_namespace"),
            in_user_ns,
            "{dep:?}: {v:#}"
        );
        let out = stdout(&v);
        assert_eq!(
            places.connections(),
            0,
            "{dep:?}: a connection arrived: {v:#}"
        );
        assert!(out.contains("connect errno"), "{dep:?}: {out}");
        for path in places.hidden() {
            let line = format!("stat {} errno2\n", path.display());
            assert!(out.contains(&line), "{dep:?}: {path:?} visible: {out}");
        }
        assert!(
            !out.contains("names-host-socket"),
            "{dep:?}: /proc/net/unix lists the host's socket: {out}"
        );

        // Control: without namespaces the same program reaches the socket
        // and stats every path, so the checks above can fail.
        let p = project(dep, "off");
        p.write("probe.py", &places.probe());
        let v = p.run(&["python3", "probe.py"]);
        let out = stdout(&v);
        assert_eq!(places.connections(), 1, "{dep:?}: control: {v:#}");
        for path in places.hidden() {
            let line = format!("stat {} ok\n", path.display());
            assert!(out.contains(&line), "{dep:?}: control: {out}");
        }
    }
}

#[test]
fn a_non_root_supervisors_runs_keep_their_uid_and_no_capability() {
    let dep = Deployment::User;
    if is_root() && !Deployment::all().contains(&dep) {
        return;
    }
    let p = project(dep, "required");
    let script = r#"import ctypes, os
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"):
    print(k, status[k].strip())
print("uid", os.getuid(), os.geteuid())
print("map", " ".join(open("/proc/self/uid_map").read().split()))
open("made-inside", "w").write("x")
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER = 0x10000000
r = libc.unshare(CLONE_NEWUSER)
print("unshare", "ok" if r == 0 else "errno%d" % ctypes.get_errno())
"#;
    p.write("caps.py", script);
    let v = p.run(&["python3", "caps.py"]);
    if v["error_type"] == "SANDBOX_UNAVAILABLE" {
        missing("unprivileged user namespaces, for an ordinary user's supervisor");
        return;
    }
    assert_eq!(v["exit_code"], 0, "{v:#}");
    let out = stdout(&v);
    for k in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            out.contains(&format!("{k} 0000000000000000\n")),
            "{k} not empty: {out}"
        );
    }
    assert!(out.contains("NoNewPrivs 1\n"), "{out}");
    let uid = dep.child_uid();
    assert!(out.contains(&format!("uid {uid} {uid}\n")), "{out}");
    // Only the supervisor's own uid is mapped, onto itself.
    assert!(out.contains(&format!("map {uid} {uid} 1\n")), "{out}");
    // The filter refuses new namespaces to the run.
    assert!(out.contains("unshare errno"), "{out}");
    // What it made is the ordinary user's on the host.
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(p.path().join("made-inside")).unwrap();
    assert_eq!(md.uid(), uid);
}

/// Runs its arguments under a seccomp filter that refuses `clone` and
/// `unshare` with `CLONE_NEWUSER` (and hides `clone3`), as a host that
/// forbids unprivileged user namespaces does (a sysctl, an LSM).
fn no_user_namespaces_wrapper() -> String {
    let (clone, unshare) = if cfg!(target_arch = "aarch64") {
        (220, 97)
    } else {
        (56, 272)
    };
    format!(
        r#"import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def stmt(code, k): return struct.pack("HBBI", code, 0, 0, k)
def jump(code, k, jt, jf): return struct.pack("HBBI", code, jt, jf, k)
ALLOW, EPERM, ENOSYS = 0x7fff0000, 0x00050000 | 1, 0x00050000 | 38
prog = b"".join([
    stmt(0x20, 0),
    jump(0x15, 435, 0, 1), stmt(0x06, ENOSYS),
    jump(0x15, {clone}, 1, 0),
    jump(0x15, {unshare}, 0, 3),
    stmt(0x20, 16),
    jump(0x45, 0x10000000, 0, 1), stmt(0x06, EPERM),
    stmt(0x06, ALLOW),
])
buf = ctypes.create_string_buffer(prog)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = Fprog(len(prog) // 8, ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(fp), 0, 0) == 0
os.execv(sys.argv[1], sys.argv[1:])
"#
    )
}

#[test]
fn a_host_without_user_namespaces_says_so_or_refuses() {
    if !require_kernel_feature(
        "root and setpriv (util-linux), to run the CLI as an ordinary user",
        is_root() && Path::new("/usr/bin/setpriv").exists(),
    ) {
        return;
    }
    let wrapper = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(wrapper.path(), no_user_namespaces_wrapper()).unwrap();
    std::fs::set_permissions(wrapper.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = |namespaces: &str, script: &str| -> (serde_json::Value, Project) {
        let p = project(Deployment::User, namespaces);
        p.write("probe.py", script);
        let out = std::process::Command::new("setpriv")
            .arg(format!("--reuid={}", contain_common::ORDINARY))
            .arg(format!("--regid={}", contain_common::ORDINARY))
            .arg("--clear-groups")
            .arg(contain_common::PYTHON)
            .arg(wrapper.path())
            .arg(env!("CARGO_BIN_EXE_agent-exec"))
            .arg("--policy")
            .arg(p.policy_file())
            .arg("--root")
            .arg(p.path())
            .args(["--", "python3", "probe.py"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir(p.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(text.lines().next().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
        (v, p)
    };
    let places = HostPlaces::new();
    // `auto`: the run goes on without them, and the result says which
    // layers were not applied; the host's /tmp is what it sees.
    let (v, _p) = run("auto", &places.probe());
    assert_eq!(v["exit_code"], 0, "{v:#}");
    let not_applied = v["sandbox"]["not_applied"].to_string();
    for ns in ["mount_namespace", "ipc_namespace", "net_namespace"] {
        assert!(not_applied.contains(ns), "{ns} not listed: {v:#}");
    }
    assert!(
        !limits(&v).iter().any(|l| l.ends_with("_namespace")),
        "{v:#}"
    );
    let line = format!("stat {} ok\n", places.socket.display());
    assert!(stdout(&v).contains(&line), "{v:#}");
    // `required`: nothing runs, and the refusal names the reason.
    let (v, p) = run("required", "open('ran', 'w').write('x')\n");
    assert_eq!(v["error_type"], "SANDBOX_UNAVAILABLE", "{v:#}");
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("refused it an unprivileged user namespace"),
        "{message}"
    );
    assert!(!p.path().join("ran").exists(), "the command ran");
}

/// Where a root supervisor pinned its runs' network namespace, read from
/// the mount table: an nsfs mount at `…/netns/net`.
fn pinned_network() -> Option<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table.lines().find_map(|l| {
        let (fields, rest) = l.split_once(" - ")?;
        let point = fields.split(' ').nth(4)?;
        (rest.starts_with("nsfs ") && point.ends_with("/netns/net")).then(|| PathBuf::from(point))
    })
}

fn namespace_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("net:[{}]", std::fs::metadata(path).unwrap().ino())
}

/// A root supervisor's one-shot calls join one empty network namespace,
/// pinned in its private directory, instead of making one each: two calls'
/// runs are in the same namespace, which is not the host's and has no
/// interface but `lo`. A pin that is gone (as after a reboot, which leaves
/// the file it was mounted on) is made again by the next call.
#[test]
fn a_root_supervisors_one_shot_calls_share_a_pinned_empty_network_namespace() {
    if !is_root() {
        missing("a root supervisor, which alone can pin a namespace");
        return;
    }
    let p = project(Deployment::RootOnUserProject, "required");
    p.write(
        "ns.py",
        "import os\nprint(os.readlink('/proc/self/ns/net'))\n\
         print(' '.join(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:])))\n",
    );
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    let host = host.to_str().unwrap();
    let run = || {
        let v = p.run(&["python3", "ns.py"]);
        assert_eq!(v["exit_code"], 0, "{v:#}");
        assert!(limits(&v).iter().any(|l| l == "net_namespace"), "{v:#}");
        let out = stdout(&v).to_string();
        let (ns, interfaces) = out.trim_end().split_once('\n').unwrap();
        assert_ne!(ns, host, "the run is in the host's network namespace");
        assert_eq!(interfaces, "lo", "{out}");
        ns.to_string()
    };
    let first = run();
    let second = run();
    assert_eq!(first, second, "each call made its own namespace");
    let pin = pinned_network().expect("no network namespace pinned");
    assert_eq!(namespace_of(&pin), first);

    // The pin gone, its file left: the next call makes and pins another.
    let detached = std::process::Command::new("umount")
        .args(["-l", pin.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(detached.success());
    assert!(std::fs::metadata(&pin).unwrap().is_file());
    let third = run();
    let pin = pinned_network().expect("the pin was not made again");
    // Pinned again, and shared from then on. (Which call's namespace the
    // pin holds is not asked: a call of another test in this binary may
    // have found the pin gone at the same moment and mounted its own over
    // the same file.)
    let fourth = run();
    assert_eq!(
        namespace_of(&pin),
        fourth,
        "the namespace pinned again is not shared"
    );
    assert_ne!(third, host);
}
