//! Embedding agent-exec in a program: load a policy, build a service for a
//! project root, run one command, print its ToolResult as JSON.
//!
//!     cargo run --example embed
//!     cargo run --example embed -- --shell 'ls -la' --root .
//!     cargo run --example embed -- --shell 'uname -s' --always uname
//!     cargo run --example embed -- --policy policies/readonly.toml --shell 'cat /etc/shadow'
//!
//! Without `--root`, the command runs in a fresh temporary directory. The
//! approver below shows the seam an agent host uses for its own approval
//! UI: it stands for a host whose user clicked "always allow" for some
//! programs (`--always NAME`), approves `require_approval` commands the
//! policy decided on one of those words, refuses the rest, and tells
//! stderr what it was asked.

use std::path::PathBuf;
use std::process::ExitCode;

use agent_exec::{
    Approval, ApprovalRequest, Approver, CancelToken, Policy, RunRequest, Service, Supervisor,
    SupervisorOptions,
};

/// uid and gid of `nobody`.
const NOBODY: u32 = 65_534;

/// Approves commands whose deciding word (the program, for a command no
/// rule covers) the user always allows; refuses the rest.
struct AlwaysAllowApprover {
    always: Vec<String>,
}

impl Approver for AlwaysAllowApprover {
    fn approve(&self, request: &ApprovalRequest<'_>) -> Approval {
        let d = request.decision;
        let word = d.token.as_deref().unwrap_or_default();
        let answer = if self.always.iter().any(|a| a == word) {
            Approval::Approved
        } else {
            Approval::Denied
        };
        eprintln!(
            "embed: approval asked for `{}` (rule {}, {:?} risk): {answer:?}",
            request.command_line(),
            d.rule,
            d.risk
        );
        answer
    }
}

struct Args {
    policy: PathBuf,
    root: Option<PathBuf>,
    shell: String,
    always: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        policy: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml"),
        root: None,
        shell: "echo hello from an embedded agent-exec".into(),
        always: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--policy" => args.policy = PathBuf::from(value()?),
            "--root" => args.root = Some(PathBuf::from(value()?)),
            "--shell" => args.shell = value()?,
            "--always" => args.always.push(value()?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("embed: {e}");
            ExitCode::from(125)
        }
    }
}

fn run() -> Result<i32, Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let policy = Policy::load(&args.policy)?;
    // Kept alive until the end: dropping it removes the directory.
    let scratch = tempfile::tempdir()?;
    let root = match &args.root {
        Some(r) => r.clone(),
        None => {
            // The sandbox runs the child as the root directory's owner, or
            // as `nobody` when that is root: hand the scratch root over.
            if nix::unistd::geteuid().is_root() {
                std::os::unix::fs::chown(scratch.path(), Some(NOBODY), Some(NOBODY))?;
            }
            scratch.path().to_path_buf()
        }
    };
    let service = Service::builder(policy, root)
        .approver(AlwaysAllowApprover {
            always: args.always,
        })
        .build(&Supervisor::init(SupervisorOptions::default()))?;
    let result = service.call(RunRequest::shell(args.shell), &CancelToken::new());
    println!("{}", serde_json::to_string(&result)?);
    Ok(result.cli_exit_code())
}
