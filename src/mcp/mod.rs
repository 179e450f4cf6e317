//! `agent-exec mcp`: the `run_shell` tool as a Model Context Protocol
//! server over stdio, for agent hosts that speak MCP.
//!
//! JSON-RPC 2.0 over stdin/stdout through the official Rust SDK (`rmcp`),
//! protocol revision 2025-11-25 (the newest with an `initialize`
//! handshake; older revisions down to 2024-11-05 are negotiated when the
//! client asks for them). Like the socket daemon, this is a thin
//! transport: every call goes through [`Service::call`], so policy,
//! sandbox, limits, budgets and traces are the same.
//!
//! One server process serves one MCP session, and that session is the
//! service's session: its budget and its traces are kept under one label,
//! `mcp-<pid>-<start ms>`, for the uid the server runs as.

mod elicit;
mod handler;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

pub use elicit::{ElicitationApprover, PeerSlot};

use crate::policy::Policy;
use crate::sandbox::{CancelToken, Supervisor};
use crate::service::{Service, ServiceError};

/// `agent-exec mcp` options.
#[derive(Debug, Clone, clap::Args)]
pub struct McpOptions {
    /// Policy file (TOML); validated before the server answers anything.
    #[arg(long)]
    pub policy: PathBuf,
    /// Project root the commands run in.
    #[arg(long)]
    pub root: PathBuf,
    /// State directory (budgets, idempotency), kept across restarts.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// Append every call of the session to this JSONL trace.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// How long a human may take to answer an approval asked through the
    /// client (MCP elicitation); no answer in time is a refusal.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub approval_timeout_secs: u64,
}

/// Why the server could not start (exit status 125).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("policy: {0}")]
    Policy(#[from] crate::policy::PolicyError),
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
}

/// Entry point for `main`: serves until the client closes stdin (or a
/// SIGTERM/SIGINT), then returns the exit status: 0 after a clean end, 125
/// when the server could not start.
pub fn main(opts: McpOptions, supervisor: &Supervisor) -> i32 {
    init_logging();
    match run(&opts, supervisor) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("agent-exec mcp: {e}");
            125
        }
    }
}

/// Logs on stderr (stdout carries the protocol): this crate's at `info`,
/// the SDK's only when something is wrong; `RUST_LOG` overrides.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,agent_exec=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// Builds the service and serves one MCP session on stdio.
pub fn run(opts: &McpOptions, supervisor: &Supervisor) -> Result<(), McpError> {
    let policy = Policy::load(&opts.policy)?;
    let peer = Arc::new(PeerSlot::default());
    let approver = ElicitationApprover::new(
        peer.clone(),
        Duration::from_secs(opts.approval_timeout_secs.max(1)),
    );
    let mut builder = Service::builder(policy, &opts.root).approver(approver.clone());
    if let Some(dir) = &opts.state {
        builder = builder.state_dir(dir);
    }
    if let Some(path) = &opts.trace {
        builder = builder.trace_file(path, false);
    }
    let service = Arc::new(builder.build(supervisor)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("agent-exec-mcp")
        .on_thread_start(supervisor.thread_start_hook())
        .build()
        .map_err(|source| McpError::Io {
            what: "starting the runtime",
            source,
        })?;
    approver.attach(runtime.handle().clone());
    let inflight = Arc::new(Inflight::default());
    let result = runtime.block_on(async {
        crate::serve::start_reaping(supervisor).map_err(|source| McpError::Io {
            what: "starting the reaper",
            source,
        })?;
        let server = handler::McpServer::new(service.clone(), peer, inflight.clone());
        handler::serve_stdio(server).await
    });
    // The client is gone or the server was told to stop: nothing it
    // started may outlive it.
    inflight.cancel_all();
    runtime.block_on(inflight.wait_idle(Duration::from_secs(30)));
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(service);
    result
}

/// The calls running now, so the end of the session can stop them all.
#[derive(Default)]
pub(crate) struct Inflight {
    tokens: std::sync::Mutex<Vec<(u64, CancelToken)>>,
    next: std::sync::atomic::AtomicU64,
    running: AtomicUsize,
    idle: Notify,
    stopping: std::sync::atomic::AtomicBool,
}

impl Inflight {
    /// Registers a call; it stays registered until the guard drops. A
    /// call that starts once the session is ending is cancelled at once.
    pub(crate) fn enter(self: &Arc<Self>, token: CancelToken) -> InflightGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.running.fetch_add(1, Ordering::AcqRel);
        if let Ok(mut t) = self.tokens.lock() {
            t.push((id, token.clone()));
        }
        if self.stopping.load(Ordering::Acquire) {
            token.cancel();
        }
        InflightGuard {
            owner: self.clone(),
            id,
        }
    }

    pub(crate) fn cancel_all(&self) {
        self.stopping.store(true, Ordering::Release);
        if let Ok(t) = self.tokens.lock() {
            for (_, token) in t.iter() {
                token.cancel();
            }
        }
    }

    async fn wait_idle(&self, limit: Duration) {
        let wait = async {
            loop {
                let notified = self.idle.notified();
                if self.running.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(limit, wait).await.is_err() {
            tracing::error!("calls did not end after cancellation; exiting anyway");
        }
    }
}

pub(crate) struct InflightGuard {
    owner: Arc<Inflight>,
    id: u64,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if let Ok(mut t) = self.owner.tokens.lock() {
            t.retain(|(id, _)| *id != self.id);
        }
        if self.owner.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.owner.idle.notify_waiters();
        }
    }
}
