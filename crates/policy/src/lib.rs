//! The policy: what may run, with what risk, under which limits.
//!
//! A [`Policy`] is loaded once from TOML (strictly: unknown keys, bad
//! regexes and contradictions are errors naming file, line and key),
//! checked against its own examples, and then only read.
//! [`Policy::decide`] is a pure function from a policy and a request to a
//! [`Decision`]; it touches the filesystem only to resolve paths that
//! exist. [`Policy::evaluate`] walks the request the same way and keeps
//! every rule match and engine check that fired, not only the winner.
//!
//! ```
//! use std::path::Path;
//!
//! use agent_exec_policy::{CommandSpec, Context, FindingKind, Policy, Verdict};
//!
//! let policy = Policy::parse(
//!     r#"
//! name = "review"
//! default = "require_approval"
//!
//! [[rule]]
//! id = "git-read"
//! program = "git"
//! subcommands = ["status", "diff", "log"]
//! action = "allow"
//! risk = "low"
//! read_only = true
//! reason = "Only reads the repository."
//!
//! [[rule]]
//! id = "read-files"
//! programs = ["cat", "head"]
//! action = "allow"
//! risk = "low"
//! read_only = true
//! reason = "Reads files; paths are checked to stay inside the project."
//!
//! [[example]]
//! command = "git status"
//! decision = "allow"
//! "#,
//!     "review.toml",
//! )?;
//!
//! // The project need not exist: paths that do not are judged as written.
//! let root = Path::new("/srv/agent/project");
//! let ctx = Context { root, cwd: root };
//! let shell = |s: &str| CommandSpec::Shell(s.to_string());
//!
//! let status = policy.decide(&shell("git status"), &ctx)?;
//! assert_eq!(status.verdict, Verdict::Allow);
//! assert_eq!(status.rule, "git-read");
//! assert!(status.read_only && !status.needs_shell);
//!
//! let passwd = policy.decide(&shell("cat /etc/passwd"), &ctx)?;
//! assert_eq!(passwd.verdict, Verdict::Deny);
//! assert_eq!(passwd.rule, "builtin:path-escape");
//! assert_eq!(passwd.token.as_deref(), Some("/etc/passwd"));
//!
//! // The rule allowed `cat`; the path check refused its argument.
//! let all = policy.evaluate(&shell("cat /etc/passwd"), &ctx)?;
//! let fired: Vec<_> = all.findings().iter().map(|f| (f.kind, f.verdict)).collect();
//! assert_eq!(
//!     fired,
//!     [(FindingKind::Rule, Verdict::Allow), (FindingKind::Builtin, Verdict::Deny)]
//! );
//! assert_eq!(all.decision(), passwd);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

// Lower modules never use higher ones: `resolve`, `hidden` and `rules` are
// pure; `engine` indexes the rules; `verdict` combines findings; `state`
// carries one walk, which `paths`, `builtins`, `wrappers`, `control`
// (control flow, `find -exec`) and `walk` (the top of a decision) extend in
// that order; `suggest` names allowed alternatives for the walk's result;
// `awk` and `tools` (what read-only programs may be given) are pure and
// used by `walk`; `load` builds a `Policy`, `overlay` layers additions on
// one, `lint` and `show` inspect it.
mod amend;
mod awk;
mod builtins;
mod cache;
mod control;
mod engine;
mod error;
mod free_text;
mod hidden;
mod lint;
mod load;
mod overlay;
mod paths;
mod project;
mod provenance;
mod resolve;
mod rules;
mod secret;
mod show;
mod state;
mod suggest;
mod tools;
mod verdict;
mod walk;
mod wrappers;

pub use amend::{ApprovalsPolicy, DEFAULT_APPROVAL_TTL_SECS};
pub use error::{ExampleFailure, Issue, PolicyError};
pub use load::EXAMPLE_ROOT;
pub use overlay::SHIPPED;
pub use project::ROOT_PLACEHOLDER;
pub use provenance::{DEFAULT_LEDGER_ENTRIES, PathArgument, ProvenanceMode, ProvenancePolicy};
pub use resolve::normalize_lexically;
pub use resolve::resolve_program;
pub use show::RuleView;
pub use verdict::{CommandRef, Evaluation, Finding, FindingKind};

/// Why a shell string could not be decided: it does not lex.
pub use agent_exec_lexer::ParseError;

/// Directories every program needs to read and execute; arguments inside
/// them are not escapes, and the kernel sandbox grants exactly these (plus
/// `[sandbox] read`). The one list both layers use, so what the policy
/// believes and what the kernel enforces cannot drift apart.
pub const SYSTEM_READ_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

pub use secret::{DEFAULT_SECRET_PATTERN, is_secret_name, is_secret_value};

/// What becomes of one variable of the supervisor's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvFate {
    /// Copied into the child's environment.
    Pass,
    /// Withheld because its name looks secret (reported by name).
    Secret,
    /// Not named by `[env] keep`.
    Drop,
}

/// The shell whose grammar the lexer models, by the paths it is looked up
/// at. A request that needs a shell runs under this one (as `bash -p -c`)
/// and nothing else, so the policy's reading and the shell's agree.
pub use agent_exec_lexer::SHELL_PATHS;

/// The command as a client sent it: what the policy decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandSpec {
    /// One shell string (what agents send).
    Shell(String),
    /// An argv, exec'd directly when the policy allows.
    Argv(Vec<String>),
}

/// The three outcomes. Ordered so that `max` gives the strictest: any deny
/// wins over require_approval, which wins over allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Run it only once a human approved.
    RequireApproval,
    /// Never run it.
    Deny,
}

/// How much harm a command could do, as the policy rates it (every rule
/// states one). Ordered from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskLevel {
    /// Little or none (reading, building).
    Low,
    /// Worth a look.
    Medium,
    /// Could lose work or reach outside the project.
    High,
    /// Could damage the system or change privileges.
    Critical,
}

/// Why a request got its verdict. The reason is written for a model to read
/// and names the token that decided when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The strictest verdict of any part of the request.
    pub verdict: Verdict,
    /// Id of the rule that decided (`builtin:...` for engine checks such as
    /// path escapes), or `default` when no rule matched.
    pub rule: String,
    /// The deciding rule's (or check's) risk.
    pub risk: RiskLevel,
    /// Why, naming what to change when the request is refused.
    pub reason: String,
    /// The argument, path, operator or program that decided.
    pub token: Option<String>,
    /// True when every part of the request is classed read-only by the
    /// policy; anything else is mutating (idempotency keys, budgets).
    pub read_only: bool,
    /// True when the request needs `/bin/sh -c` (operators, redirections,
    /// expansions); false when it is one plain argv exec'd directly.
    pub needs_shell: bool,
    /// True when a rule that matched a part of the request says so
    /// (`needs_key = true`): it changes state beyond ordinary work, and a
    /// service that requires idempotency keys (the daemon) asks for one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_key: bool,
    /// Flags the policy runs programs with, so that a program it classed
    /// read-only cannot do otherwise (`sed --sandbox`); see
    /// [`Decision::command_to_run`]. Empty for most requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injected: Vec<InjectedFlag>,
    /// When the request is refused or needs approval and another form
    /// would be allowed: that form, concretely (`git config --get NAME`,
    /// the subcommands a program's rules allow). `None` when the policy
    /// knows of none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

/// A flag the policy adds right after a program word: the program's own
/// safe mode (`sed --sandbox`, `gawk --sandbox`), which refuses at run time
/// what the policy cannot see in a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedFlag {
    /// The program, by the name its rule matched (`sed`).
    pub program: String,
    /// The flag (`--sandbox`).
    pub flag: String,
    /// Where it goes: in a shell string, the byte offset just past the
    /// program word; in an argv, the index of the program word.
    pub at: usize,
}

impl Decision {
    /// The command as it must run: `cmd` with every [`injected`] flag in
    /// place. `None` when a flag's place does not fit `cmd` (the decision
    /// was made for another command): then nothing may run.
    ///
    /// [`injected`]: Decision::injected
    pub fn command_to_run(&self, cmd: &CommandSpec) -> Option<CommandSpec> {
        if self.injected.is_empty() {
            return Some(cmd.clone());
        }
        let mut places: Vec<&InjectedFlag> = self.injected.iter().collect();
        // From the end, so earlier places stay where they were.
        places.sort_by_key(|f| std::cmp::Reverse(f.at));
        match cmd {
            CommandSpec::Shell(text) => {
                let mut out = text.clone();
                for f in places {
                    if !out.is_char_boundary(f.at) || f.at == 0 {
                        return None;
                    }
                    out.insert_str(f.at, &format!(" {}", f.flag));
                }
                Some(CommandSpec::Shell(out))
            }
            CommandSpec::Argv(argv) => {
                let mut out = argv.clone();
                for f in places {
                    if f.at >= out.len() {
                        return None;
                    }
                    out.insert(f.at + 1, f.flag.clone());
                }
                Some(CommandSpec::Argv(out))
            }
        }
    }
}

impl Policy {
    /// Whether an environment variable's name marks its value as secret
    /// (`[env] secret_pattern`, case-insensitive).
    pub fn is_secret_name(&self, name: &str) -> bool {
        self.engine.secret_names.is_match(name)
    }

    /// What becomes of the supervisor's variable `name` in the child's
    /// environment. Secret-looking names never pass: those the policy's
    /// `secret_pattern` matches, and, when only a wildcard of `keep`
    /// (`LC_*`) would let the name through, those the built-in
    /// [`is_secret_name`] finds secret too. A narrower custom pattern thus
    /// cannot let `LC_API_TOKEN` slip through `LC_*`; a name `keep` spells
    /// out in full is the operator's explicit choice and meets the policy's
    /// pattern alone.
    pub fn env_fate(&self, name: &str) -> EnvFate {
        if self.is_secret_name(name) {
            return EnvFate::Secret;
        }
        let mut by_wildcard = false;
        for k in &self.env.keep {
            match k.strip_suffix('*') {
                Some(prefix) if name.starts_with(prefix) => by_wildcard = true,
                Some(_) => {}
                None if name == k => return EnvFate::Pass,
                None => {}
            }
        }
        match by_wildcard {
            true if is_secret_name(name) => EnvFate::Secret,
            true => EnvFate::Pass,
            false => EnvFate::Drop,
        }
    }

    /// How many `[[example]]`s the policy was checked against at load.
    pub fn example_count(&self) -> usize {
        self.engine.example_count
    }
}

/// Per-run limits. Requests may ask for a timeout up to `max_timeout_ms`
/// and may only tighten the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Timeout when the request gives none.
    pub timeout_ms: u64,
    /// The most a request may ask for.
    pub max_timeout_ms: u64,
    /// Characters kept per stream (half head, half tail).
    pub output_chars: usize,
    /// Total bytes (stdout + stderr) after which the child is killed with
    /// `OUTPUT_LIMIT`; 0 means no hard limit (output is still truncated).
    pub output_hard_limit_bytes: u64,
    /// Between SIGTERM and SIGKILL on timeout.
    pub kill_grace_ms: u64,
    /// How long to keep reading pipes after the main child exits, so a
    /// grandchild that holds them cannot hang the result.
    pub drain_ms: u64,
    /// Largest stdin text a request may send.
    pub max_stdin_bytes: usize,
    /// Largest command string a request may send.
    pub max_command_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: 10_000,
            max_timeout_ms: 600_000,
            output_chars: 8_000,
            output_hard_limit_bytes: 0,
            kill_grace_ms: 200,
            drain_ms: 500,
            max_stdin_bytes: 1 << 20,
            max_command_bytes: 64 << 10,
        }
    }
}

/// What the child's environment is built from. It starts empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvPolicy {
    /// PATH for the child and for resolving program names. Entries
    /// written `{root}/dir` are the project's own (see
    /// [`EnvPolicy::run_path`]).
    pub path: String,
    /// Names (a trailing `*` matches a prefix) copied from the supervisor's
    /// environment when present and not secret-looking.
    pub keep: Vec<String>,
    /// Fixed values set for the child (never secret-looking names).
    pub set: std::collections::BTreeMap<String, String>,
    /// Case-insensitive regex over variable names that are never passed.
    pub secret_pattern: String,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy {
            path: "/usr/local/bin:/usr/bin:/bin".to_string(),
            keep: vec!["LANG".into(), "LC_*".into(), "TERM".into(), "TZ".into()],
            set: Default::default(),
            secret_pattern: DEFAULT_SECRET_PATTERN.to_string(),
        }
    }
}

/// What happens when the kernel cannot apply a sandbox layer: the level
/// of every layer `[sandbox.require]` does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Every layer must apply fully or nothing runs.
    Strict,
    /// Run with what the kernel offers and list what was not applied.
    BestEffort,
}

/// One layer's level in `[sandbox.require]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// Missing on the host: nothing runs, and the error names the layer.
    Required,
    /// Missing: the run goes on and the result's `not_applied` names it.
    BestEffort,
    /// Not applied even where the kernel offers it.
    Off,
}

/// `[sandbox.require]`: per-layer levels overriding `enforcement`, so an
/// operator requires exactly the layers they rely on. A layer left out
/// takes the level of the layer it is part of (`landlock_net` and
/// `landlock_scopes` that of `landlock`, `cgroup_pids` and
/// `cgroup_memory` that of `cgroup`), and a whole layer `enforcement`'s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequirePolicy {
    /// Landlock's filesystem rules.
    pub landlock: Option<Requirement>,
    /// Landlock's TCP port rules (ABI 4), needed when ports are allowed.
    pub landlock_net: Option<Requirement>,
    /// Landlock's signal and abstract-socket scopes (ABI 6).
    pub landlock_scopes: Option<Requirement>,
    /// The seccomp filter.
    pub seccomp: Option<Requirement>,
    /// A cgroup per run (counts and kills every process of it).
    pub cgroup: Option<Requirement>,
    /// The run cgroup's `pids.max`, when `pids_max` > 0.
    pub cgroup_pids: Option<Requirement>,
    /// The run cgroup's memory cap, when `memory_max_bytes` > 0.
    pub cgroup_memory: Option<Requirement>,
}

/// The default `[sandbox] memory_max_bytes`: 4 GiB for a whole run, enough
/// for a compiler or a test suite, and a bound on what one run can take
/// from the host.
pub const DEFAULT_MEMORY_MAX_BYTES: u64 = 4 << 30;

/// Whether each run gets a mount and an IPC namespace of its own; see
/// `docs/policy.md`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Namespaces {
    /// When the supervisor can (root); reported as not applied otherwise.
    #[default]
    Auto,
    /// Refuse to run without them.
    Required,
    /// Never: runs share the supervisor's mount and IPC namespaces.
    Off,
}

/// Who runs a root-owned project's commands under a root supervisor
/// (`[sandbox] root_owned_child`); see `docs/policy.md`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootOwnedChild {
    /// uid 0 with every capability dropped, so it writes the project as
    /// root would bare; refused at start where Landlock's signal scope
    /// cannot apply.
    #[default]
    Root,
    /// `nobody`: the project is read-only to runs.
    Nobody,
}

/// A toolchain preset of `[sandbox] toolchains`, found in the home of the
/// project's owner; see `docs/policy.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Toolchain {
    /// `~/.rustup` and `~/.cargo/bin` (`RUSTUP_HOME`, `CARGO_HOME`).
    Rustup,
    /// `~/.cargo/registry` and `~/.cargo/git`: dependencies already
    /// downloaded, used offline.
    CargoRegistry,
    /// `~/.pyenv`, its shims and bin (`PYENV_ROOT`).
    Pyenv,
    /// `~/.nvm` and its default node's bin (`NVM_DIR`).
    Nvm,
    /// `~/.local/bin` and `~/.local/lib` (pip `--user` packages).
    UserLocal,
}

/// Kernel sandbox settings (the service hands them to the sandbox crate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxPolicy {
    /// Strict (the default) or best effort: the level of every layer.
    pub enforcement: Enforcement,
    /// `[sandbox.require]`: per-layer levels.
    pub require: RequirePolicy,
    /// Extra read+execute paths (toolchains). Missing ones are skipped.
    pub read: Vec<String>,
    /// Extra read+write paths besides the root and the per-run home.
    pub write: Vec<String>,
    /// Loopback TCP ports the child may connect to. Empty: no network.
    pub connect_ports: Vec<u16>,
    /// Loopback TCP ports the child may bind.
    pub bind_ports: Vec<u16>,
    /// Let the child create Unix sockets; see `docs/policy.md`.
    pub unix_sockets: bool,
    /// User name or numeric uid for the child when the supervisor is root.
    /// None: the root directory's owner if not root, else `nobody`.
    pub run_as: Option<String>,
    /// With a root supervisor and no `run_as`: run the child as root
    /// instead of the root directory's owner or `nobody`.
    pub allow_root_child: bool,
    /// With a root supervisor, no `run_as` and a project root owned by
    /// root: who the child runs as.
    pub root_owned_child: RootOwnedChild,
    /// Toolchains in the project owner's home that runs may use
    /// (read-only), with their programs on PATH.
    pub toolchains: Vec<Toolchain>,
    /// `RLIMIT_NOFILE`: open file descriptors.
    pub rlimit_nofile: u64,
    /// `RLIMIT_FSIZE`: the largest file the child may write.
    pub rlimit_fsize_bytes: u64,
    /// `RLIMIT_AS`: address space.
    pub rlimit_as_bytes: u64,
    /// `RLIMIT_NPROC`: processes of the child's user.
    pub rlimit_nproc: u64,
    /// `RLIMIT_CPU`: CPU seconds.
    pub rlimit_cpu_seconds: u64,
    /// cgroup `pids.max` when a cgroup can be created.
    pub pids_max: u64,
    /// The memory cap of a whole run (all its processes, swap included)
    /// in its cgroup; 0: none.
    pub memory_max_bytes: u64,
    /// Per-run mount and IPC namespaces.
    pub namespaces: Namespaces,
    /// Every run sees the root (and `write` paths) read-only: the kernel
    /// lets it write only its own HOME/TMPDIR and `/dev/null`. Runs the
    /// policy classes read-only get that whatever this says.
    pub read_only: bool,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        SandboxPolicy {
            enforcement: Enforcement::Strict,
            require: RequirePolicy::default(),
            read: Vec::new(),
            write: Vec::new(),
            connect_ports: Vec::new(),
            bind_ports: Vec::new(),
            unix_sockets: false,
            run_as: None,
            allow_root_child: false,
            root_owned_child: RootOwnedChild::Root,
            toolchains: Vec::new(),
            rlimit_nofile: 1024,
            rlimit_fsize_bytes: 1 << 30,
            rlimit_as_bytes: 8 << 30,
            rlimit_nproc: 512,
            rlimit_cpu_seconds: 600,
            pids_max: 256,
            memory_max_bytes: DEFAULT_MEMORY_MAX_BYTES,
            namespaces: Namespaces::Auto,
            read_only: false,
        }
    }
}

/// Per-session side-effect budget (daemon).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetPolicy {
    /// Runs that are not read-only a session may make.
    pub max_mutating_runs: u64,
    /// Wall-clock time all of a session's runs may take together.
    pub max_wall_ms: u64,
}

impl Default for BudgetPolicy {
    fn default() -> Self {
        BudgetPolicy {
            max_mutating_runs: 500,
            max_wall_ms: 3_600_000,
        }
    }
}

/// Who may connect to the daemon.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonPolicy {
    /// Peer uids allowed; empty means only the daemon's own uid.
    pub allowed_uids: Vec<u32>,
    /// Group name that gets the socket with mode 0660 instead of 0600.
    pub socket_group: Option<String>,
}

/// What traces keep.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TracePolicy {
    /// Store full (redacted) arguments and outputs, as replay needs.
    pub record_full: bool,
}

/// Where a decision is made: the canonical root and the working directory
/// inside it, against which relative paths are resolved.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The project root, canonical: arguments must stay inside it (or in
    /// the policy's readable and writable areas).
    pub root: &'a std::path::Path,
    /// Where the command starts, inside `root`.
    pub cwd: &'a std::path::Path,
}

/// A loaded, validated policy. Built only by `Policy::load`/`Policy::parse`,
/// so every `Policy` in the program has passed its own examples.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The policy's `name`.
    pub name: String,
    /// SHA-256 (hex) of the file's bytes: traces and replay bind to it.
    pub sha256: String,
    /// Where it was loaded from (for messages).
    pub origin: String,
    /// Verdict for a command no rule matches.
    pub default: Verdict,
    /// `[limits]`
    pub limits: Limits,
    /// `[env]`
    pub env: EnvPolicy,
    /// `[sandbox]`
    pub sandbox: SandboxPolicy,
    /// `[budget]`
    pub budget: BudgetPolicy,
    /// `[daemon]`
    pub daemon: DaemonPolicy,
    /// `[trace]`
    pub trace: TracePolicy,
    /// `[approvals]`: who may approve, and for how long an approval holds.
    pub approvals: ApprovalsPolicy,
    /// `[provenance]`
    pub provenance: ProvenancePolicy,
    /// How shell features (substitutions, expansions, globs, nesting,
    /// assignments) are treated.
    pub shell: ShellPolicy,
    /// One line saying what the policy is for (shown by `agent-exec policy`).
    pub description: String,
    /// Risk reported with the default verdict.
    pub default_risk: RiskLevel,
    /// Compiled rules and precomputed lookups. Private, so a `Policy` can
    /// only come out of `load`/`parse` and always has passed its examples.
    engine: engine::Engine,
    /// The `[[example]]`s with their lines, kept so that an amendment is
    /// checked against them too.
    examples: std::sync::Arc<Vec<(usize, load::ExampleFile)>>,
    /// The overlays layered on the base policy, in order (see
    /// [`Policy::layers`]).
    layers: Vec<overlay::Layer>,
}

/// What the engine does when a request uses a shell feature it can inspect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureAction {
    /// Look inside (substituted scripts are decided recursively, expanded
    /// words are checked by their literal path prefix).
    Check,
    /// Ask a human first.
    RequireApproval,
    /// Refuse the request.
    Deny,
}

/// The `[shell]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShellPolicy {
    /// `$(...)` and backticks.
    pub command_substitution: FeatureAction,
    /// `<(...)` and `>(...)`.
    pub process_substitution: FeatureAction,
    /// Any expansion in program position (`$CMD args`, `$(which x)`, `ca?`).
    /// `check` is not accepted: the program must be known to be decided.
    pub program_expansion: FeatureAction,
    /// `$VAR`, `$((..))` and substitutions inside arguments.
    pub argument_expansion: FeatureAction,
    /// Globs and brace expansion in arguments.
    pub globs: FeatureAction,
    /// Output redirection to files (`>`, `>>`, `&>`, `<>`): `check` keeps
    /// targets inside the root; `deny` suits read-only policies. `/dev/null`
    /// is always fine.
    pub output_redirection: FeatureAction,
    /// Constructs the engine cannot follow command by command (`select`,
    /// `coproc`, `[[ ]]`, `(( ))`, `for ((..))`). `check` is not accepted.
    pub unsupported: FeatureAction,
    /// Grouping and control flow whose every command the engine checks:
    /// subshells, `{ }` groups, `if`, `for`, `while`, `until`, `case`,
    /// `!` and functions. `check` decides each command inside like any
    /// other; `deny` (the default) and `require_approval` treat them as
    /// `unsupported`.
    pub control_flow: FeatureAction,
    /// `source FILE` / `. FILE`: `check` lets a file inside the root be
    /// sourced (`source .venv/bin/activate`); its commands are not seen,
    /// as with `bash FILE`. `deny` (the default) or `require_approval`
    /// otherwise.
    pub source_files: FeatureAction,
    /// Places where bash evaluates a value as code: arithmetic, subscripts
    /// and `${x:off}` offsets that name a variable, `${!x}`, `${x@P}`,
    /// `let`, `declare -i`, and variable names with a computed subscript
    /// given to builtins (`read 'a[$(id)]'`). A value set earlier in the
    /// request (`x='a[$(id)]'`) then runs code the policy never saw.
    /// `check` is not accepted.
    pub evaluation: FeatureAction,
    /// Nested shells (`bash -c`) and substitutions, counted together.
    pub max_nesting: usize,
    /// Variable names that may not be assigned (`VAR=x cmd`, `export`,
    /// `env VAR=x`, `read VAR`). A trailing `*` matches a prefix.
    pub deny_assignments: Vec<String>,
    /// Exact names exempt from `deny_assignments` (`GIT_AUTHOR_NAME` under
    /// `GIT_*`, `PYTHONHASHSEED` under `PYTHON*`).
    pub allow_assignments: Vec<String>,
}

impl Default for ShellPolicy {
    fn default() -> Self {
        ShellPolicy {
            command_substitution: FeatureAction::Check,
            process_substitution: FeatureAction::Check,
            program_expansion: FeatureAction::Deny,
            argument_expansion: FeatureAction::Check,
            globs: FeatureAction::Check,
            output_redirection: FeatureAction::Check,
            unsupported: FeatureAction::Deny,
            control_flow: FeatureAction::Deny,
            source_files: FeatureAction::Deny,
            evaluation: FeatureAction::Deny,
            max_nesting: 3,
            deny_assignments: [
                "PATH",
                "LD_*",
                "DYLD_*",
                "BASH_ENV",
                "ENV",
                "BASH_FUNC_*",
                "BASH_CMDS",
                "BASH_ALIASES",
                "BASHOPTS",
                "SHELLOPTS",
                "IFS",
                "PS4",
                "PROMPT_COMMAND",
                "CDPATH",
                "GLOBIGNORE",
                "HOME",
                "PYTHON*",
                "PERL5*",
                "PERLLIB",
                "RUBY*",
                "NODE_OPTIONS",
                "NODE_PATH",
                "GIT_*",
                "EDITOR",
                "VISUAL",
                "PAGER",
                "MANPAGER",
                "MANOPT",
                "LESS*",
                "RIPGREP_CONFIG_PATH",
                "AWKPATH",
                "AWKLIBPATH",
                "GCONV_PATH",
                "HOSTALIASES",
                "XDG_CONFIG_HOME",
                "JAVA_TOOL_OPTIONS",
                "_JAVA_OPTIONS",
                "RUSTC_WRAPPER",
                "RUSTC_WORKSPACE_WRAPPER",
                "CARGO_BUILD_RUSTC_WRAPPER",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            allow_assignments: Vec::new(),
        }
    }
}
