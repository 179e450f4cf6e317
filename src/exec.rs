//! Running one prepared child to completion: stdin feeding, concurrent
//! bounded capture of stdout and stderr, the wall-clock deadline, the hard
//! output limit, cancellation, and killing every descendant afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::spawn::ChildSpec;

/// Set from another thread (a disconnected client, a signal) to stop a run.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
pub struct ExecSpec {
    pub child: ChildSpec,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub drain: Duration,
    /// Characters kept per stream (head and tail halves).
    pub output_chars: usize,
    /// Total bytes after which the child is killed; 0: none.
    pub hard_limit_bytes: u64,
}

/// One stream as the model will see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// Head and tail joined by a marker when truncated; valid UTF-8.
    pub text: String,
    /// Every byte the child wrote, kept or not.
    pub bytes: u64,
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    OutputLimit,
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct ExecOutcome {
    pub termination: Termination,
    /// The main child's own status, when it ended by itself or was killed.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Spawn(#[from] crate::spawn::SpawnError),
    #[error("supervising the child failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the child; returns when it and every descendant are gone.
pub fn run(spec: ExecSpec, cancel: &CancelToken) -> Result<ExecOutcome, ExecError> {
    let _ = (spec, cancel);
    Err(ExecError::Io(std::io::Error::other("not yet implemented")))
}
