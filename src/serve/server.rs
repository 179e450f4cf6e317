//! The accept loop, connections, admission control and shutdown.
//!
//! Each connection has a reader (this task) and a writer task fed through a
//! bounded channel, so answers go out as soon as each call ends, in any
//! order, and a client that stops reading slows only its own reader.
//!
//! Connections: each passes the peer checks (`admit_peer`) before a byte is
//! read, and at most `max_connections` are open; one more is answered
//! `BUSY` in one line and closed. A connection holds at most one request
//! line of input (`max_line_bytes`): a longer one is answered and the
//! connection closed, so what clients can make the daemon hold is bounded
//! by the two.
//!
//! Admission: at most `max_concurrent` calls run, at most `queue` more wait;
//! beyond that a request is answered `BUSY` at once. Waiting and running
//! calls watch two signals: the client vanishing and the daemon's hard
//! stop; either cancels the call, which kills its command tree.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{Notify, Semaphore, watch};

use super::Handler;
use super::out::{self, Out};
use crate::request::{Envelope, RequestLimits, RunRequest, ToolCall, parse_request_line};
use crate::result::{ErrorType, ToolResult};
use crate::sandbox::CancelToken;

/// How the server behaves, independent of where requests go.
#[derive(Debug, Clone)]
pub(crate) struct ServerConfig {
    pub max_concurrent: usize,
    pub queue: usize,
    /// How long running calls may finish after SIGTERM before they are
    /// cancelled.
    pub grace: Duration,
    /// Peer uids accepted (already resolved: never empty).
    pub allowed_uids: Vec<u32>,
    pub limits: RequestLimits,
    /// Connections open at once; more are answered `BUSY` and closed.
    pub max_connections: usize,
    /// The daemon's pid: peers that are its own runs are refused.
    pub daemon_pid: u32,
}

struct Shared<H> {
    handler: Arc<H>,
    cfg: ServerConfig,
    slots: Arc<Semaphore>,
    /// Running plus waiting calls (each held by an [`Admitted`]).
    admitted: AtomicUsize,
    idle: Notify,
    /// Set once SIGTERM arrives: nothing new starts.
    draining: watch::Sender<bool>,
    /// Set when the grace period is over: everything still running is
    /// cancelled.
    hard_stop: watch::Sender<bool>,
    /// Set when connections must stop reading and close.
    closing: watch::Sender<bool>,
    next_conn: AtomicU64,
    /// Connections being served.
    open: AtomicUsize,
    stats: super::stats::Stats,
}

impl<H: Handler> Shared<H> {
    /// The daemon's own answers take their ids from the same source as
    /// the service's calls.
    fn call_id(&self) -> String {
        crate::service::next_call_id()
    }

    fn release(&self) {
        if self.admitted.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }

    async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.admitted.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One admitted call, counted until it is dropped. A call lets go of it
/// (and of its slot) before its answer is written: a client that reads
/// the answer and then asks for `stats` must not find its own call still
/// counted. The answer is not lost to a drain that sees the count reach
/// zero first, since the call still holds its connection, whose writer
/// ends only once every holder is done.
struct Admitted<H: Handler>(Arc<Shared<H>>);

impl<H: Handler> Drop for Admitted<H> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Serves `listener` until `shutdown` resolves, then drains: running calls
/// get `cfg.grace` to finish before they are cancelled. `on_stop_accepting`
/// runs as soon as no new connection is taken (the socket file goes then).
pub(crate) async fn serve<H: Handler>(
    listener: tokio::net::UnixListener,
    handler: Arc<H>,
    cfg: ServerConfig,
    shutdown: impl std::future::Future<Output = ()>,
    on_stop_accepting: impl FnOnce(),
) {
    let shared = Arc::new(Shared {
        handler,
        slots: Arc::new(Semaphore::new(cfg.max_concurrent.max(1))),
        cfg,
        admitted: AtomicUsize::new(0),
        idle: Notify::new(),
        draining: watch::channel(false).0,
        hard_stop: watch::channel(false).0,
        closing: watch::channel(false).0,
        next_conn: AtomicU64::new(1),
        open: AtomicUsize::new(0),
        stats: super::stats::Stats::new(),
    });
    let mut conns = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
                    match admit_peer(&shared, &stream, conn) {
                        Admission::Serve(uid) => {
                            shared.open.fetch_add(1, Ordering::AcqRel);
                            conns.spawn(connection(shared.clone(), stream, conn, uid));
                        }
                        Admission::Refuse(r) => refuse(stream, &r),
                        Admission::Drop => {}
                    }
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::error!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            // Reap finished connection tasks as we go.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    on_stop_accepting();
    drain(&shared).await;
    // Writers flush what is queued; a client that does not read is not
    // waited for long.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    conns.abort_all();
    tracing::info!("stopped");
}

/// Nothing new starts; running calls get the grace period, then are
/// cancelled; then connections are told to close.
async fn drain<H: Handler>(shared: &Shared<H>) {
    let running = shared.admitted.load(Ordering::Acquire);
    tracing::info!(
        running,
        grace_ms = shared.cfg.grace.as_millis() as u64,
        "shutting down: draining"
    );
    shared.draining.send_replace(true);
    if tokio::time::timeout(shared.cfg.grace, shared.wait_idle())
        .await
        .is_err()
    {
        tracing::warn!(
            running = shared.admitted.load(Ordering::Acquire),
            "grace period over: cancelling the remaining calls"
        );
        shared.hard_stop.send_replace(true);
        if tokio::time::timeout(Duration::from_secs(30), shared.wait_idle())
            .await
            .is_err()
        {
            tracing::error!("calls did not end after cancellation; exiting anyway");
        }
    }
    shared.closing.send_replace(true);
}

/// What becomes of a new connection.
enum Admission {
    /// Served, for this peer uid.
    Serve(u32),
    /// Answered this one line, then closed.
    Refuse(Box<ToolResult>),
    /// Closed without a word (a peer that may not talk to the daemon at
    /// all learns nothing from it).
    Drop,
}

/// The checks every connection passes before a byte is read: the peer's
/// uid, that it is not one of the daemon's own runs, and room for one more
/// connection.
fn admit_peer<H: Handler>(shared: &Shared<H>, stream: &UnixStream, conn: u64) -> Admission {
    let cred = match stream.peer_cred() {
        Ok(cred) => cred,
        Err(e) => {
            tracing::warn!(conn, error = %e, "connection refused: peer credentials unavailable");
            return Admission::Drop;
        }
    };
    let (uid, pid) = (cred.uid(), cred.pid());
    if !shared.cfg.allowed_uids.contains(&uid) {
        tracing::warn!(conn, uid, pid = ?pid, "connection refused: peer uid not allowed");
        return Admission::Drop;
    }
    if let Some(why) = super::peer::refusal(pid.unwrap_or(0), shared.cfg.daemon_pid) {
        tracing::warn!(conn, uid, pid = ?pid, reason = %why, "connection refused: the peer is one of this daemon's runs");
        return Admission::Refuse(Box::new(ToolResult::refusal(
            shared.call_id(),
            ErrorType::PermissionDenied,
            format!(
                "connection refused: {why}. Commands this daemon runs may not call it; \
                 nothing was run."
            ),
        )));
    }
    let open = shared.open.load(Ordering::Acquire);
    if open >= shared.cfg.max_connections {
        tracing::warn!(conn, uid, pid = ?pid, open, "connection refused: too many connections");
        return Admission::Refuse(Box::new(ToolResult::refusal(
            shared.call_id(),
            ErrorType::Busy,
            format!(
                "connection refused: {} connections are open, the most this daemon takes; \
                 close one or retry later",
                shared.cfg.max_connections
            ),
        )));
    }
    tracing::debug!(conn, uid, pid = ?pid, "connection accepted");
    Admission::Serve(uid)
}

/// Writes `r` as one line and closes, without waiting: the socket is new,
/// so its buffer has room for the line; if not, the peer gets no answer.
fn refuse(stream: UnixStream, r: &ToolResult) {
    use std::io::Write;
    let Ok(mut line) = serde_json::to_vec(r) else {
        return;
    };
    line.push(b'\n');
    if let Ok(mut s) = stream.into_std() {
        let _ = s.write(&line);
    }
}

/// Per-connection state shared with its calls.
struct Conn {
    id: u64,
    /// The peer's uid (`SO_PEERCRED`): whose calls these are.
    uid: u32,
    /// Where its answers go (see `out`).
    out: Arc<Out>,
    /// Set when the client is gone (hung up, or a write failed).
    gone: watch::Sender<bool>,
    inflight: AtomicUsize,
    done: Notify,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The reading loop and every call are done with the connection:
        // the writer task ends once what is queued is out.
        self.out.finish();
    }
}

/// Bytes read from a connection at a time. Small, since every connection
/// holds one whatever it sends; a long line simply takes more reads.
const READ_BUF: usize = 8 << 10;
/// A line buffer that grew past this is given back after its line, so an
/// idle connection does not keep the memory of its longest request.
const KEEP_LINE_CAPACITY: usize = 64 << 10;

/// Counts a connection as open for as long as its task lives.
struct OpenGuard<'a>(&'a AtomicUsize);

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn connection<H: Handler>(shared: Arc<Shared<H>>, stream: UnixStream, id: u64, uid: u32) {
    let _open = OpenGuard(&shared.open);
    let gone = watch::channel(false).0;
    let out = match Out::new(&stream, gone.clone()) {
        Ok(out) => Arc::new(out),
        Err(e) => {
            tracing::warn!(conn = id, error = %e, "cannot answer on the connection: closing it");
            return;
        }
    };
    let (rd, wr) = stream.into_split();
    let conn = Arc::new(Conn {
        id,
        uid,
        out: Arc::clone(&out),
        gone,
        inflight: AtomicUsize::new(0),
        done: Notify::new(),
    });
    let writer = tokio::spawn(out::write_loop(out, wr));
    let mut reader = BufReader::with_capacity(READ_BUF, rd);
    let mut line = Vec::new();
    let mut closing = shared.closing.subscribe();
    let mut gone = conn.gone.subscribe();
    let mut eof = false;
    loop {
        tokio::select! {
            _ = until(&mut closing) => break,
            _ = until(&mut gone) => break,
            read = read_line_limited(&mut reader, &mut line, shared.cfg.limits.max_line_bytes) => match read {
                Ok(Line::Eof) => { eof = true; break; }
                Err(e) => {
                    tracing::debug!(conn = id, error = %e, "read failed");
                    conn.gone.send_replace(true);
                    break;
                }
                Ok(Line::TooLong) => {
                    // Reading on would mean holding, or skipping, whatever
                    // the client sends: answer and hang up instead.
                    let r = ToolResult::refusal(shared.call_id(), ErrorType::InvalidArguments, format!(
                        "request: line is over {} bytes; the connection is closed",
                        shared.cfg.limits.max_line_bytes
                    ));
                    respond(&conn, r, "unknown", Instant::now());
                    tracing::info!(conn = id, "line over the limit: closing the connection");
                    conn.gone.send_replace(true);
                    break;
                }
                Ok(Line::Data) => {
                    let trimmed = line.strip_suffix(b"\r").unwrap_or(&line);
                    if !trimmed.iter().all(u8::is_ascii_whitespace) {
                        dispatch(&shared, &conn, trimmed).await;
                    }
                    // A client that sends without reading its answers
                    // waits here, not in the daemon's memory.
                    conn.out.drain().await;
                    if line.capacity() > KEEP_LINE_CAPACITY {
                        line = Vec::new();
                    }
                }
            }
        }
    }
    if eof {
        // The client finished sending. It may still be waiting for answers
        // (a half-close, as `socat` does at end of input), so its calls keep
        // running until they end or the client hangs up for good.
        let fd = reader.get_ref().as_ref();
        loop {
            let done = conn.done.notified();
            let closing_now = *closing.borrow();
            if conn.inflight.load(Ordering::Acquire) == 0 || closing_now {
                break;
            }
            if peer_hung_up(fd) {
                conn.gone.send_replace(true);
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), done).await;
        }
    }
    // Calls still running hold their own handle on the connection; the
    // writer ends when the last of them has answered (or found the client
    // gone), and not before.
    drop(reader);
    drop(conn);
    let _ = writer.await;
}

/// Resolves once the flag is set. The guard `wait_for` returns is not
/// `Send`, so it must not live in a `select!` output.
async fn until(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|set| *set).await.is_err() {
        // The sender is gone, so the flag can never be set.
        std::future::pending::<()>().await;
    }
}

fn peer_hung_up(stream: &UnixStream) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::empty())];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(_) => fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)),
        Err(_) => false,
    }
}

async fn dispatch<H: Handler>(shared: &Arc<Shared<H>>, conn: &Arc<Conn>, line: &[u8]) {
    let received = Instant::now();
    let envelope = match parse_request_line(line, &shared.cfg.limits) {
        Ok(e) => e,
        Err(e) => {
            let r = e.to_result(shared.call_id());
            respond(conn, r, "invalid", received);
            return;
        }
    };
    let Envelope { id, call } = envelope;
    match call {
        ToolCall::Describe => {
            let mut r = ToolResult::description(shared.call_id(), &shared.handler.describe());
            r.id = id;
            respond(conn, r, "describe", received);
        }
        ToolCall::Stats => {
            let mut r = ToolResult::description(shared.call_id(), &stats_of(shared));
            r.message = "stats: the daemon's counters are in stdout as JSON".into();
            r.id = id;
            respond(conn, r, "stats", received);
        }
        ToolCall::RunShell(req) => admit(shared, conn, id, req, received).await,
    }
}

fn stats_of<H: Handler>(shared: &Shared<H>) -> serde_json::Value {
    let max_concurrent = shared.cfg.max_concurrent.max(1);
    let active_runs = max_concurrent.saturating_sub(shared.slots.available_permits());
    let admitted = shared.admitted.load(Ordering::Acquire);
    shared.stats.snapshot(super::stats::Load {
        active_runs,
        queue_depth: admitted.saturating_sub(active_runs),
        connections: shared.open.load(Ordering::Acquire),
        max_concurrent,
        queue_capacity: shared.cfg.queue,
    })
}

async fn admit<H: Handler>(
    shared: &Arc<Shared<H>>,
    conn: &Arc<Conn>,
    id: Option<serde_json::Value>,
    req: RunRequest,
    received: Instant,
) {
    let busy = |msg: String| {
        let mut r = ToolResult::refusal(shared.call_id(), ErrorType::Busy, msg);
        r.id = id.clone();
        r
    };
    let draining = *shared.draining.borrow();
    if draining {
        let r = busy("the daemon is shutting down and takes no new calls".into());
        shared.stats.record(&r, received.elapsed());
        respond(conn, r, "run_shell", received);
        return;
    }
    let cap = shared.cfg.max_concurrent + shared.cfg.queue;
    let admitted = Admitted(Arc::clone(shared));
    if shared.admitted.fetch_add(1, Ordering::AcqRel) >= cap {
        drop(admitted);
        let r = busy(format!(
            "{} calls are running and {} waiting, the most this daemon takes",
            shared.cfg.max_concurrent, shared.cfg.queue
        ));
        shared.stats.record(&r, received.elapsed());
        respond(conn, r, "run_shell", received);
        return;
    }
    conn.inflight.fetch_add(1, Ordering::AcqRel);
    let (shared, conn) = (shared.clone(), conn.clone());
    tokio::spawn(async move {
        // The call's own thread answers; a call that never started or
        // panicked is answered here.
        if let Some(r) = run_call(admitted, &conn, id, req, received).await {
            shared.stats.record(&r, received.elapsed());
            respond(&conn, r, "run_shell", received);
        }
        if conn.inflight.fetch_sub(1, Ordering::AcqRel) == 1 {
            conn.done.notify_waiters();
        }
    });
}

/// Runs one call. Its answer is sent by the thread that ran it; `Some`:
/// the answer the caller still has to send (the call never started, or
/// panicked).
async fn run_call<H: Handler>(
    admitted: Admitted<H>,
    conn: &Arc<Conn>,
    id: Option<serde_json::Value>,
    req: RunRequest,
    received: Instant,
) -> Option<ToolResult> {
    let shared = &Arc::clone(&admitted.0);
    let mut gone = conn.gone.subscribe();
    let mut draining = shared.draining.subscribe();
    let mut hard_stop = shared.hard_stop.subscribe();
    let cancelled_before_start = |why: &str| {
        let mut r = ToolResult::refusal(
            shared.call_id(),
            ErrorType::Cancelled,
            format!("{why} before the call started; nothing ran"),
        );
        r.id = id.clone();
        r
    };
    // Waiting in the queue: a client that left or a daemon that stops means
    // the call never starts.
    let permit = tokio::select! {
        p = Arc::clone(&shared.slots).acquire_owned() => match p {
            Ok(p) => p,
            Err(_) => return Some(cancelled_before_start("the daemon stopped")),
        },
        _ = until(&mut gone) => return Some(cancelled_before_start("the client disconnected")),
        _ = until(&mut draining) => return Some(cancelled_before_start("the daemon is shutting down")),
    };
    let token = CancelToken::new();
    // If this task is dropped mid-call (runtime shutdown), the command must
    // not outlive it unsupervised.
    let _cancel_on_drop = CancelOnDrop(token.clone());
    let handler = shared.handler.clone();
    let call_token = token.clone();
    // The blocking thread stays inside `call` until the command and all its
    // descendants are gone, so the thread a child was forked from (which
    // PDEATHSIG follows) outlives that child. (A child made ahead was
    // forked by the sandbox's own thread, which stays as long as the runs
    // it forked.)
    let uid = conn.uid;
    let (answer_conn, answer_id) = (Arc::clone(conn), id.clone());
    let mut job = tokio::task::spawn_blocking(move || {
        let mut r = handler.call(uid, req, &call_token);
        r.id = answer_id;
        admitted.0.stats.record(&r, received.elapsed());
        drop((permit, admitted));
        respond(&answer_conn, r, "run_shell", received);
    });
    let joined = loop {
        tokio::select! {
            j = &mut job => break j,
            _ = until(&mut gone), if !token.is_cancelled() => {
                tracing::info!(conn = conn.id, "client disconnected: cancelling its call");
                token.cancel();
            }
            _ = until(&mut hard_stop), if !token.is_cancelled() => token.cancel(),
        }
    };
    match joined {
        Ok(()) => None,
        Err(e) => {
            tracing::error!(error = %e, "the call panicked");
            let mut r = ToolResult::refusal(
                shared.call_id(),
                ErrorType::InternalError,
                "the call failed internally",
            );
            r.id = id;
            Some(r)
        }
    }
}

struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn respond(conn: &Conn, r: ToolResult, tool: &str, received: Instant) {
    let duration_ms = received.elapsed().as_millis() as u64;
    let mut line = match serde_json::to_vec(&r) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "could not encode a result");
            let fallback = ToolResult::refusal(
                r.call_id.clone(),
                ErrorType::InternalError,
                "the result could not be encoded",
            );
            serde_json::to_vec(&fallback).unwrap_or_default()
        }
    };
    line.push(b'\n');
    conn.out.send(line);
    // The log line after the answer: formatting it is off the client's
    // wait (BENCHMARKS.md, the daemon's per-run cost).
    tracing::info!(
        conn = conn.id,
        call_id = %r.call_id,
        tool,
        decision = ?r.policy_decision,
        error_type = ?r.error_type,
        exit_code = ?r.exit_code,
        duplicate = r.duplicate,
        duration_ms,
        "request"
    );
}

enum Line {
    /// A complete line (without its newline) is in the buffer.
    Data,
    /// The line goes on past the limit; nothing more was read after the
    /// limit was crossed.
    TooLong,
    Eof,
}

/// Reads one line into `buf`, never holding more than `max` bytes of it.
async fn read_line_limited<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            // A last line without a newline still counts.
            return Ok(if buf.is_empty() {
                Line::Eof
            } else {
                Line::Data
            });
        }
        let (chunk, found) = match avail.iter().position(|b| *b == b'\n') {
            Some(i) => (&avail[..i], Some(i + 1)),
            None => (avail, None),
        };
        if buf.len() + chunk.len() > max {
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(chunk);
        let used = found.unwrap_or(avail.len());
        r.consume(used);
        if found.is_some() {
            return Ok(Line::Data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Result<String, ()>> {
        let mut r = BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line_limited(&mut r, &mut buf, max).await.unwrap() {
                Line::Eof => return out,
                Line::Data => out.push(Ok(String::from_utf8(buf.clone()).unwrap())),
                Line::TooLong => {
                    out.push(Err(()));
                    return out;
                }
            }
        }
    }

    #[tokio::test]
    async fn lines_are_read_until_one_is_over_the_limit() {
        let got = lines(b"ab\ncd\nlast", 5).await;
        assert_eq!(
            got,
            vec![Ok("ab".into()), Ok("cd".into()), Ok("last".into())]
        );
        let got = lines(b"ab\n0123456789\ncd\n", 5).await;
        assert_eq!(got, vec![Ok("ab".into()), Err(())]);
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_limit_is_kept() {
        assert_eq!(
            lines(b"12345\n123456\n", 5).await,
            vec![Ok("12345".into()), Err(())]
        );
        // Without a newline too: what is held never passes the limit.
        assert_eq!(lines(b"123456", 5).await, vec![Err(())]);
    }

    #[tokio::test]
    async fn the_buffer_never_holds_more_than_the_limit() {
        // One byte short of the limit, then more without a newline: the
        // excess is refused before it is copied.
        let mut input = vec![b'x'; 1000];
        input.extend_from_slice(&[b'y'; 5000]);
        let mut r = BufReader::with_capacity(64, &input[..]);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line_limited(&mut r, &mut buf, 1001).await.unwrap(),
            Line::TooLong
        ));
        assert!(buf.len() <= 1001, "{}", buf.len());
    }
}
