//! The command line of a run, parsed without the subcommands' parsers.
//!
//! Building the full parser builds every subcommand's arguments first, a
//! third of a millisecond of a one-shot call that only runs a command
//! (BENCHMARKS.md). An agent's call (the run form with its common flags)
//! is read without clap at all; the rest of the run form by a parser of
//! its flags alone, and only when nothing before `--` could name a
//! subcommand or ask for help or the version; everything else, and every
//! error, goes through the full parser, so what a user sees is the same.

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
    if let Some(run) = common_run(&args) {
        return Ok(Cli { command: None, run });
    }
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

/// The flags the CLI reads without clap besides those a daemon serves
/// (`agent_exec::run_form::SERVED`); every other flag, help and
/// subcommands go to clap.
const LOCAL: &[&str] = &["--trace", "--state", "--session-file"];

/// The run form with only the flags an agent's call uses ([`LOCAL`] and
/// the served ones), read without clap (`agent_exec::run_form`): building
/// even the run form's parser is about a tenth of a millisecond before
/// anything else of a call can start (BENCHMARKS.md). `None` for anything clap might read differently, and
/// for every error, which clap words; also for `--shell` beside a program.
fn common_run(args: &[std::ffi::OsString]) -> Option<RunArgs> {
    use super::super::{ApproveMode, ReplayModeArg, Target};
    use agent_exec::run_form::SERVED;
    use std::path::PathBuf;

    let words = agent_exec::run_form::RunWords::read(args.get(1..)?, &[SERVED, LOCAL])?;
    let shell = words.value("--shell");
    if shell.is_some() && !words.argv().is_empty() {
        return None;
    }
    let path = |flag: &str| words.value(flag).map(PathBuf::from);
    Some(RunArgs {
        target: Target {
            policy: path("--policy"),
            root: path("--root"),
            cwd: words.value("--cwd"),
            shell,
            argv: words.argv().to_vec(),
        },
        timeout_ms: words.number("--timeout-ms")?,
        output_chars: match words.number("--output-chars")? {
            Some(n) => Some(usize::try_from(n).ok()?),
            None => None,
        },
        stdin: words.value("--stdin"),
        format: words.format()?,
        approve: match words.value("--approve").as_deref() {
            None | Some("never") => ApproveMode::Never,
            Some("tty") => ApproveMode::Tty,
            Some(_) => return None,
        },
        trace: path("--trace"),
        record: None,
        replay: None,
        replay_mode: ReplayModeArg::Strict,
        allow_live_writes: false,
        state: path("--state"),
        idempotency_key: None,
        session: words.value("--session"),
        approval_id: None,
        session_file: path("--session-file"),
        daemon: path("--daemon"),
    })
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
            if let Some(common) = common_run(&args) {
                assert_eq!(format!("{common:?}"), format!("{:?}", full.run), "{line:?}");
            }
        }
        // An agent's calls take the path without clap.
        for line in [&lines[0], &lines[1], &lines[2]] {
            assert!(common_run(&os(line)).is_some(), "{line:?}");
        }
    }

    /// A value for `flag`: mostly one clap takes, sometimes one it may not.
    fn value_for(flag: &str, odd: bool, k: usize) -> &'static str {
        const ODD: &[&str] = &["-x", "", "+5", "18446744073709551616", "JSON", "a=b"];
        if odd {
            return ODD[k % ODD.len()];
        }
        let good: &[&'static str] = match flag {
            "--timeout-ms" | "--output-chars" => &["5", "007", "0", "120000"],
            "--format" => &["json", "human"],
            "--approve" => &["never", "tty"],
            _ => &["p.toml", "/r/x", "ls -l | wc", "check", "a=b", "sub dir"],
        };
        good[k % good.len()]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Whatever the parser without clap reads, clap reads the same:
        /// its flags and others, separate or inline values, values clap
        /// may refuse or read otherwise, words before and after `--`.
        #[test]
        fn the_common_form_is_read_as_clap_reads_it(
            names in proptest::sample::subsequence(
                [agent_exec::run_form::SERVED, LOCAL, &["--record", "--idempotency-key", "--nonsense"][..]].concat(),
                0..7,
            ),
            picks in proptest::collection::vec((0usize..100, 0usize..12, proptest::bool::ANY), 7),
            stray in proptest::option::weighted(0.1, 0usize..3),
            tail in proptest::collection::vec(0usize..5, 0..4),
        ) {
            const WORDS: &[&str] = &["true", "--", "-v", "check", "a b"];
            let mut line: Vec<String> = Vec::new();
            for (name, (chance, k, inline)) in names.iter().zip(picks) {
                let value = value_for(name, chance >= 85, k);
                if inline {
                    line.push(format!("{name}={value}"));
                } else {
                    line.push(name.to_string());
                    line.push(value.to_string());
                }
            }
            if let Some(k) = stray {
                line.push(["stray", "-V", "help"][k].to_string());
            }
            if !tail.is_empty() {
                line.push("--".to_string());
                line.extend(tail.iter().map(|&w| WORDS[w].to_string()));
            }
            let refs: Vec<&str> = line.iter().map(String::as_str).collect();
            let args = os(&refs);
            if let Some(common) = common_run(&args) {
                let full = Cli::try_parse_from(&args);
                proptest::prop_assert!(full.is_ok(), "{:?}: clap refuses it", line);
                let full = full.unwrap();
                proptest::prop_assert!(full.command.is_none());
                proptest::prop_assert_eq!(format!("{common:?}"), format!("{:?}", full.run), "{:?}", line);
            }
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
            // A value that names a subcommand is still a value: only the
            // words themselves go to clap.
            if !line.starts_with(&["--policy", "check"]) {
                assert!(common_run(&os(line)).is_none(), "{line:?}");
            }
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
            assert!(common_run(&args).is_none(), "{line:?}");
            assert!(RunOnly::try_parse_from(&args).is_err(), "{line:?}");
            let through = match (plainly_a_run(&args), RunOnly::try_parse_from(&args)) {
                (true, Ok(_)) => panic!("{line:?} parsed by the run form"),
                _ => Cli::try_parse_from(&args).unwrap_err(),
            };
            assert_eq!(through.to_string(), full.to_string(), "{line:?}");
        }
    }
}
