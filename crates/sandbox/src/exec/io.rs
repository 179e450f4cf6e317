//! The run's pipes: nonblocking reads into the bounded captures, and the
//! stdin text written as the child takes it.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::unistd::{read, write};

use crate::capture::Capture;
use crate::spawn::sys::PollSlots;

pub(super) fn errno_is(e: &std::io::Error, code: i32) -> bool {
    e.raw_os_error() == Some(code)
}

/// Waits until `fd` is readable or `timeout` passes.
pub(super) fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let mut slots = PollSlots::<1>::new();
        slots.set(0, fd, libc::POLLIN);
        match slots.ppoll(Some(left)) {
            Ok(n) if n > 0 => return true,
            Err(e) if errno_is(&e, libc::EINTR) => continue,
            _ => return false,
        }
    }
}

/// One output pipe and what was captured from it.
pub(super) struct Stream {
    pub fd: Option<OwnedFd>,
    pub cap: Capture,
}

impl Stream {
    /// Reads what is available (at most `max_reads` chunks, stopping once
    /// `stop_after` bytes are in). Returns the bytes read; closes the fd at
    /// EOF.
    pub(super) fn read_some(
        &mut self,
        buf: &mut [u8],
        max_reads: usize,
        stop_after: u64,
    ) -> std::io::Result<u64> {
        let Some(fd) = &self.fd else { return Ok(0) };
        let mut got = 0u64;
        let mut reads = 0;
        while reads < max_reads {
            let n = match read(fd, buf) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                self.fd = None;
                break;
            }
            self.cap.push(&buf[..n]);
            got += n as u64;
            reads += 1;
            if got >= stop_after {
                break;
            }
            // A short read almost always means the pipe is empty: skip the
            // extra syscall that would only return EAGAIN.
            if n < buf.len() {
                break;
            }
        }
        Ok(got)
    }
}

/// The stdin text still to be written.
pub(super) struct Input {
    pub fd: Option<OwnedFd>,
    pub data: Vec<u8>,
    pub off: usize,
}

impl Input {
    pub(super) fn write_some(&mut self) -> std::io::Result<()> {
        let Some(fd) = &self.fd else { return Ok(()) };
        while self.off < self.data.len() {
            let rest = &self.data[self.off..];
            // SIGPIPE is ignored by the Rust runtime, so a closed reader
            // shows up as EPIPE.
            let n = match write(fd, rest) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Ok(()),
                // The child closed its stdin (EPIPE) or it broke otherwise:
                // what it did not read is not ours to insist on.
                Err(_) => break,
            };
            self.off += n;
        }
        // All written (or the reader is gone): EOF tells the child.
        self.fd = None;
        Ok(())
    }
}
