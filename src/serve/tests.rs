//! The transport on its own, with a stand-in handler: admission, ordering,
//! cancellation on disconnect, draining. End-to-end tests through the real
//! service are in `tests/serve_*.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::oneshot;

use super::{Handler, ServerConfig, serve};
use crate::request::{CommandSpec, RequestLimits, RunRequest};
use crate::result::{ErrorType, ToolResult};
use crate::sandbox::CancelToken;

/// `echo X` answers X; `block` waits until cancelled (counting starts and
/// cancellations).
#[derive(Default)]
struct Stub {
    started: AtomicUsize,
    cancelled: AtomicUsize,
}

impl Handler for Stub {
    fn call(&self, _uid: u32, req: RunRequest, cancel: &CancelToken) -> ToolResult {
        self.started.fetch_add(1, Ordering::SeqCst);
        let CommandSpec::Shell(cmd) = req.command else {
            unreachable!("the wire only makes shell commands")
        };
        if cmd == "block" {
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.cancelled.fetch_add(1, Ordering::SeqCst);
            return ToolResult::refusal("stub", ErrorType::Cancelled, "cancelled");
        }
        let mut r = ToolResult::success("stub");
        r.stdout = cmd.trim_start_matches("echo ").to_string();
        r
    }
    fn describe(&self) -> Value {
        json!({"tool": "run_shell"})
    }
}

struct Running {
    path: std::path::PathBuf,
    stub: Arc<Stub>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

fn start(max_concurrent: usize, queue: usize, grace_ms: u64) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let stub = Arc::new(Stub::default());
    let (tx, rx) = oneshot::channel::<()>();
    let cfg = ServerConfig {
        max_concurrent,
        queue,
        grace: Duration::from_millis(grace_ms),
        allowed_uids: vec![nix::unistd::geteuid().as_raw()],
        limits: RequestLimits::default(),
        max_connections: 16,
        daemon_pid: std::process::id(),
    };
    let done = tokio::spawn(serve(
        listener,
        stub.clone(),
        cfg,
        async move {
            let _ = rx.await;
        },
        || {},
    ));
    Running {
        path,
        stub,
        stop: Some(tx),
        done,
        _dir: dir,
    }
}

struct Conn {
    r: BufReader<tokio::net::unix::OwnedReadHalf>,
    w: tokio::net::unix::OwnedWriteHalf,
}

impl Conn {
    async fn open(path: &std::path::Path) -> Conn {
        let (r, w) = UnixStream::connect(path).await.unwrap().into_split();
        Conn {
            r: BufReader::new(r),
            w,
        }
    }
    async fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        self.w.write_all(&line).await.unwrap();
    }
    async fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(30), self.r.read_line(&mut line))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed");
        serde_json::from_str(&line).unwrap()
    }
}

fn run(id: &str, cmd: &str) -> Value {
    json!({"id": id, "tool": "run_shell", "args": {"command": cmd}})
}

async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..3000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_when_full_and_disconnect_cancels_running_and_queued_calls() {
    let s = start(1, 1, 1000);
    let mut c = Conn::open(&s.path).await;
    c.send(run("1", "block")).await;
    until("first call started", || {
        s.stub.started.load(Ordering::SeqCst) == 1
    })
    .await;
    c.send(run("2", "block")).await;
    c.send(run("3", "block")).await;
    let r = c.recv().await;
    assert_eq!(r["id"], "3");
    assert_eq!(r["error_type"], "BUSY");
    drop(c);
    until("running call cancelled", || {
        s.stub.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
    // The queued call never reached the handler.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(s.stub.started.load(Ordering::SeqCst), 1);
    // The slot is free again.
    let mut c = Conn::open(&s.path).await;
    c.send(run("4", "echo again")).await;
    assert_eq!(c.recv().await["stdout"], "again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_out_of_order_and_invalid_lines_do_not_close_the_connection() {
    let s = start(4, 4, 1000);
    let mut c = Conn::open(&s.path).await;
    c.send(run("slow", "block")).await;
    c.w.write_all(b"{oops\n").await.unwrap();
    c.send(run("fast", "echo hi")).await;
    let first = c.recv().await;
    assert_eq!(first["error_type"], "INVALID_ARGUMENTS");
    assert!(first.get("id").is_none());
    let second = c.recv().await;
    assert_eq!(second["id"], "fast");
    assert_eq!(second["stdout"], "hi");
    c.send(json!({"id": 9, "tool": "describe"})).await;
    let d = c.recv().await;
    assert_eq!(d["id"], 9);
    assert!(d["stdout"].as_str().unwrap().contains("run_shell"));
    drop(c);
    until("the slow call is cancelled", || {
        s.stub.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_after_the_grace_period_and_answers_first() {
    let mut s = start(2, 2, 100);
    let mut c = Conn::open(&s.path).await;
    c.send(run("b", "block")).await;
    until("call started", || {
        s.stub.started.load(Ordering::SeqCst) == 1
    })
    .await;
    let _ = s.stop.take().unwrap().send(());
    let r = c.recv().await;
    assert_eq!(r["id"], "b");
    assert_eq!(r["error_type"], "CANCELLED");
    tokio::time::timeout(Duration::from_secs(30), s.done)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.stub.cancelled.load(Ordering::SeqCst), 1);
}
