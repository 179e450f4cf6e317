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

use contain_common::{Deployment, Project, is_root, missing, outside_dir, stdout, token};

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
