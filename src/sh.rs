//! `agent-exec sh -c STRING` (or a link named `agent-exec-sh`): a
//! drop-in for `$SHELL -c`, for agents that run every command that way.
//!
//! The contract is the shell's: the command's own stdout and stderr, its
//! exit status. What differs is that the command goes through the
//! service first: a refusal is one line on stderr, beginning
//! `agent-exec:`, and status 126, with nothing run; a timeout is 124.
//!
//! The policy comes from `AGENT_EXEC_POLICY`, the root from
//! `AGENT_EXEC_ROOT` (default: the current directory), or both from
//! `$XDG_CONFIG_HOME/agent-exec/config.toml` (`~/.config/...` without
//! it); the environment wins. Without a policy nothing runs.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::request::RunRequest;
use crate::result::{ErrorType, ToolResult};
use crate::sandbox::{CancelToken, Supervisor};
use crate::service::Service;

/// The name a link to the binary has to be run as the drop-in.
pub const MULTICALL_NAME: &str = "agent-exec-sh";

/// The session every drop-in call is charged to (budgets, traces).
const SESSION: &str = "sh";

/// Where the drop-in's settings come from, the environment first.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShConfig {
    pub policy: Option<PathBuf>,
    pub root: Option<PathBuf>,
    /// State directory (budgets across calls).
    pub state: Option<PathBuf>,
    /// JSONL trace every call is appended to.
    pub trace: Option<PathBuf>,
    /// The config file these came from, if any.
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

impl ShConfig {
    /// The config file (when there is one), overridden by `AGENT_EXEC_*`.
    pub fn load(env: &dyn Fn(&str) -> Option<String>) -> Result<ShConfig, String> {
        let mut cfg = match config_path(env) {
            Some(path) if path.is_file() => Self::read(&path)?,
            _ => ShConfig::default(),
        };
        let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(p) = var("AGENT_EXEC_POLICY") {
            cfg.policy = Some(p);
        }
        if let Some(r) = var("AGENT_EXEC_ROOT") {
            cfg.root = Some(r);
        }
        if let Some(s) = var("AGENT_EXEC_STATE") {
            cfg.state = Some(s);
        }
        if let Some(t) = var("AGENT_EXEC_TRACE") {
            cfg.trace = Some(t);
        }
        Ok(cfg)
    }

    /// Reads one config file; relative paths in it are relative to it.
    pub fn read(path: &Path) -> Result<ShConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut cfg: ShConfig =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        cfg.file = Some(path.to_path_buf());
        let base = path.parent().unwrap_or(Path::new("."));
        for p in [
            &mut cfg.policy,
            &mut cfg.root,
            &mut cfg.state,
            &mut cfg.trace,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(cfg)
    }
}

/// `$XDG_CONFIG_HOME/agent-exec/config.toml`, or under `~/.config`.
fn config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = match env("XDG_CONFIG_HOME").filter(|v| Path::new(v).is_absolute()) {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(env("HOME").filter(|h| !h.is_empty())?).join(".config"),
    };
    Some(base.join("agent-exec").join("config.toml"))
}

/// The command string out of the shell's own argument forms: `-c STRING`,
/// with `-l`/`--login` (and `-lc`) accepted and ignored, since the
/// environment a command gets is the policy's.
pub fn parse_args(args: &[String]) -> Result<String, String> {
    let mut command = None;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--login" | "-l" => {}
            "-c" | "-lc" | "-cl" => {
                let Some(s) = rest.next() else {
                    return Err("-c: option requires an argument".into());
                };
                command = Some(s.clone());
                if let Some(extra) = rest.next() {
                    return Err(format!(
                        "{extra:?}: arguments after -c STRING ($0, $1...) are not supported"
                    ));
                }
            }
            other => {
                return Err(format!(
                    "{other:?}: unsupported (this shell runs `-c STRING` only)"
                ));
            }
        }
    }
    command.ok_or_else(|| "no command: use -c STRING".to_string())
}

/// Runs the drop-in and returns the exit status. For a process that
/// exits next: the policy's memory is left to the exit
/// ([`Service::end_with_process`]).
pub fn main(args: &[String], supervisor: &Supervisor) -> i32 {
    let command = match parse_args(args) {
        Ok(c) => c,
        Err(m) => return explain(2, &m),
    };
    let env = |k: &str| std::env::var(k).ok();
    let cfg = match ShConfig::load(&env) {
        Ok(c) => c,
        Err(m) => return explain(125, &format!("config: {m}")),
    };
    let Some(policy_path) = cfg.policy.as_deref() else {
        return explain(
            125,
            "no policy: set AGENT_EXEC_POLICY or `policy` in $XDG_CONFIG_HOME/agent-exec/config.toml; nothing ran",
        );
    };
    let memo = crate::sandbox::private_dir("compiled-policies");
    let policy = match crate::policy::Policy::load_cached(policy_path, memo.as_deref()) {
        Ok(p) => p,
        Err(e) => return explain(125, &format!("policy: {e}; nothing ran")),
    };
    // Ready by the time the call is decided, after the sandbox is prepared.
    policy.precompile_in_background();
    let cwd = std::env::current_dir().ok();
    let root = match (&cfg.root, &cwd) {
        (Some(r), _) => r.clone(),
        (None, Some(c)) => c.clone(),
        (None, None) => PathBuf::from("."),
    };
    for (what, path) in [
        ("policy", Some(policy_path)),
        ("config file", cfg.file.as_deref()),
    ] {
        if let Some(path) = path.filter(|p| inside(p, &root)) {
            return explain(
                125,
                &format!(
                    "the {what} {} is inside the root {}, where commands could rewrite it for the next call; keep it outside; nothing ran",
                    path.display(),
                    root.display()
                ),
            );
        }
    }
    let mut builder = Service::builder(policy, root);
    if let Some(s) = &cfg.state {
        builder = builder.state_dir(s);
    }
    if let Some(t) = &cfg.trace {
        builder = builder.trace_file(t, false);
    }
    let service = match builder.build(supervisor) {
        Ok(s) => s,
        Err(e) => return explain(125, &format!("{e}; nothing ran")),
    };
    let mut req = RunRequest::shell(command);
    // The caller's directory, checked by the service to be inside the root.
    req.cwd = cwd.map(|c| c.to_string_lossy().into_owned());
    req.session = Some(SESSION.into());
    req.stdin = match read_stdin(service.policy().limits.max_stdin_bytes) {
        Ok(s) => s,
        Err(m) => return explain(126, &m),
    };
    let result = service.call(req, &CancelToken::new());
    let code = report(&result);
    service.end_with_process();
    code
}

/// Whether `path` is in the tree under `root`, both resolved. The
/// policy and the config file decide what every later call may do, so
/// they must be out of the commands' reach.
fn inside(path: &Path, root: &Path) -> bool {
    match (std::fs::canonicalize(path), std::fs::canonicalize(root)) {
        (Ok(p), Ok(r)) => p.starts_with(r),
        _ => false,
    }
}

/// Writes what the command wrote, or the refusal, and returns the status.
fn report(r: &ToolResult) -> i32 {
    let ran = r.exit_code.is_some() || r.signal.is_some();
    if ran {
        let _ = std::io::stdout().write_all(r.stdout.as_bytes());
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().write_all(r.stderr.as_bytes());
    }
    let Some(e) = r.error_type else {
        return r.cli_exit_code();
    };
    match e {
        ErrorType::NonzeroExit | ErrorType::KilledBySignal => r.cli_exit_code(),
        _ if ran => explain(r.cli_exit_code(), &r.message),
        // Refused before anything ran: by the policy, the shell-language
        // checks or the request's limits.
        ErrorType::PermissionDenied
        | ErrorType::ApprovalRequired
        | ErrorType::BudgetExhausted
        | ErrorType::ParseError
        | ErrorType::InvalidArguments => explain(126, &refusal_line(r)),
        _ => explain(r.cli_exit_code(), &refusal_line(r)),
    }
}

fn refusal_line(r: &ToolResult) -> String {
    let mut s = if r.message.starts_with("refused") {
        r.message.clone()
    } else {
        format!("refused: {}", r.message)
    };
    if let Some(rule) = &r.matched_rule {
        s.push_str(&format!(" [rule {rule}]"));
    }
    if let Some(sugg) = &r.suggestion {
        s.push_str(&format!(" ({sugg})"));
    }
    s
}

/// One line on stderr, escape codes shown rather than obeyed.
fn explain(code: i32, message: &str) -> i32 {
    let line = crate::service::terminal::visible(message);
    let _ = writeln!(std::io::stderr(), "agent-exec: {line}");
    code
}

/// What the caller piped in, when it did: a file, or a pipe that already
/// has data or is closed. A terminal, or a pipe nobody writes to (hosts
/// often leave one open), gives the command no input rather than a hang.
fn read_stdin(max: usize) -> Result<Option<String>, String> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::stat::{SFlag, fstat};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let Ok(st) = fstat(stdin.as_fd()) else {
        return Ok(None);
    };
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFIFO || kind == SFlag::S_IFSOCK {
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(20u8)) {
            Ok(n) if n > 0 => {}
            _ => return Ok(None),
        }
    } else if kind != SFlag::S_IFREG {
        return Ok(None);
    }
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    if let Err(e) = stdin.lock().take(limit).read_to_end(&mut buf) {
        return Err(format!("reading stdin: {e}; nothing ran"));
    }
    if buf.len() > max {
        return Err(format!(
            "refused: stdin is over the policy's {max} bytes; nothing ran"
        ));
    }
    if buf.is_empty() {
        return Ok(None);
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| "refused: stdin is not UTF-8 text; nothing ran".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_shell_argument_forms_agents_use_are_accepted() {
        for a in [
            &["-c", "ls -l"][..],
            &["-lc", "ls -l"],
            &["-l", "-c", "ls -l"],
            &["--login", "-c", "ls -l"],
        ] {
            assert_eq!(parse_args(&args(a)).as_deref(), Ok("ls -l"), "{a:?}");
        }
        for a in [
            &[][..],
            &["-c"],
            &["script.sh"],
            &["-c", "echo $0", "name"],
            &["-e", "-c", "x"],
        ] {
            assert!(parse_args(&args(a)).is_err(), "{a:?}");
        }
    }

    #[test]
    fn the_environment_overrides_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("agent-exec");
        std::fs::create_dir(&conf).unwrap();
        std::fs::write(
            conf.join("config.toml"),
            "policy = \"p.toml\"\nroot = \"/srv/project\"\n",
        )
        .unwrap();
        let xdg = dir.path().to_string_lossy().into_owned();
        let from_file =
            ShConfig::load(&|k: &str| (k == "XDG_CONFIG_HOME").then(|| xdg.clone())).unwrap();
        assert_eq!(from_file.policy, Some(conf.join("p.toml")));
        assert_eq!(from_file.root, Some(PathBuf::from("/srv/project")));
        let env = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some(xdg.clone()),
            "AGENT_EXEC_POLICY" => Some("/etc/agent-exec/code.toml".into()),
            _ => None,
        };
        let both = ShConfig::load(&env).unwrap();
        assert_eq!(
            both.policy,
            Some(PathBuf::from("/etc/agent-exec/code.toml"))
        );
        assert_eq!(both.root, Some(PathBuf::from("/srv/project")));
    }

    #[test]
    fn no_config_and_no_variables_mean_no_policy() {
        let dir = tempfile::tempdir().unwrap();
        let xdg = dir.path().to_string_lossy().into_owned();
        let cfg = ShConfig::load(&|k: &str| (k == "XDG_CONFIG_HOME").then(|| xdg.clone())).unwrap();
        assert_eq!(cfg, ShConfig::default());
        std::fs::create_dir(dir.path().join("agent-exec")).unwrap();
        std::fs::write(dir.path().join("agent-exec/config.toml"), "polcy = \"x\"\n").unwrap();
        let err = ShConfig::load(&|k: &str| (k == "XDG_CONFIG_HOME").then(|| xdg.clone()));
        assert!(err.unwrap_err().contains("unknown field"));
    }
}
