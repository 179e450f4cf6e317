//! `agent-exec-client`: the one-shot run form of `agent-exec` as a small
//! process, for a host where a daemon serves the calls.
//!
//! A forwarded call pays two process starts: this one and the daemon's
//! spawn of the command. `agent-exec` itself is a 9 MB binary whose start
//! alone is two to three bare spawns (BENCHMARKS.md), most of it the
//! loader's and the kernel's work on pages this path never uses. This
//! binary links only the request, the result, the daemon client and the
//! printing, so its start is close to a bare spawn's.
//!
//! It takes the run form's command line (`--policy FILE [--root DIR]
//! [--daemon SOCKET] ... -- PROGRAM ARGS`, or `--shell STRING`). When the
//! flags ask only for what a daemon does and a daemon serving the same
//! policy file, root and version answers (`agent_exec::serve::client`),
//! it prints that daemon's result exactly as `agent-exec` would and exits
//! with the same status. Anything else, a flag it does not know included,
//! goes to `agent-exec` next to it, with the same arguments and
//! environment, by `execve`: that binary then parses, refuses, or runs the
//! call itself (trying the daemon again and saying in its trace why it was
//! not used). So the two commands answer every command line alike.

// Started at `entry!` below, without std's runtime start (0.12-0.20 ms of
// a forwarded call; `agent_exec_sandbox::run_main`); its unit tests keep
// the test harness's `main`.
#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use agent_exec::emit::{Format, emit, fail};
use agent_exec::run_form::{RunWords, SERVED};
use agent_exec::serve::client::{Target, forward};
use agent_exec::{CommandSpec, ErrorType, RunRequest};

/// The environment variable naming a daemon socket (as for `agent-exec`).
const DAEMON_ENV: &str = "AGENT_EXEC_DAEMON";

/// The binary a call is handed to: `agent-exec` in this binary's directory.
const FULL_CLI: &str = "agent-exec";

#[cfg(not(test))]
agent_exec::sandbox::entry!(client_main);

/// The client's work; its value is the process's exit status.
#[cfg_attr(test, allow(dead_code))]
fn client_main() -> u8 {
    // Descriptors 0-2 are open by now (the entry, or std's start, opens
    // `/dev/null` on a closed one): the socket cannot become fd 1 and get
    // the result written into it.
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let env_socket = std::env::var_os(DAEMON_ENV);
    if let Some(call) = forwardable(&args, env_socket) {
        let target = Target {
            policy: &call.policy,
            root: &call.root,
        };
        if let Ok(result) = forward(&call.socket, &target, &call.request) {
            return exit(emit(&result, call.format));
        }
    }
    exit(hand_over(&args))
}

fn exit(code: i32) -> u8 {
    code.clamp(0, 255) as u8
}

/// Runs `agent-exec` in this process's place with the same arguments;
/// returns only when it cannot be started.
fn hand_over(args: &[OsString]) -> i32 {
    let full = match std::env::current_exe() {
        Ok(me) => me.with_file_name(FULL_CLI),
        Err(e) => return cannot_start(&PathBuf::from(FULL_CLI), &e),
    };
    let e = std::process::Command::new(&full).args(args).exec();
    cannot_start(&full, &e)
}

fn cannot_start(full: &std::path::Path, e: &std::io::Error) -> i32 {
    fail(
        ErrorType::InternalError,
        format!(
            "agent-exec-client cannot start {}: {e}; nothing ran. It runs a call the \
             daemon does not take through agent-exec installed next to it.",
            full.display()
        ),
        Format::Json,
    )
}

/// A call this process can offer a daemon.
#[derive(Debug)]
struct Call {
    socket: PathBuf,
    policy: PathBuf,
    root: PathBuf,
    format: Format,
    request: RunRequest,
}

/// The call `args` asks for, when they read unambiguously as the run form
/// with only flags a daemon serves and a daemon socket is named; `None`
/// for anything else, which `agent-exec` then reads. Only what its parser
/// would read the same way is taken (`agent_exec::run_form`).
fn forwardable(args: &[OsString], env_socket: Option<OsString>) -> Option<Call> {
    let words = RunWords::read(args, &[SERVED])?;
    let command = match (words.value("--shell"), words.argv().is_empty()) {
        (Some(s), true) => CommandSpec::Shell(s),
        (None, false) => CommandSpec::Argv(words.argv().to_vec()),
        _ => return None,
    };
    let format = words.format()?;
    if words.value("--approve").is_some_and(|a| a != "never") {
        return None;
    }
    let socket = words
        .value("--daemon")
        .map(OsString::from)
        .or(env_socket)
        .filter(|s| !s.is_empty())?;
    let mut request = RunRequest::new(command);
    request.cwd = words.value("--cwd");
    request.timeout_ms = words.number("--timeout-ms")?;
    request.output_chars = match words.number("--output-chars")? {
        Some(n) => Some(usize::try_from(n).ok()?),
        None => None,
    };
    request.stdin = words.value("--stdin");
    request.session = words.value("--session");
    Some(Call {
        socket: PathBuf::from(socket),
        policy: PathBuf::from(words.value("--policy")?),
        root: PathBuf::from(words.value("--root").unwrap_or_else(|| ".".into())),
        format,
        request,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(args: &[&str]) -> Option<Call> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        forwardable(&args, None)
    }

    #[test]
    fn the_plain_run_form_is_forwarded() {
        let c = call(&["--policy", "p.toml", "--daemon=/s", "--", "git", "status"]).unwrap();
        assert_eq!(c.socket, PathBuf::from("/s"));
        assert_eq!(c.policy, PathBuf::from("p.toml"));
        assert_eq!(c.root, PathBuf::from("."));
        assert_eq!(c.format, Format::Json);
        assert_eq!(
            c.request.command,
            CommandSpec::Argv(vec!["git".into(), "status".into()])
        );
        let c = call(&[
            "--policy=p",
            "--root",
            "/r",
            "--daemon",
            "/s",
            "--cwd",
            "src",
            "--timeout-ms",
            "500",
            "--output-chars=10",
            "--stdin",
            "text",
            "--session",
            "s1",
            "--format",
            "human",
            "--approve",
            "never",
            "--shell",
            "ls | wc -l",
        ])
        .unwrap();
        assert_eq!(c.request.command, CommandSpec::Shell("ls | wc -l".into()));
        assert_eq!(c.request.cwd.as_deref(), Some("src"));
        assert_eq!(c.request.timeout_ms, Some(500));
        assert_eq!(c.request.output_chars, Some(10));
        assert_eq!(c.request.stdin.as_deref(), Some("text"));
        assert_eq!(c.request.session.as_deref(), Some("s1"));
        assert_eq!(c.format, Format::Human);
        assert_eq!(c.root, PathBuf::from("/r"));
    }

    #[test]
    fn the_environment_names_the_daemon_unless_a_flag_does() {
        let args: Vec<OsString> = ["--policy", "p", "--", "true"]
            .iter()
            .map(OsString::from)
            .collect();
        assert!(forwardable(&args, None).is_none());
        assert!(forwardable(&args, Some("".into())).is_none());
        let c = forwardable(&args, Some("/env".into())).unwrap();
        assert_eq!(c.socket, PathBuf::from("/env"));
    }

    #[test]
    fn anything_else_is_left_to_agent_exec() {
        let d = ["--policy", "p", "--daemon", "/s"];
        let with = |more: &[&str]| {
            let mut a = d.to_vec();
            a.extend_from_slice(more);
            call(&a)
        };
        // Control: this much is forwarded.
        assert!(with(&["--", "true"]).is_some());
        for more in [
            // Subcommands, help, the version, flags only this process has.
            &["check", "--", "true"][..],
            &["--help"],
            &["-V", "--", "true"],
            &["--trace", "t.jsonl", "--", "true"],
            &["--state", "dir", "--", "true"],
            &["--approve", "tty", "--", "true"],
            &["--format", "JSON", "--", "true"],
            // What the parser reads otherwise or refuses.
            &["--shell", "-x"],
            &["--shell", "ls", "--", "true"],
            &[],
            &["--"],
            &["--timeout-ms", "+5", "--", "true"],
            &["--timeout-ms=", "--", "true"],
            &["--output-chars", "99999999999999999999999", "--", "true"],
            &["--policy", "q", "--", "true"],
            &["--cwd"],
        ] {
            assert!(with(more).is_none(), "{more:?}");
        }
        assert!(
            call(&["--daemon", "/s", "--", "true"]).is_none(),
            "no policy"
        );
    }

    #[test]
    fn words_that_are_not_text_are_left_to_agent_exec() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![0xff]);
        let mut args: Vec<OsString> = ["--policy", "p", "--daemon", "/s", "--", "echo"]
            .iter()
            .map(OsString::from)
            .collect();
        args.push(odd);
        assert!(forwardable(&args, None).is_none());
    }
}
