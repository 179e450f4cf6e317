//! Building a service: the one place the root is canonicalized, the
//! sandbox prepared, the state store opened and traces and replay set up,
//! whichever transport asks.

use std::path::PathBuf;
use std::sync::Arc;

use super::approve::{Approver, NeverApprover};
use super::check::Checker;
use super::invocation::{BaseEnv, find_shell};
use super::schema::tool_schema_sha256;
use super::{ApprovalHome, Replay, Service};
use crate::approvals::LiveAmendments;
use crate::policy::{Enforcement, Namespaces, Policy, RequirePolicy, Requirement, SandboxPolicy};
use crate::provenance::{LedgerStore, Provenance, SessionFile};
use crate::sandbox::{self, Sandbox, Supervisor};
use crate::store::{Budgets, SqliteStore, StateStore, StoreError};
use crate::trace::{
    self, ReplayMode, Replayer, TraceDir, TraceError, TraceHeader, TraceOptions, TraceSink, Tracer,
};

/// Why a service (or a checker) could not be built.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("project root {path}: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("project root {path} is not a directory")]
    RootNotDir { path: PathBuf },
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The trace file or directory could not be opened.
    #[error("trace {path}: {source}")]
    Trace { path: PathBuf, source: TraceError },
    /// The recording to replay could not be loaded (or does not match).
    #[error("replay {path}: {source}")]
    Replay { path: PathBuf, source: TraceError },
    /// The state directory is inside the project root, where the commands
    /// run could rewrite approvals, amendments and idempotency records.
    #[error(
        "state directory {state} is inside the project root {root}: commands could rewrite the approvals and policy amendments kept there; use a directory outside the root"
    )]
    StateInsideRoot { state: PathBuf, root: PathBuf },
    /// An overlay of the policy is where the run could write it.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
}

/// Where the service's trace goes.
enum TraceTarget {
    /// One JSONL file for every call (the CLI's `--trace`/`--record`).
    File {
        path: PathBuf,
        record_full: bool,
        /// Written as `via` on each result line.
        via: Option<String>,
    },
    /// One JSONL file per session under a directory, rotated by size (the
    /// daemon).
    Dir {
        dir: PathBuf,
        record_full: bool,
        rotate_bytes: Option<u64>,
    },
    Sink(Arc<dyn TraceSink>),
}

enum StoreTarget {
    Dir(PathBuf),
    Store(Arc<dyn StateStore>),
}

struct ReplaySource {
    path: PathBuf,
    mode: ReplayMode,
    allow_live_writes: bool,
}

/// Configures a [`Service`]: `Service::builder(policy, root)`, then any of
/// the setters, then [`build`](ServiceBuilder::build). Nothing is opened or
/// checked before `build`, which does it all in one order: root, trace,
/// replay, sandbox, state store.
#[must_use]
pub struct ServiceBuilder {
    policy: Policy,
    root: PathBuf,
    state: Option<StoreTarget>,
    uid_budget_sessions: u64,
    require_idempotency: bool,
    approver: Box<dyn Approver>,
    trace: Option<TraceTarget>,
    replay: Option<ReplaySource>,
    ledger: Option<Arc<dyn LedgerStore>>,
}

/// How many sessions' budgets one uid may spend together, unless told.
pub const DEFAULT_UID_BUDGET_SESSIONS: u64 = 4;

impl ServiceBuilder {
    pub(super) fn new(policy: Policy, root: PathBuf) -> ServiceBuilder {
        ServiceBuilder {
            policy,
            root,
            state: None,
            uid_budget_sessions: DEFAULT_UID_BUDGET_SESSIONS,
            require_idempotency: false,
            approver: Box::new(NeverApprover),
            trace: None,
            replay: None,
            ledger: None,
        }
    }

    /// Keep the argument provenance ledger of one-shot calls in `path`
    /// (the CLI's `--session-file`), so consecutive calls share it. Without
    /// this (or [`ledger_store`](Self::ledger_store)), ledgers are kept
    /// with the state directory's `state.db` when there is one.
    pub fn session_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ledger = Some(Arc::new(SessionFile::new(path)));
        self
    }

    /// Keep argument provenance ledgers in another [`LedgerStore`].
    pub fn ledger_store(mut self, store: Arc<dyn LedgerStore>) -> Self {
        self.ledger = Some(store);
        self
    }

    /// Keep idempotency keys, session budgets and pending approvals in
    /// `state.db` under `dir` (created private to this uid when missing),
    /// so they survive restarts; decide under the policy amended by the
    /// rules humans saved there (see `crate::approvals`). The directory
    /// must be outside the project root.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state = Some(StoreTarget::Dir(dir.into()));
        self
    }

    /// Keep idempotency keys and budgets in another [`StateStore`].
    pub fn store(mut self, store: Arc<dyn StateStore>) -> Self {
        self.state = Some(StoreTarget::Store(store));
        self
    }

    /// How many sessions' budgets (the policy's `[budget]`) one uid may
    /// spend across all its session labels together (default
    /// [`DEFAULT_UID_BUDGET_SESSIONS`]; at least 1). Labels are chosen by
    /// the client, so without this bound a new label would be a new
    /// budget.
    pub fn uid_budget_sessions(mut self, sessions: u64) -> Self {
        self.uid_budget_sessions = sessions.max(1);
        self
    }

    /// Refuse calls the policy marks `needs_key` (state changed beyond
    /// ordinary work: commits, history) that carry no idempotency key (the
    /// daemon does: a client that retries must not apply such a change
    /// twice). Other mutating calls may carry a key and are deduplicated.
    pub fn require_idempotency(mut self, required: bool) -> Self {
        self.require_idempotency = required;
        self
    }

    /// Who answers `require_approval` (default: [`NeverApprover`]).
    pub fn approver(mut self, approver: impl Approver + 'static) -> Self {
        self.approver = Box::new(approver);
        self
    }

    /// Append every call to the JSONL trace at `path`; `record_full` keeps
    /// whole (redacted) arguments and results, as replay needs.
    pub fn trace_file(mut self, path: impl Into<PathBuf>, record_full: bool) -> Self {
        self.trace = Some(TraceTarget::File {
            path: path.into(),
            record_full,
            via: None,
        });
        self
    }

    /// With [`trace_file`](Self::trace_file): every result line of that
    /// trace says how the call was served (the CLI says `direct` and why,
    /// when a daemon was configured but not used).
    pub fn trace_via(mut self, via: impl Into<String>) -> Self {
        if let Some(TraceTarget::File { via: v, .. }) = &mut self.trace {
            *v = Some(via.into());
        }
        self
    }

    /// One JSONL trace per session under `dir`, each rotated once it
    /// reaches `rotate_bytes`.
    pub fn trace_dir(
        mut self,
        dir: impl Into<PathBuf>,
        record_full: bool,
        rotate_bytes: Option<u64>,
    ) -> Self {
        self.trace = Some(TraceTarget::Dir {
            dir: dir.into(),
            record_full,
            rotate_bytes,
        });
        self
    }

    /// Send the calls' evidence to another [`TraceSink`].
    pub fn tracer(mut self, sink: Arc<dyn TraceSink>) -> Self {
        self.trace = Some(TraceTarget::Sink(sink));
        self
    }

    /// Answer calls from the recording at `path` instead of running them.
    /// Strict replay refuses unrecorded calls and a recording made under
    /// another policy or tool schema; lenient replay runs unrecorded calls
    /// that only read, and those that write only with `allow_live_writes`.
    pub fn replay(
        mut self,
        path: impl Into<PathBuf>,
        mode: ReplayMode,
        allow_live_writes: bool,
    ) -> Self {
        self.replay = Some(ReplaySource {
            path: path.into(),
            mode,
            allow_live_writes,
        });
        self
    }

    /// Opens and prepares everything; the service is ready for calls. The
    /// supervisor is the proof that the process was set up for running
    /// sandboxed children (see `Supervisor::init`).
    pub fn build(self, supervisor: &Supervisor) -> Result<Service, ServiceError> {
        let root = canonical_root(&self.root)?;
        self.policy.check_layers_outside(&root)?;
        let trace = match self.trace {
            Some(target) => Some(open_trace(target, &self.policy)?),
            None => None,
        };
        let replay = match self.replay {
            Some(source) => Some(load_replay(source, &self.policy)?),
            None => None,
        };
        let project_env = super::project_env::ProjectEnv::new(&self.policy, &root);
        let mut config = sandbox_config(&self.policy.sandbox);
        let extra_read = project_env
            .shim_dir
            .iter()
            .chain(&project_env.toolchain_read);
        config
            .read
            .extend(extra_read.map(|p| p.to_string_lossy().into_owned()));
        // The one place a service's sandbox is prepared.
        let sandbox = Sandbox::prepare(supervisor, &config, &root)?;
        // The state directory's database keeps ledgers too, unless told
        // otherwise.
        let mut ledger: Option<Arc<dyn LedgerStore>> = None;
        let (store, approvals): (Option<Arc<dyn StateStore>>, _) = match self.state {
            Some(StoreTarget::Dir(dir)) => {
                let sqlite = Arc::new(SqliteStore::open(&dir)?);
                let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
                if dir.starts_with(&root) {
                    return Err(ServiceError::StateInsideRoot { state: dir, root });
                }
                warn_unreachable_approvers(&self.policy, &dir);
                ledger = Some(sqlite.clone());
                (
                    Some(sqlite.clone()),
                    Some(ApprovalHome { store: sqlite, dir }),
                )
            }
            Some(StoreTarget::Store(s)) => (Some(s), None),
            None => (None, None),
        };
        let provenance = Provenance::new(&self.policy.provenance, self.ledger.or(ledger));
        let base_env = BaseEnv::from_policy(&self.policy);
        let budgets = Budgets::per_uid_sessions(&self.policy.budget, self.uid_budget_sessions);
        let policy = Arc::new(self.policy);
        // The human's amendments live next to the approvals they came from.
        let amendments = approvals.as_ref().map(|home| {
            LiveAmendments::new(crate::approvals::amendments_path(&home.dir), policy.clone())
        });
        Ok(Service {
            approvals,
            amendments,
            checker: Checker::new(policy.clone(), root),
            policy,
            sandbox,
            store,
            budgets,
            require_idempotency: self.require_idempotency,
            approver: self.approver,
            trace,
            replay,
            base_env,
            project_env,
            shell: find_shell(),
            provenance,
        })
    }

    /// Only the stages that need no sandbox (validate, cwd, decide), for
    /// telling what the policy would do (`agent-exec check`). Ignores
    /// everything but the policy and the root.
    pub fn build_checker(self) -> Result<Checker, ServiceError> {
        let root = canonical_root(&self.root)?;
        self.policy.check_layers_outside(&root)?;
        Ok(Checker::new(Arc::new(self.policy), root))
    }
}

/// Approvers decide in the state directory, which only its owner and root
/// can open: a uid the policy names beyond those cannot decide at all.
fn warn_unreachable_approvers(policy: &Policy, dir: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(owner) = std::fs::metadata(dir).map(|m| m.uid()) else {
        return;
    };
    for uid in &policy.approvals.approvers {
        if *uid != owner && *uid != 0 {
            tracing::warn!(
                approver = uid,
                state = %dir.display(),
                "[approvals] names a uid that cannot open the state directory (private to uid {owner}); it can decide only through root"
            );
        }
    }
}

/// Policy paths and the kernel's rules are both relative to the root as
/// the kernel sees it: symlinks resolved.
fn canonical_root(root: &std::path::Path) -> Result<PathBuf, ServiceError> {
    let canonical = std::fs::canonicalize(root).map_err(|source| ServiceError::Root {
        path: root.to_path_buf(),
        source,
    })?;
    if !canonical.is_dir() {
        return Err(ServiceError::RootNotDir { path: canonical });
    }
    Ok(canonical)
}

fn open_trace(target: TraceTarget, policy: &Policy) -> Result<Arc<dyn TraceSink>, ServiceError> {
    let header = trace_header(policy);
    match target {
        TraceTarget::File {
            path,
            record_full,
            via,
        } => {
            let opts = trace_options(policy, record_full, None);
            match Tracer::create(&path, header, opts) {
                Ok(t) => {
                    if let Some(via) = via {
                        t.set_via(via);
                    }
                    Ok(Arc::new(t))
                }
                Err(source) => Err(ServiceError::Trace { path, source }),
            }
        }
        TraceTarget::Dir {
            dir,
            record_full,
            rotate_bytes,
        } => {
            let opts = trace_options(policy, record_full, rotate_bytes);
            match TraceDir::open(&dir, header, opts) {
                Ok(d) => Ok(Arc::new(d)),
                Err(source) => Err(ServiceError::Trace { path: dir, source }),
            }
        }
        TraceTarget::Sink(sink) => Ok(sink),
    }
}

fn load_replay(source: ReplaySource, policy: &Policy) -> Result<Replay, ServiceError> {
    let loaded = Replayer::load(
        &source.path,
        source.mode,
        &policy.sha256,
        &tool_schema_sha256(),
    );
    match loaded {
        Ok(replayer) => Ok(Replay {
            replayer,
            allow_live_writes: source.allow_live_writes,
        }),
        Err(e) => Err(ServiceError::Replay {
            path: source.path,
            source: e,
        }),
    }
}

/// The header every trace of a service starts with: traces bind to the
/// policy and tool schema they were made under.
pub fn trace_header(policy: &Policy) -> TraceHeader {
    TraceHeader {
        policy_name: policy.name.clone(),
        policy_sha256: policy.sha256.clone(),
        tool_schema_sha256: tool_schema_sha256(),
        landlock_abi: sandbox::landlock_abi(),
    }
}

/// Trace options for a service: the values of the supervisor's
/// secret-looking variables are redacted wherever they would appear.
pub fn trace_options(
    policy: &Policy,
    record_full: bool,
    rotate_bytes: Option<u64>,
) -> TraceOptions {
    let secret_names = std::env::vars_os()
        .filter_map(|(k, _)| k.to_str().map(str::to_string))
        .filter(|k| policy.is_secret_name(k))
        .collect();
    trace::TraceOptions {
        record_full: record_full || policy.trace.record_full,
        secret_names,
        rotate_bytes,
    }
}

/// The sandbox configuration a policy asks for. The readable system
/// directories come from the policy crate, the one list both the policy's
/// path checks and the kernel's rules are built from.
pub fn sandbox_config(p: &SandboxPolicy) -> agent_exec_sandbox::SandboxConfig {
    agent_exec_sandbox::SandboxConfig {
        enforcement: match p.enforcement {
            Enforcement::Strict => agent_exec_sandbox::Enforcement::Strict,
            Enforcement::BestEffort => agent_exec_sandbox::Enforcement::BestEffort,
        },
        require: requirements(&p.require),
        system_read: crate::policy::SYSTEM_READ_DIRS
            .iter()
            .map(PathBuf::from)
            .collect(),
        read: p.read.clone(),
        write: p.write.clone(),
        connect_ports: p.connect_ports.clone(),
        bind_ports: p.bind_ports.clone(),
        allow_unix_sockets: p.unix_sockets,
        run_as: p.run_as.clone(),
        allow_root_child: p.allow_root_child,
        root_owned_as_root: p.root_owned_child == crate::policy::RootOwnedChild::Root,
        rlimit_nofile: p.rlimit_nofile,
        rlimit_fsize_bytes: p.rlimit_fsize_bytes,
        rlimit_as_bytes: p.rlimit_as_bytes,
        rlimit_nproc: p.rlimit_nproc,
        rlimit_cpu_seconds: p.rlimit_cpu_seconds,
        pids_max: p.pids_max,
        memory_max_bytes: p.memory_max_bytes,
        namespaces: match p.namespaces {
            Namespaces::Auto => agent_exec_sandbox::Namespaces::Auto,
            Namespaces::Required => agent_exec_sandbox::Namespaces::Required,
            Namespaces::Off => agent_exec_sandbox::Namespaces::Off,
        },
    }
}

/// `[sandbox.require]` as the sandbox's per-layer levels.
fn requirements(r: &RequirePolicy) -> agent_exec_sandbox::Requirements {
    use agent_exec_sandbox::Requirement as Level;
    let level = |l: Option<Requirement>| {
        l.map(|l| match l {
            Requirement::Required => Level::Required,
            Requirement::BestEffort => Level::BestEffort,
            Requirement::Off => Level::Off,
        })
    };
    agent_exec_sandbox::Requirements {
        landlock: level(r.landlock),
        landlock_net: level(r.landlock_net),
        landlock_scopes: level(r.landlock_scopes),
        seccomp: level(r.seccomp),
        cgroup: level(r.cgroup),
        cgroup_pids: level(r.cgroup_pids),
        cgroup_memory: level(r.cgroup_memory),
    }
}
