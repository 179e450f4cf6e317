//! The write side of one connection: answers go out whole, each after
//! every answer sent before it, from whichever thread has one.
//!
//! A call's answer is written by the call's own thread, straight to the
//! socket, when nothing is waiting to be written before it: the call's
//! result then reaches the client without a hop back to the connection's
//! task and on to a writer task (about 0.1 ms a call, BENCHMARKS.md). A
//! line that cannot go out whole at once (the client is slow to read) is
//! queued, and so is every line after it until the queue is empty again;
//! the connection's writer task writes the queue in order. The client's
//! reading loop stops reading requests while the queue is long, so a
//! client that sends without reading holds a bounded amount of memory.

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Notify, watch};

/// Queued lines past which the connection stops reading requests.
pub(super) const BACKLOG_MAX: usize = 256;

pub(super) struct Out {
    /// A duplicate of the socket, for writes that need no task. It shares
    /// the socket's non-blocking mode, so a write never waits.
    fd: OwnedFd,
    state: Mutex<State>,
    /// Lines are queued, or the connection is done: for the writer task.
    queued: Notify,
    /// The queue shrank, or the client is gone: for the reading loop.
    drained: Notify,
    gone: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Vec<u8>>,
    /// The writer task is writing a line it took from the queue.
    writing: bool,
    /// A write failed: the client is gone, nothing more is written.
    closed: bool,
    /// No more lines will come: the writer task ends once the queue is out.
    finished: bool,
}

impl Out {
    pub(super) fn new(socket: &impl AsFd, gone: watch::Sender<bool>) -> std::io::Result<Out> {
        Ok(Out {
            fd: socket.as_fd().try_clone_to_owned()?,
            state: Mutex::new(State::default()),
            queued: Notify::new(),
            drained: Notify::new(),
            gone,
        })
    }

    /// Sends one line (with its newline), whole and after every line sent
    /// before it. Never blocks.
    pub(super) fn send(&self, mut line: Vec<u8>) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if st.closed {
            return;
        }
        if st.queue.is_empty() && !st.writing {
            match write_now(&self.fd, &line) {
                Ok(n) if n == line.len() => return,
                // The rest goes through the queue, before anything else.
                Ok(n) => drop(line.drain(..n)),
                Err(e) => {
                    tracing::debug!(error = %e, "client stopped reading: cancelling its calls");
                    self.close(&mut st);
                    return;
                }
            }
        }
        st.queue.push_back(line);
        drop(st);
        self.queued.notify_one();
    }

    /// How many lines wait to be written.
    pub(super) fn backlog(&self) -> usize {
        self.state.lock().map_or(0, |st| st.queue.len())
    }

    /// Waits until the backlog is at most [`BACKLOG_MAX`] or the client is
    /// gone.
    pub(super) async fn drain(&self) {
        loop {
            let shrank = self.drained.notified();
            if self.backlog() <= BACKLOG_MAX {
                return;
            }
            shrank.await;
        }
    }

    /// No more lines will come: the writer task ends once the queue is out.
    pub(super) fn finish(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.finished = true;
        }
        self.queued.notify_one();
    }

    fn close(&self, st: &mut State) {
        st.closed = true;
        st.queue.clear();
        self.gone.send_replace(true);
        self.drained.notify_waiters();
    }
}

/// Writes as much of `line` as the socket takes now: the count, which is
/// short only when the socket is full (`EAGAIN`).
fn write_now(fd: &OwnedFd, line: &[u8]) -> std::io::Result<usize> {
    let mut off = 0;
    while off < line.len() {
        match nix::unistd::write(fd, &line[off..]) {
            Ok(n) => off += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(off)
}

/// The connection's writer task: writes what was queued, in order, until
/// the connection is done and the queue is out, or the client is gone.
pub(super) async fn write_loop(out: std::sync::Arc<Out>, mut wr: OwnedWriteHalf) {
    loop {
        // Made before the queue is looked at, so a line queued after the
        // look still wakes the wait below.
        let more = out.queued.notified();
        let next = {
            let Ok(mut st) = out.state.lock() else {
                return;
            };
            if st.closed {
                return;
            }
            match st.queue.pop_front() {
                Some(line) => {
                    st.writing = true;
                    Some(line)
                }
                None if st.finished => break,
                None => None,
            }
        };
        let Some(line) = next else {
            more.await;
            continue;
        };
        let written = wr.write_all(&line).await;
        if let Ok(mut st) = out.state.lock() {
            st.writing = false;
            if let Err(e) = written {
                tracing::debug!(error = %e, "client stopped reading: cancelling its calls");
                out.close(&mut st);
                return;
            }
        }
        out.drained.notify_waiters();
    }
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::sync::Arc;

    /// A connection's writer on one end of a socket pair: the writer, its
    /// task, the client's end, and the connection's "gone" flag.
    fn connected() -> (
        Arc<Out>,
        tokio::task::JoinHandle<()>,
        std::os::unix::net::UnixStream,
        watch::Receiver<bool>,
    ) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let ours = tokio::net::UnixStream::from_std(ours).unwrap();
        let gone = watch::channel(false).0;
        let watched = gone.subscribe();
        let out = Arc::new(Out::new(&ours, gone).unwrap());
        // The read half is dropped: the tests only write.
        let (_rd, wr) = ours.into_split();
        let writer = tokio::spawn(write_loop(Arc::clone(&out), wr));
        (out, writer, theirs, watched)
    }

    /// Threads answering at once on one connection whose client reads
    /// slowly meanwhile, so the socket fills and frees in the middle of
    /// lines: every line arrives whole, each thread's in its order, and
    /// the queue (not only the direct write) carried some of them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_from_many_threads_arrive_whole_and_in_order() {
        let (out, writer, theirs, _gone) = connected();
        const THREADS: usize = 4;
        const LINES: usize = 400;
        let reader = std::thread::spawn(move || {
            let mut next = [0usize; THREADS];
            let mut lines = BufReader::with_capacity(1000, theirs);
            let mut line = String::new();
            let mut count = 0usize;
            loop {
                line.clear();
                if lines.read_line(&mut line).unwrap() == 0 {
                    break;
                }
                let mut parts = line.trim_end().splitn(3, ' ');
                let t: usize = parts.next().unwrap().parse().unwrap();
                let n: usize = parts.next().unwrap().parse().unwrap();
                let pad = parts.next().unwrap();
                assert_eq!(pad.len(), 1000 + 37 * (n % 50), "a line arrived cut");
                assert!(pad.bytes().all(|b| b == b'x'), "lines mixed");
                assert_eq!(n, next[t], "thread {t}'s lines out of order");
                next[t] += 1;
                count += 1;
                if count % 16 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(300));
                }
            }
            next
        });
        let most_queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let senders: Vec<_> = (0..THREADS)
            .map(|t| {
                let (out, most) = (Arc::clone(&out), Arc::clone(&most_queued));
                std::thread::spawn(move || {
                    for n in 0..LINES {
                        let pad = "x".repeat(1000 + 37 * (n % 50));
                        out.send(format!("{t} {n} {pad}\n").into_bytes());
                        most.fetch_max(out.backlog(), std::sync::atomic::Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        out.finish();
        writer.await.unwrap();
        assert_eq!(reader.join().unwrap(), [LINES; THREADS]);
        let most = most_queued.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            most > 0,
            "the socket never filled: the queue was not tested"
        );
    }

    /// A client gone for good: sending stops, the queue is dropped, and
    /// the connection is marked gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_gone_empties_the_queue_and_says_so() {
        let (out, writer, theirs, mut watch_gone) = connected();
        let line = vec![b'y'; 64 << 10];
        // Fill the socket and queue more than the backlog bound.
        for _ in 0..(BACKLOG_MAX + 8) {
            out.send(line.clone());
        }
        assert!(out.backlog() > BACKLOG_MAX);
        drop(theirs);
        tokio::time::timeout(std::time::Duration::from_secs(5), out.drain())
            .await
            .unwrap();
        assert_eq!(out.backlog(), 0);
        watch_gone.wait_for(|g| *g).await.unwrap();
        out.send(line);
        assert_eq!(
            out.backlog(),
            0,
            "a line was queued for a client that is gone"
        );
        tokio::time::timeout(std::time::Duration::from_secs(5), writer)
            .await
            .unwrap()
            .unwrap();
    }
}
