//! Unix sockets outside the project root: with `network: none`, a child
//! must not reach a pathname listener elsewhere (the system bus, /dev/log,
//! an ssh-agent, the daemon's own socket), by stream or by datagram, with
//! a socket or a datagram socket pair. Socket pairs of the connected kinds
//! keep working. Each check is on the listener's side.

mod contain_common;

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::Path;

use contain_common::{Deployment, Project, outside_dir, stdout};

/// Listeners in a directory outside the root, open to every uid.
struct Listeners {
    _dir: tempfile::TempDir,
    stream: UnixListener,
    dgram: UnixDatagram,
}

impl Listeners {
    fn new() -> Listeners {
        let dir = outside_dir();
        let (s, d) = (dir.path().join("s.sock"), dir.path().join("d.sock"));
        let stream = UnixListener::bind(&s).unwrap();
        let dgram = UnixDatagram::bind(&d).unwrap();
        for p in [&s, &d] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        stream.set_nonblocking(true).unwrap();
        dgram.set_nonblocking(true).unwrap();
        Listeners {
            _dir: dir,
            stream,
            dgram,
        }
    }

    fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// Connections and datagrams that arrived (and are consumed now).
    fn arrivals(&self) -> (usize, Vec<String>) {
        let mut conns = 0;
        loop {
            match self.stream.accept() {
                Ok(_) => conns += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("accept: {e}"),
            }
        }
        let mut grams = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            match self.dgram.recv(&mut buf) {
                Ok(n) => grams.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        (conns, grams)
    }
}

/// Tries every way to reach the listeners in `dir`; prints what worked.
fn probe(dir: &Path) -> String {
    format!(
        r#"import socket
S, D = {s:?}, {d:?}
def attempt(name, f):
    try:
        f()
        print(name, "reached")
    except OSError as e:
        print(name, "refused", e.errno)
def stream():
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(S)
def dgram():
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"socket-sendto", D)
def pair_sendto():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"pair-sendto", D)
def pair_connect():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.connect(D)
    a.send(b"pair-connect")
def pair_stream_reconnect():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    b.close()
    a.connect(S)
for f in (stream, dgram, pair_sendto, pair_connect, pair_stream_reconnect):
    attempt(f.__name__, f)
"#,
        s = dir.join("s.sock").to_str().unwrap(),
        d = dir.join("d.sock").to_str().unwrap(),
    )
}

#[test]
fn pathname_sockets_outside_the_root_see_nothing_arrive() {
    // The listeners are in a directory under /tmp, which the run's own
    // mount namespace hides: both runs go without it, so the opt-in below
    // is the only difference between them.
    let own_tmp = "namespaces = \"off\"\n";
    for dep in Deployment::all() {
        let l = Listeners::new();
        let p = Project::with_sandbox(dep, false, own_tmp);
        p.write("probe.py", &probe(l.dir()));
        let v = p.run(&["python3", "probe.py"]);
        assert_eq!(v["sandbox"]["network"], "none", "{dep:?}: {v:#}");
        let (conns, grams) = l.arrivals();
        assert_eq!(conns, 0, "{dep:?}: a stream connection arrived: {v:#}");
        assert!(grams.is_empty(), "{dep:?}: datagrams arrived: {grams:?}");

        // Control: the policy's opt-in lets the same program through, so
        // the listeners are reachable and the check above can fail.
        let p = Project::with_sandbox(dep, true, own_tmp);
        p.write("probe.py", &probe(l.dir()));
        let v = p.run(&["python3", "probe.py"]);
        let (conns, grams) = l.arrivals();
        assert_eq!(conns, 1, "{dep:?}: opted in, the connection arrives: {v:#}");
        for sent in ["socket-sendto", "pair-sendto", "pair-connect"] {
            assert!(
                grams.iter().any(|g| g == sent),
                "{dep:?}: opted in, {sent} arrives: {grams:?} {v:#}"
            );
        }
    }
}

#[test]
fn connected_socket_pairs_keep_working() {
    // Python's multiprocessing pipes are stream socket pairs; seqpacket
    // pairs are what sandboxed browsers and some runners use.
    let script = r#"import multiprocessing, socket
a, b = multiprocessing.Pipe()
p = multiprocessing.Process(target=lambda c: c.send("from-the-worker"), args=(b,))
p.start()
print(a.recv())
p.join()
x, y = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
x.send(b"seqpacket-pair")
print(y.recv(64).decode())
"#;
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        p.write("pairs.py", script);
        let v = p.run(&["python3", "pairs.py"]);
        assert_eq!(v["exit_code"], 0, "{dep:?}: {v:#}");
        assert_eq!(
            stdout(&v),
            "from-the-worker\nseqpacket-pair\n",
            "{dep:?}: {v:#}"
        );
    }
}

#[test]
fn with_the_opt_in_a_socket_inside_the_root_serves() {
    // A project's own server and client (a test suite talking to its
    // daemon) work when the policy opts in; the per-run TMPDIR holds it
    // because a root-owned root is not writable by the child.
    let script = r#"import os, socket
path = os.path.join(os.environ["TMPDIR"], "own.sock")
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect(path)
a, _ = s.accept(); c.sendall(b"own-socket-ok"); print(a.recv(32).decode())
"#;
    for dep in Deployment::all() {
        let p = Project::new(dep, true);
        p.write("own.py", script);
        let v = p.run(&["python3", "own.py"]);
        assert_eq!(stdout(&v), "own-socket-ok\n", "{dep:?}: {v:#}");
        // Without the opt-in the same program is refused.
        let p = Project::new(dep, false);
        p.write("own.py", script);
        let v = p.run(&["python3", "own.py"]);
        assert_ne!(v["exit_code"], 0, "{dep:?}: {v:#}");
        assert!(!stdout(&v).contains("own-socket-ok"), "{dep:?}: {v:#}");
    }
}
