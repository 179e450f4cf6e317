//! `agent-exec serve`: the `run_shell` tool over a Unix socket.
//!
//! Newline-delimited JSON both ways (see `docs/protocol.md`). The daemon
//! adds only transport concerns: who may connect, how many calls run, what
//! happens when a client or the daemon goes away. Policy, sandbox, limits,
//! idempotency, budgets and traces are the service's, shared with the CLI.

mod activation;
pub mod client;
mod out;
mod peer;
mod reaper;
mod server;
mod sigchld;
mod socket;
mod stats;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use server::{ServerConfig, serve};
use socket::{allowed_uids, bind};

use crate::request::{RequestLimits, RunRequest};
use crate::result::ToolResult;
use crate::sandbox::CancelToken;
use crate::sandbox::Supervisor;

/// What the daemon asks of the layer below it. `crate::service::Service`
/// is the real one; tests may put a stand-in behind the same transport.
pub(crate) trait Handler: Send + Sync + 'static {
    /// Runs one validated call of the peer `uid` to its end; blocking.
    fn call(&self, uid: u32, req: RunRequest, cancel: &CancelToken) -> ToolResult;
    /// The tool's JSON Schema, the policy's name and hash, and the limits.
    fn describe(&self) -> serde_json::Value;
}

impl Handler for crate::service::Service {
    fn call(&self, uid: u32, req: RunRequest, cancel: &CancelToken) -> ToolResult {
        crate::service::Service::call_as(self, uid, req, cancel)
    }
    fn describe(&self) -> serde_json::Value {
        crate::service::Service::describe(self)
    }
}

/// `agent-exec serve` options.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeOptions {
    /// Policy file (TOML); validated before the socket is created.
    #[arg(long)]
    pub policy: PathBuf,
    /// Project root the commands run in.
    #[arg(long)]
    pub root: PathBuf,
    /// Socket path; its directory must belong to this user and be writable
    /// by no one else. Optional under systemd socket activation (a socket
    /// passed in `LISTEN_FDS` is served instead of binding one).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// State directory (idempotency keys, budgets). Default: systemd's
    /// `$STATE_DIRECTORY` when set, else `state` next to the socket.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Calls running at once. Default: twice the number of cores.
    #[arg(long)]
    pub max_concurrent: Option<usize>,
    /// Calls waiting beyond those; more are answered BUSY at once.
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
    /// Connections open at once; another is answered BUSY and closed.
    /// Each may hold up to one request line (1 MiB) in memory.
    #[arg(long, default_value_t = 64)]
    pub max_connections: usize,
    /// How many sessions' budgets one peer uid may spend in total, across
    /// all its session labels (see docs/protocol.md, "Sessions").
    #[arg(long, default_value_t = crate::service::DEFAULT_UID_BUDGET_SESSIONS)]
    pub uid_budget_sessions: u64,
    /// On SIGTERM/SIGINT, how long running calls may finish before they are
    /// cancelled.
    #[arg(long, default_value_t = 10_000)]
    pub grace_ms: u64,
    /// Session traces keep full (redacted) arguments and results, so a
    /// session can be replayed later.
    #[arg(long)]
    pub record: bool,
    /// Answer calls from this recorded trace instead of running them.
    #[arg(long, value_name = "TRACE")]
    pub replay: Option<PathBuf>,
    /// strict: an unrecorded call answers UNRECORDED_CALL; lenient: it runs.
    #[arg(long, default_value = "strict", value_parser = ["strict", "lenient"], requires = "replay")]
    pub replay_mode: String,
    /// In lenient replay, let unrecorded mutating calls run for real.
    #[arg(long, requires = "replay")]
    pub allow_live_writes: bool,
    /// Internal: run as the reaper of the daemon with this pid (see
    /// `reaper`); started by the daemon itself.
    #[arg(long, hide = true)]
    pub reap_for: Option<u32>,
}

/// Why the daemon could not start (exit status 125).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("policy: {0}")]
    Policy(#[from] crate::policy::PolicyError),
    #[error("root {path}: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("socket {path}: {reason}")]
    Socket { path: PathBuf, reason: String },
    #[error("service: {0}")]
    Service(#[source] crate::service::ServiceError),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("trace {path}: {source}")]
    Trace {
        path: PathBuf,
        source: crate::trace::TraceError,
    },
    #[error("--max-concurrent must be at least 1")]
    NoSlots,
    #[error("--max-connections must be at least 1")]
    NoConnections,
    #[error("--uid-budget-sessions must be at least 1")]
    NoUidBudget,
    #[error("socket activation: {reason}")]
    Activation { reason: String },
    #[error("no socket: pass --socket PATH or start under systemd socket activation")]
    NoSocket,
    #[error(
        "no state directory: pass --state DIR (or --socket, or set StateDirectory= in the unit)"
    )]
    NoState,
}

impl ServeError {
    /// The daemon's wording for a service that could not be built: the
    /// root and the traces are named as the daemon's own options.
    fn from_service(e: crate::service::ServiceError, root: &std::path::Path) -> ServeError {
        use crate::service::ServiceError as S;
        match e {
            S::Root { source, .. } => ServeError::Root {
                path: root.to_path_buf(),
                source,
            },
            S::RootNotDir { .. } => ServeError::Root {
                path: root.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            },
            S::Trace { path, source } | S::Replay { path, source } => {
                ServeError::Trace { path, source }
            }
            other => ServeError::Service(other),
        }
    }
}

impl ServeError {
    pub fn exit_code(&self) -> i32 {
        125
    }
}

/// Entry point for `main`: runs the daemon and returns the process exit
/// status (0 after a clean shutdown, 125 when it could not start).
pub fn main(opts: ServeOptions, supervisor: Supervisor) -> i32 {
    init_logging();
    if let Some(pid) = opts.reap_for {
        return reaper::run(pid);
    }
    match run_serve(opts, &supervisor) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("agent-exec serve: {e}");
            e.exit_code()
        }
    }
}

/// Reaps what runs leave behind, for the crate's other long-lived
/// transports (the MCP server), as the daemon does. Call inside a runtime.
pub(crate) fn start_reaping(supervisor: &Supervisor) -> std::io::Result<()> {
    sigchld::start(supervisor).map_err(|e| std::io::Error::other(e.to_string()))
}

/// Structured logs on stderr; `RUST_LOG` overrides the `info` default.
/// Does nothing if the program already installed a subscriber.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// Loads and checks everything, binds the socket, and serves until SIGTERM
/// or SIGINT; then drains and removes the socket.
pub fn run_serve(opts: ServeOptions, supervisor: &Supervisor) -> Result<(), ServeError> {
    let max_concurrent = match opts.max_concurrent {
        Some(0) => return Err(ServeError::NoSlots),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(2, |n| n.get() * 2),
    };
    if opts.max_connections == 0 {
        return Err(ServeError::NoConnections);
    }
    if opts.uid_budget_sessions == 0 {
        return Err(ServeError::NoUidBudget);
    }
    // Adopted before any thread exists: reading the activation variables
    // removes `LISTEN_PID` and `LISTEN_FDS` from the environment.
    let inherited = activation::inherited_listener()?;
    if inherited.is_none() && opts.socket.is_none() {
        return Err(ServeError::NoSocket);
    }
    let policy = crate::policy::Policy::load(&opts.policy)?;
    let state_dir = state_dir(&opts)?;
    let limits = RequestLimits::from_policy(&policy.limits);
    let allowed = allowed_uids(&policy.daemon.allowed_uids);
    let group = policy.daemon.socket_group.clone();
    let (policy_name, policy_hash) = (policy.name.clone(), policy.sha256.clone());

    // The service opens the state store: an unusable state directory stops
    // the start here, before the socket exists.
    let service = Arc::new(
        build_service(policy, state_dir, &opts, supervisor)
            .map_err(|e| ServeError::from_service(e, &opts.root))?,
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("agent-exec-serve")
        // Children are spawned from the runtime's threads, which exec
        // nothing themselves; the main thread keeps its bounding set for
        // the reaper it execs.
        .on_thread_start(supervisor.thread_start_hook())
        // Calls beyond the running slots wait in the queue, not on threads.
        .max_blocking_threads(max_concurrent + 4)
        .build()
        .map_err(|source| ServeError::Io {
            what: "starting the runtime",
            source,
        })?;
    let cfg = ServerConfig {
        max_concurrent,
        queue: opts.queue,
        grace: Duration::from_millis(opts.grace_ms),
        allowed_uids: allowed,
        limits,
        max_connections: opts.max_connections,
        daemon_pid: std::process::id(),
    };
    let result = runtime.block_on(async {
        // Signal handlers first: once the socket accepts, a SIGTERM must
        // mean a clean shutdown, never the default instant death.
        let shutdown = shutdown_signal()?;
        sigchld::start(supervisor)?;
        // The runtime's threads are idle here, so the umask `bind` sets
        // for an instant affects no other file creation.
        // A passed socket belongs to the service manager, which created
        // it and removes it; only a socket bound here has a guard.
        let (std_listener, mut guard, shown) = match (inherited, &opts.socket) {
            (Some((l, name)), _) => (l, None, format!("passed by the service manager ({name})")),
            (None, Some(path)) => {
                let (l, g) = bind(path, group.as_deref())?;
                (l, Some(g), path.display().to_string())
            }
            (None, None) => return Err(ServeError::NoSocket),
        };
        let listener =
            tokio::net::UnixListener::from_std(std_listener).map_err(|source| ServeError::Io {
                what: "registering the listener",
                source,
            })?;
        let reaper = reaper::spawn(&opts);
        if let Some(r) = &reaper {
            supervisor.keep_own_child(r.pid());
        }
        tracing::info!(
            socket = %shown,
            policy = %policy_name,
            policy_sha256 = %policy_hash,
            max_concurrent,
            queue = opts.queue,
            max_connections = opts.max_connections,
            "serving"
        );
        activation::notify(&format!("READY=1\nSTATUS=serving, policy {policy_name}"));
        serve(listener, service.clone(), cfg, shutdown, || {
            activation::notify("STOPPING=1");
            if let Some(g) = guard.as_mut() {
                g.remove_file();
            }
        })
        .await;
        Ok::<_, ServeError>(reaper)
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    // Dropping the service closes the store, which checkpoints its journal.
    drop(service);
    // Last: the reaper sweeps once it sees this end of its pipe close.
    result.map(drop)
}

/// `--state`, else the unit's `StateDirectory=`, else `state` next to the
/// socket.
fn state_dir(opts: &ServeOptions) -> Result<PathBuf, ServeError> {
    if let Some(s) = &opts.state {
        return Ok(s.clone());
    }
    if let Some(dir) = std::env::var_os("STATE_DIRECTORY") {
        // Several directories are separated by ':'; the first is ours.
        let first = dir.to_string_lossy().split(':').next().map(PathBuf::from);
        if let Some(d) = first.filter(|d| !d.as_os_str().is_empty()) {
            return Ok(d);
        }
    }
    match &opts.socket {
        Some(sock) => Ok(sock
            .parent()
            .map_or_else(|| PathBuf::from("state"), |p| p.join("state"))),
        None => Err(ServeError::NoState),
    }
}

fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, ServeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|source| ServeError::Io {
        what: "installing the SIGTERM handler",
        source,
    })?;
    let mut int = signal(SignalKind::interrupt()).map_err(|source| ServeError::Io {
        what: "installing the SIGINT handler",
        source,
    })?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
    })
}

/// The one place that knows how the service is configured for the daemon.
fn build_service(
    policy: crate::policy::Policy,
    state_dir: PathBuf,
    opts: &ServeOptions,
    supervisor: &Supervisor,
) -> Result<crate::service::Service, crate::service::ServiceError> {
    // One trace per session, rotated by size, next to the durable state.
    // Evidence is part of the contract: no traces, no daemon.
    let mut builder = crate::service::Service::builder(policy, &opts.root)
        .trace_dir(
            state_dir.join("traces"),
            opts.record,
            Some(TRACE_ROTATE_BYTES),
        )
        .state_dir(state_dir)
        .uid_budget_sessions(opts.uid_budget_sessions)
        .require_idempotency(true);
    if let Some(path) = &opts.replay {
        let mode = if opts.replay_mode == "lenient" {
            crate::trace::ReplayMode::Lenient
        } else {
            crate::trace::ReplayMode::Strict
        };
        builder = builder.replay(path, mode, opts.allow_live_writes);
    }
    builder.build(supervisor)
}

/// Size at which a session's trace starts a new file.
const TRACE_ROTATE_BYTES: u64 = 64 << 20;
