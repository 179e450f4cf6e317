//! The run form's command line read without clap: the flags an agent's
//! call uses, each with a value, then the program after `--`. Both the
//! CLI (`agent-exec`, before it builds any parser) and the small thin
//! client (`agent-exec-client`, which links no parser) read it this way.
//!
//! Only what clap would read the same way is taken; for anything else the
//! caller hands the whole command line to clap, which also words every
//! error. So a flag outside the caller's list or given twice, a value
//! that is empty or starts with `-`, a word before `--` and text that is
//! not UTF-8 all make [`RunWords::read`] answer `None`.

use std::ffi::OsString;

use crate::emit::Format;

/// The run flags a daemon serves as the CLI does: all the small thin
/// client forwards, and part of what the CLI reads without clap.
pub const SERVED: &[&str] = &[
    "--policy",
    "--root",
    "--cwd",
    "--shell",
    "--timeout-ms",
    "--output-chars",
    "--stdin",
    "--format",
    "--approve",
    "--session",
    "--daemon",
];

/// The flags and the program of one command line.
#[derive(Debug)]
pub struct RunWords {
    flags: Vec<(&'static str, String)>,
    argv: Vec<String>,
}

impl RunWords {
    /// `args` (without the program's own name), when every flag before
    /// `--` is in one of the lists `known`; see the module's notes for
    /// what else is left to clap.
    pub fn read(args: &[OsString], known: &[&[&'static str]]) -> Option<RunWords> {
        let mut words = args.iter();
        let mut flags: Vec<(&'static str, String)> = Vec::new();
        let mut argv = Vec::new();
        while let Some(word) = words.next() {
            let word = word.to_str()?;
            if word == "--" {
                for w in words.by_ref() {
                    argv.push(w.to_str()?.to_string());
                }
                break;
            }
            let (name, inline) = match word.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (word, None),
            };
            let name = *known.iter().flat_map(|k| k.iter()).find(|f| **f == name)?;
            let value = match inline {
                Some(v) => v,
                None => words.next()?.to_str()?.to_string(),
            };
            if value.is_empty() || value.starts_with('-') || flags.iter().any(|(n, _)| *n == name) {
                return None;
            }
            flags.push((name, value));
        }
        Some(RunWords { flags, argv })
    }

    /// The value given for `flag`.
    pub fn value(&self, flag: &str) -> Option<String> {
        self.flags
            .iter()
            .find(|(n, _)| *n == flag)
            .map(|(_, v)| v.clone())
    }

    /// `Some(None)` without the flag; `None` for a value that is not all
    /// digits (clap reads some such values its own way: `+5`).
    pub fn number(&self, flag: &str) -> Option<Option<u64>> {
        match self.value(flag) {
            None => Some(None),
            Some(v) if v.bytes().all(|b| b.is_ascii_digit()) => v.parse().ok().map(Some),
            Some(_) => None,
        }
    }

    /// `--format`, defaulting to JSON; `None` for a value clap refuses.
    pub fn format(&self) -> Option<Format> {
        match self.value("--format").as_deref() {
            None | Some("json") => Some(Format::Json),
            Some("human") => Some(Format::Human),
            Some(_) => None,
        }
    }

    /// The program and its arguments, after `--`.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }
}
