//! The `agent-exec` command line: a thin edge over the library's service.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod cli;
mod policy_cli;

use agent_exec::emit::{Format, emit, fail};
use agent_exec::sandbox::{Supervisor, SupervisorOptions};
use agent_exec::service::terminal::visible;
use agent_exec::trace::{self, ReplayMode};
use agent_exec::{
    CancelToken, CommandSpec, ErrorType, Policy, RunRequest, Service, ServiceBuilder, ServiceError,
    TtyApprover, Verdict,
};

const AFTER_HELP: &str = "\
Exit status (coreutils timeout/env conventions):
  the command's own status when it ran
  124  the command timed out (it and all its children were killed)
  125  agent-exec itself failed: usage, invalid policy, sandbox unavailable
  126  refused: denied by policy, approval required, or budget exhausted
  127  command not found

Output: exactly one JSON ToolResult on stdout (see docs/tool-result.md);
--format human prints the command's output and a one-line summary instead.

Examples:
  agent-exec --policy policies/code.toml -- git status
  agent-exec --policy policies/code.toml --shell 'grep -rn TODO src | head'
  agent-exec check --policy policies/code.toml --shell 'cat /etc/passwd'
  agent-exec policy validate policies/code.toml
  agent-exec serve --policy policies/code.toml --root . --socket /run/user/1000/agent-exec.sock
  agent-exec mcp --policy /etc/agent-exec/code.toml --root .     (an MCP server on stdio)
  AGENT_EXEC_POLICY=/etc/agent-exec/code.toml agent-exec sh -c 'make test'
  agent-exec policy show policies/code.toml
  agent-exec policy explain policies/code.toml --shell 'for f in *.py; do wc -l \"$f\"; done'";

#[derive(Parser, Debug)]
#[command(
    name = "agent-exec",
    version,
    about = "Run a shell command for an AI agent under a policy and a kernel sandbox; print one structured ToolResult.",
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args, Debug)]
struct Target {
    /// The policy file (TOML). Required: no policy, no run.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Project root the command is confined to (default: the current directory).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Working directory inside the root.
    #[arg(long, value_name = "SUBDIR")]
    cwd: Option<String>,
    /// Run a command given as one shell string (what agents send).
    #[arg(long, value_name = "STRING", conflicts_with = "argv")]
    shell: Option<String>,
    /// The program and its arguments, after `--`.
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    argv: Vec<String>,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    target: Target,
    /// Wall-clock limit in milliseconds, up to the policy's max_timeout_ms.
    #[arg(long, value_name = "N")]
    timeout_ms: Option<u64>,
    /// Characters kept per output stream (can only tighten the policy's).
    #[arg(long, value_name = "N")]
    output_chars: Option<usize>,
    /// Text passed to the command on standard input.
    #[arg(long, value_name = "TEXT")]
    stdin: Option<String>,
    /// json: one ToolResult on stdout; human: the output, then a summary line.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Who approves commands the policy marks require_approval.
    #[arg(long, value_enum, default_value_t = ApproveMode::Never)]
    approve: ApproveMode,
    /// Append a trace (JSONL) of this call to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Like --trace, and keep full (redacted) arguments and results for replay.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    record: Option<PathBuf>,
    /// Answer from a recorded trace instead of running.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// strict: an unrecorded call is refused; lenient: it runs (reads only,
    /// unless --allow-live-writes).
    #[arg(long, value_enum, default_value_t = ReplayModeArg::Strict, requires = "replay")]
    replay_mode: ReplayModeArg,
    /// In lenient replay, let unrecorded mutating calls run for real.
    #[arg(long, requires = "replay")]
    allow_live_writes: bool,
    /// Idempotency and budget state directory.
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Idempotency key (with --state): a repeated key returns the stored result.
    #[arg(long, value_name = "KEY", requires = "state")]
    idempotency_key: Option<String>,
    /// Session name for budgets and traces.
    #[arg(long, value_name = "NAME")]
    session: Option<String>,
    /// Run under this approval (from an APPROVAL_REQUIRED result, once a
    /// human approved it; with --state).
    #[arg(long, value_name = "ID", requires = "state")]
    approval_id: Option<String>,
    /// Argument provenance ledger shared by the one-shot calls that name
    /// the same file (when the policy's [provenance] mode is not off).
    #[arg(long, value_name = "FILE")]
    session_file: Option<PathBuf>,
    /// Hand the call to the daemon listening on SOCKET when it serves the
    /// same policy file and root (default: $AGENT_EXEC_DAEMON); run it
    /// here otherwise. The command then runs with the daemon's environment.
    #[arg(long, value_name = "SOCKET")]
    daemon: Option<PathBuf>,
}

/// The environment variable naming a daemon socket for `--daemon`.
const DAEMON_ENV: &str = "AGENT_EXEC_DAEMON";

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum ApproveMode {
    /// Refuse (APPROVAL_REQUIRED).
    Never,
    /// Ask on the terminal.
    Tty,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum ReplayModeArg {
    Strict,
    Lenient,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the policy decision for a command; run nothing.
    #[command(after_help = cli::examples::CHECK)]
    Check(Target),
    /// Policy tools.
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// Serve the run_shell tool over a Unix socket.
    #[command(after_help = cli::examples::SERVE)]
    Serve(agent_exec::serve::ServeOptions),
    /// A drop-in for `$SHELL -c STRING`: the command's own output and exit
    /// status, a refusal as one line on stderr and 126. Policy and root from
    /// AGENT_EXEC_POLICY / AGENT_EXEC_ROOT or
    /// $XDG_CONFIG_HOME/agent-exec/config.toml. A link named agent-exec-sh
    /// is this command.
    #[command(after_help = cli::examples::SH)]
    Sh {
        /// `-c STRING`, as a shell takes it (`-l`/`--login` are accepted
        /// and ignored).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "-c STRING"
        )]
        args: Vec<String>,
    },
    /// Serve the run_shell tool to an MCP client over stdio.
    #[command(after_help = cli::examples::MCP)]
    Mcp(agent_exec::mcp::McpOptions),
    /// Check a trace's invariants; exit 1 when one fails.
    #[command(after_help = cli::examples::AUDIT)]
    Audit {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Same tool and arguments this many times in one run is a retry storm.
        #[arg(long, default_value_t = 3)]
        retry_threshold: usize,
        /// Trace files (JSONL); rotated segments are read too.
        #[arg(required = true)]
        traces: Vec<PathBuf>,
    },
    /// Tell a trace as a readable story.
    #[command(after_help = cli::examples::REPLAY)]
    Replay {
        /// Trace file (JSONL).
        trace: PathBuf,
        /// Colour: auto (on a terminal), always or never.
        #[arg(long, default_value = "auto")]
        color: String,
    },
    /// Run a task set against a policy and report per check.
    #[command(after_help = cli::examples::EVAL)]
    Eval(EvalArgs),
    /// List the approvals waiting for a human (escaped for display).
    #[command(after_help = cli::examples::APPROVALS)]
    Approvals(agent_exec::approve_cli::ListArgs),
    /// Approve a pending approval; only the policy's approvers may.
    #[command(after_help = cli::examples::APPROVE)]
    Approve(agent_exec::approve_cli::ApproveArgs),
    /// Reject a pending approval; only the policy's approvers may.
    #[command(after_help = cli::examples::REJECT)]
    Reject(agent_exec::approve_cli::DecideArgs),
    /// Report which sandbox layers this host's kernel applies.
    #[command(after_help = cli::examples::DOCTOR)]
    Doctor(cli::doctor::DoctorArgs),
    /// Trace tools: export to OpenTelemetry.
    #[command(subcommand)]
    Trace(cli::trace_cmd::TraceCmd),
}

#[derive(Args, Debug)]
struct EvalArgs {
    /// Task file (JSONL).
    tasks: PathBuf,
    /// Policy to evaluate (default: policies/code.toml under the current directory).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// An earlier report: show which tasks got better or worse.
    #[arg(long, value_name = "OLD_REPORT")]
    compare: Option<PathBuf>,
    /// Write the JSON report here (it is printed to stdout otherwise).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Only tasks whose id contains this.
    #[arg(long)]
    filter: Option<String>,
}

#[derive(Subcommand, Debug)]
enum PolicyCmd {
    /// Load a policy, lint it and check its embedded examples.
    #[command(after_help = cli::examples::POLICY_VALIDATE)]
    Validate {
        /// Policy file (TOML).
        file: PathBuf,
    },
    /// Print the effective rules of a policy (an overlay: its base's, then its own).
    #[command(after_help = cli::examples::POLICY_SHOW)]
    Show {
        /// Policy file (TOML).
        file: PathBuf,
        /// Also the rules humans saved with `approve --remember` in this
        /// state directory, as a service using it decides.
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Walk one decision: every rule and check that fired, and the strictest, which decides.
    #[command(after_help = cli::examples::POLICY_EXPLAIN)]
    Explain {
        /// Policy file (TOML).
        file: PathBuf,
        /// The command, as one shell string.
        #[arg(long, value_name = "STRING")]
        shell: String,
        /// Project root (default: the current directory).
        #[arg(long, value_name = "DIR")]
        root: Option<PathBuf>,
        /// Working directory inside the root.
        #[arg(long, value_name = "SUBDIR")]
        cwd: Option<String>,
        /// Also the rules humans saved with `approve --remember` in this
        /// state directory.
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // Run as `agent-exec-sh` (a link used as SHELL): the drop-in, with
    // the shell's argument forms rather than this CLI's.
    if let Some(args) = multicall_args() {
        let Ok(args) = args else {
            eprintln!("agent-exec: an argument is not UTF-8 text; nothing ran");
            return ExitCode::from(126);
        };
        let supervisor = Supervisor::init(SupervisorOptions::one_shot());
        let code = agent_exec::sh::main(&args, &supervisor);
        supervisor.wait_for_sweep();
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let cli = match cli::parse::parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 125 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // A run makes its own process-wide setup, after deciding whether it
    // runs here at all.
    let Some(command) = cli.command else {
        return ExitCode::from(run(cli.run).clamp(0, 255) as u8);
    };
    // The process-wide setup, before anything opens a file it keeps.
    let supervisor = Supervisor::init(supervisor_options(&command));
    let code = match command {
        Command::Check(t) => check(t),
        Command::Policy(PolicyCmd::Validate { file }) => validate(&file),
        Command::Policy(PolicyCmd::Show { file, state, json }) => {
            policy_cli::show(&file, state.as_deref(), json)
        }
        Command::Policy(PolicyCmd::Explain {
            file,
            shell,
            root,
            cwd,
            state,
            json,
        }) => policy_cli::explain(&file, shell, root, cwd, state.as_deref(), json),
        Command::Serve(args) => agent_exec::serve::main(args, supervisor),
        Command::Sh { args } => {
            let code = agent_exec::sh::main(&args, &supervisor);
            supervisor.wait_for_sweep();
            code
        }
        Command::Mcp(args) => agent_exec::mcp::main(args, &supervisor),
        Command::Audit {
            json,
            retry_threshold,
            traces,
        } => audit(&traces, json, retry_threshold),
        Command::Replay { trace, color } => story(&trace, &color),
        Command::Eval(args) => eval(args),
        Command::Approvals(a) => agent_exec::approve_cli::list(&a),
        Command::Approve(a) => agent_exec::approve_cli::approve(&a),
        Command::Reject(a) => agent_exec::approve_cli::reject(&a),
        Command::Doctor(args) => cli::doctor::doctor(args, &supervisor),
        Command::Trace(cmd) => cli::trace_cmd::trace(cmd),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// The arguments after argv[0] when the binary runs under the drop-in's
/// name; `Err` when one is not UTF-8 (a command that cannot be shown as
/// it is does not run).
fn multicall_args() -> Option<Result<Vec<String>, ()>> {
    let mut argv = std::env::args_os();
    let argv0 = argv.next()?;
    let name = Path::new(&argv0).file_name()?;
    (name == agent_exec::sh::MULTICALL_NAME)
        .then(|| argv.map(|a| a.into_string().map_err(drop)).collect())
}

/// What each command needs of the process-wide setup (a run makes its own;
/// the MCP server, the drop-in and the doctor run commands, so all of it): the
/// daemon keeps its main thread's bounding set (it execs the reaper) and
/// empties its workers' instead; the reaper and the commands that run
/// nothing only need stdio guarded.
fn supervisor_options(command: &Command) -> SupervisorOptions {
    match command {
        Command::Mcp(_) => SupervisorOptions::default(),
        // The doctor's probe is a run like any other, and its only one.
        Command::Doctor(_) => SupervisorOptions {
            children_ahead: false,
            ..SupervisorOptions::default()
        },
        // The drop-in is a one-shot call like the CLI's.
        Command::Sh { .. } => SupervisorOptions::one_shot(),
        Command::Serve(s) if s.reap_for.is_none() => SupervisorOptions {
            drop_bounding_set: false,
            ..SupervisorOptions::default()
        },
        _ => SupervisorOptions {
            stdio: true,
            ..SupervisorOptions::none()
        },
    }
}

fn load_policy(path: Option<&Path>) -> Result<Policy, String> {
    let Some(path) = path else {
        return Err("no policy given: pass --policy FILE (no policy, no run)".into());
    };
    // A one-shot run parses and checks a policy once per policy bytes and
    // binary; later calls read the compiled form (crates/policy/src/cache.rs).
    let memo = agent_exec::sandbox::private_dir("compiled-policies");
    Policy::load_cached(path, memo.as_deref()).map_err(|e| e.to_string())
}

fn command_of(t: &Target) -> Result<CommandSpec, String> {
    match (&t.shell, t.argv.is_empty()) {
        (Some(s), true) => Ok(CommandSpec::Shell(s.clone())),
        (None, false) => Ok(CommandSpec::Argv(t.argv.clone())),
        (Some(_), false) => Err("give either --shell STRING or -- PROGRAM ARGS, not both".into()),
        (None, true) => Err("no command: give --shell STRING or -- PROGRAM ARGS".into()),
    }
}

fn root_of(t: &Target) -> PathBuf {
    t.root.clone().unwrap_or_else(|| PathBuf::from("."))
}

fn run(a: RunArgs) -> i32 {
    let format = a.format;
    let command = match command_of(&a.target) {
        Ok(c) => c,
        Err(m) => return fail(ErrorType::InvalidArguments, m, format),
    };
    let mut req = RunRequest::new(command);
    req.cwd = a.target.cwd.clone();
    req.timeout_ms = a.timeout_ms;
    req.output_chars = a.output_chars;
    req.stdin = a.stdin.clone();
    req.session = a.session.clone();
    req.idempotency_key = a.idempotency_key.clone();
    req.approval_id = a.approval_id.clone();
    let mut via = None;
    // A forwarded call needs none of the process-wide setup a run does
    // (the daemon made its own); only stdio is guarded first.
    if let Some(socket) = cli::forward::daemon_socket(&a) {
        Supervisor::init(SupervisorOptions {
            stdio: true,
            ..SupervisorOptions::none()
        });
        match cli::forward::forward(&a, &socket, &req) {
            Ok(result) => return emit(&result, format),
            Err(why) => via = Some(format!("direct: {why}")),
        }
    }
    // The process-wide setup, before anything opens a file it keeps; a
    // one-shot call takes its run cgroups from the kept slots, and sweeps
    // what earlier calls left while it reads its policy. The policy is
    // read on a thread meanwhile (each takes 0.1-0.4 ms; BENCHMARKS.md),
    // once stdio is guarded so none of its files takes fd 0, 1 or 2.
    Supervisor::init(SupervisorOptions {
        stdio: true,
        heap_pad: true,
        ..SupervisorOptions::none()
    });
    let path = a.target.policy.clone();
    let loading = std::thread::Builder::new()
        .name("agent-exec-policy".into())
        .spawn(move || load_policy(path.as_deref()));
    let supervisor = Supervisor::init(SupervisorOptions::one_shot());
    let policy = match loading {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| Err("reading the policy failed unexpectedly".into())),
        Err(_) => load_policy(a.target.policy.as_deref()),
    };
    let code = match policy {
        Ok(policy) => run_direct(&a, policy, req, via, &supervisor),
        Err(m) => fail(ErrorType::PolicyError, m, format),
    };
    // Before the process exits: the sweep is never cut short.
    supervisor.wait_for_sweep();
    code
}

/// The call run by this process, under `supervisor`.
fn run_direct(
    a: &RunArgs,
    policy: Policy,
    req: RunRequest,
    via: Option<String>,
    supervisor: &Supervisor,
) -> i32 {
    let format = a.format;
    // Ready by the time the call is decided, after the sandbox is prepared.
    policy.precompile_in_background();
    let mut b = builder(policy, a);
    if let Some(via) = via {
        b = b.trace_via(via);
    }
    let service = match b.build(supervisor) {
        Ok(s) => s,
        Err(e) => return build_failure(e, format),
    };
    let result = service.call(req, &CancelToken::new());
    if let Some(summary) = service.replay_summary()
        && format == Format::Human
    {
        eprintln!("agent-exec: replay: {}", visible(&summary.to_string()));
    }
    let code = emit(&result, format);
    service.end_with_process();
    code
}

/// The service the run flags ask for.
fn builder(policy: Policy, a: &RunArgs) -> ServiceBuilder {
    let mut b = Service::builder(policy, root_of(&a.target));
    if a.approve == ApproveMode::Tty {
        b = b.approver(TtyApprover);
    }
    if let Some(dir) = &a.state {
        b = b.state_dir(dir);
    }
    if let Some(path) = &a.session_file {
        b = b.session_file(path);
    }
    if let Some(path) = a.record.as_ref().or(a.trace.as_ref()) {
        b = b.trace_file(path, a.record.is_some());
    }
    if let Some(path) = &a.replay {
        let mode = match a.replay_mode {
            ReplayModeArg::Strict => ReplayMode::Strict,
            ReplayModeArg::Lenient => ReplayMode::Lenient,
        };
        b = b.replay(path, mode, a.allow_live_writes);
    }
    b
}

/// A service that could not be built, told in the CLI's own terms.
fn build_failure(e: ServiceError, format: Format) -> i32 {
    match e {
        ServiceError::Sandbox(e) => fail(
            ErrorType::SandboxUnavailable,
            format!("sandbox unavailable, nothing ran: {e}"),
            format,
        ),
        ServiceError::Trace { path, source } => fail(
            ErrorType::InvalidArguments,
            format!("--trace {}: {source}", path.display()),
            format,
        ),
        ServiceError::Replay { path, source } => fail(
            ErrorType::InvalidArguments,
            format!("--replay {}: {source}", path.display()),
            format,
        ),
        ServiceError::Policy(e) => fail(ErrorType::PolicyError, e.to_string(), format),
        other => fail(ErrorType::InvalidArguments, other.to_string(), format),
    }
}

/// What the policy decides, through the same validation and decision a
/// run gets; nothing is prepared or run.
fn check(t: Target) -> i32 {
    let command = match command_of(&t) {
        Ok(c) => c,
        Err(m) => return fail(ErrorType::InvalidArguments, m, Format::Json),
    };
    let policy = match load_policy(t.policy.as_deref()) {
        Ok(p) => p,
        Err(m) => return fail(ErrorType::PolicyError, m, Format::Json),
    };
    let checker = match Service::builder(policy, root_of(&t)).build_checker() {
        Ok(c) => c,
        Err(e @ ServiceError::Policy(_)) => {
            return fail(ErrorType::PolicyError, e.to_string(), Format::Json);
        }
        Err(e) => return fail(ErrorType::InvalidArguments, e.to_string(), Format::Json),
    };
    let mut req = RunRequest::new(command);
    req.cwd = t.cwd;
    match checker.check(&req) {
        Ok(d) => {
            let out = serde_json::json!({
                "decision": d.verdict,
                "rule": d.rule,
                "risk_level": d.risk,
                "reason": d.reason,
                "token": d.token,
                "read_only": d.read_only,
                "needs_shell": d.needs_shell,
                "policy": checker.policy().name,
            });
            println!("{out}");
            match d.verdict {
                Verdict::Allow => 0,
                _ => 126,
            }
        }
        Err(refused) => emit(&refused, Format::Json),
    }
}

fn validate(file: &Path) -> i32 {
    match Policy::load(file) {
        Ok(p) => {
            let warnings = p.lint();
            for w in &warnings {
                println!("warning: {w}");
            }
            println!(
                "{}: policy {:?} is valid ({} warning{}), sha256 {}",
                file.display(),
                p.name,
                warnings.len(),
                if warnings.len() == 1 { "" } else { "s" },
                p.sha256
            );
            0
        }
        Err(e) => {
            eprintln!("agent-exec: {e}");
            125
        }
    }
}

fn audit(traces: &[PathBuf], json: bool, retry_threshold: usize) -> i32 {
    let opts = trace::AuditOptions {
        retry_threshold,
        ..Default::default()
    };
    let report = trace::audit(traces, &opts);
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("agent-exec: {e}");
                return 125;
            }
        }
    } else {
        print!("{report}");
    }
    if report.failed() { 1 } else { 0 }
}

fn story(path: &Path, color: &str) -> i32 {
    use std::io::IsTerminal;
    let color = match color {
        "always" => true,
        "never" => false,
        _ => std::io::stdout().is_terminal(),
    };
    let mut out = std::io::stdout().lock();
    match trace::story(path, &mut out, color) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("agent-exec: {}: {e}", path.display());
            125
        }
    }
}

/// The shipped task sets are written for this policy.
const DEFAULT_EVAL_POLICY: &str = "policies/code.toml";

fn eval(a: EvalArgs) -> i32 {
    let binary = match std::env::current_exe() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("agent-exec eval: cannot find its own binary: {e}");
            return 125;
        }
    };
    let mut opts = agent_exec::eval::EvalOptions::new(binary);
    opts.policy = match a.policy {
        Some(p) => Some(p),
        None if Path::new(DEFAULT_EVAL_POLICY).is_file() => {
            Some(PathBuf::from(DEFAULT_EVAL_POLICY))
        }
        None => {
            eprintln!("agent-exec eval: no policy: pass --policy FILE");
            return 125;
        }
    };
    opts.compare = a.compare;
    opts.filter = a.filter;
    let report = match agent_exec::eval::run_eval(&a.tasks, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent-exec eval: {e}");
            return 125;
        }
    };
    let json = match serde_json::to_string_pretty(&report) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("agent-exec eval: {e}");
            return 125;
        }
    };
    match &a.out {
        Some(path) => {
            if let Err(e) = std::fs::write(path, json + "\n") {
                eprintln!("agent-exec eval: {}: {e}", path.display());
                return 125;
            }
        }
        None => println!("{json}"),
    }
    eprintln!(
        "agent-exec eval: {}: {}/{} passed ({:.1}%)",
        a.tasks.display(),
        report.passed,
        report.total,
        report.pass_rate * 100.0
    );
    if report.all_passed() { 0 } else { 1 }
}
