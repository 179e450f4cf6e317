//! The command line of a run, parsed without the subcommands' parsers.
//!
//! Building the full parser builds every subcommand's arguments first, a
//! third of a millisecond of a one-shot call that only runs a command
//! (BENCHMARKS.md). The run form is parsed by a parser of its flags
//! alone, and only when nothing before `--` could name a subcommand or
//! ask for help or the version; everything else, and every error, goes
//! through the full parser, so what a user sees is the same.

use clap::Parser;

// `super::super`: the binary's root module, also when `main.rs` is
// included as a module (the docs generator and its test).
use super::super::{Cli, RunArgs};

/// Every subcommand name and alias of [`Cli`], and clap's `help`; a test
/// keeps this list equal to the parser's.
const SUBCOMMANDS: &[&str] = &[
    "check",
    "policy",
    "serve",
    "sh",
    "mcp",
    "audit",
    "replay",
    "eval",
    "approvals",
    "approve",
    "reject",
    "doctor",
    "trace",
    "help",
];

/// The run form's flags, as the full parser reads them.
#[derive(Parser, Debug)]
#[command(name = "agent-exec", disable_help_flag = true)]
struct RunOnly {
    #[command(flatten)]
    run: RunArgs,
}

/// The command line, through the run form's parser when that gives what
/// the full one would; else the full parser's answer.
pub(crate) fn parse() -> Result<Cli, clap::Error> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if plainly_a_run(&args)
        && let Ok(only) = RunOnly::try_parse_from(&args)
    {
        return Ok(Cli {
            command: None,
            run: only.run,
        });
    }
    Cli::try_parse_from(args)
}

/// No word before `--` that the full parser could take for a subcommand,
/// for help or for the version: for such a command line both parsers
/// read the same run flags.
fn plainly_a_run(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| a.as_os_str() != "--")
        .all(|a| {
            let Some(a) = a.to_str() else {
                return false;
            };
            !SUBCOMMANDS.contains(&a)
                && !matches!(a, "-h" | "--help" | "-V" | "--version")
                && !a.starts_with("--help=")
                && !a.starts_with("--version=")
        })
}

/// The full parser, for the test that keeps [`SUBCOMMANDS`] complete.
#[cfg(test)]
fn subcommand_names() -> Vec<String> {
    use clap::CommandFactory;
    let mut names = vec!["help".to_string()];
    for s in Cli::command().get_subcommands() {
        names.push(s.get_name().to_string());
        names.extend(s.get_all_aliases().map(str::to_string));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("agent-exec")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect()
    }

    #[test]
    fn the_subcommand_list_is_the_parsers() {
        let mut ours: Vec<String> = SUBCOMMANDS.iter().map(|s| s.to_string()).collect();
        let mut theirs = subcommand_names();
        ours.sort();
        theirs.sort();
        assert_eq!(ours, theirs);
    }

    /// Both parsers, on command lines of the run form: the same flags.
    #[test]
    fn the_run_form_parses_as_the_full_parser_does() {
        let lines: &[&[&str]] = &[
            &["--policy", "p.toml", "--", "true"],
            &[
                "--policy", "p.toml", "--root", "/r", "--cwd", "src", "--shell", "ls -l",
            ],
            &[
                "--policy=p.toml",
                "--timeout-ms",
                "5",
                "--output-chars",
                "9",
                "--",
                "a",
                "--",
                "b",
            ],
            &[
                "--policy",
                "p",
                "--format",
                "human",
                "--approve",
                "tty",
                "--",
                "x",
            ],
            &[
                "--policy",
                "p",
                "--state",
                "/s",
                "--idempotency-key",
                "k",
                "--",
                "x",
            ],
            &[
                "--policy",
                "p",
                "--replay",
                "t",
                "--replay-mode",
                "lenient",
                "--allow-live-writes",
                "--",
                "x",
            ],
            &["--policy", "p", "--", "check", "--help"],
            &[
                "--policy",
                "p",
                "--session",
                "s",
                "--session-file",
                "f",
                "--daemon",
                "/d",
                "--stdin",
                "in",
                "--",
                "x",
            ],
        ];
        for line in lines {
            let args = os(line);
            assert!(plainly_a_run(&args), "{line:?}");
            let fast = RunOnly::try_parse_from(&args).unwrap().run;
            let full = Cli::try_parse_from(&args).unwrap();
            assert!(full.command.is_none());
            assert_eq!(format!("{fast:?}"), format!("{:?}", full.run), "{line:?}");
        }
    }

    /// What the run form's parser must not see: the full parser answers.
    #[test]
    fn subcommands_help_and_errors_go_to_the_full_parser() {
        for line in [
            &["check", "--policy", "p", "--", "x"][..],
            &["--policy", "p", "help"],
            &["--help"],
            &["-V"],
            &["--policy", "check", "--", "x"],
        ] {
            assert!(!plainly_a_run(&os(line)), "{line:?}");
        }
        // Errors of the run form are the full parser's, word for word.
        for line in [
            &["--policy", "p", "--timeout-ms", "soon", "--", "x"][..],
            &["--policy", "p", "--shell", "ls", "--", "x"],
            &["--nonsense"],
            &["--policy", "p", "--idempotency-key", "k", "--", "x"],
            &["stray"],
        ] {
            let args = os(line);
            let full = Cli::try_parse_from(&args).unwrap_err();
            assert!(RunOnly::try_parse_from(&args).is_err(), "{line:?}");
            let through = match (plainly_a_run(&args), RunOnly::try_parse_from(&args)) {
                (true, Ok(_)) => panic!("{line:?} parsed by the run form"),
                _ => Cli::try_parse_from(&args).unwrap_err(),
            };
            assert_eq!(through.to_string(), full.to_string(), "{line:?}");
        }
    }
}
