//! Load errors, written so a human can fix the file from the message alone:
//! every one names the file, and where possible the line and the key.

use std::fmt;

use super::Verdict;

/// One problem found in a policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// The key (or rule id) the problem is about.
    pub key: String,
    /// What is wrong and, where it helps, what to write instead.
    pub message: String,
}

/// An `[[example]]` whose decision differs from what the policy decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleFailure {
    /// 1-based line of the `[[example]]`.
    pub line: usize,
    /// The example's command.
    pub command: String,
    /// The verdict (and rule, and read-only class) the example states.
    pub expected: String,
    /// What the policy decided (verdict, rule), or the parse error.
    pub got: String,
}

/// Why a policy was not loaded. Every variant names the file (`path` or
/// `origin`); the message is written to be fixed from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// No file at the path given.
    #[error("policy file {path} does not exist")]
    NotFound {
        /// As given.
        path: String,
    },
    /// The file exists but could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Io {
        /// As given.
        path: String,
        /// What reading reported.
        #[source]
        source: std::io::Error,
    },
    /// Malformed TOML, unknown keys, wrong types, or text that is not
    /// UTF-8.
    #[error("{origin}:{line}:{column}: {message}{}", excerpt(.source_line))]
    Syntax {
        /// The file, or the name given to [`Policy::parse`](crate::Policy::parse).
        origin: String,
        /// 1-based; 0 when unknown.
        line: usize,
        /// 1-based, in characters.
        column: usize,
        /// What is wrong, naming the key when there is one.
        message: String,
        /// The offending line as written (empty when unknown).
        source_line: String,
        /// What the TOML parser or the UTF-8 decoder reported.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Well-formed TOML that is not a valid policy (bad regex, duplicate or
    /// contradictory rules, ...). Lists every problem found.
    #[error("{}", issues_text(.origin, .issues))]
    Invalid {
        /// The file, or the name given to [`Policy::parse`](crate::Policy::parse).
        origin: String,
        /// In file order.
        issues: Vec<Issue>,
    },
    /// An overlay (a file with `extends`), or the policy it extends, is
    /// in a place the sandboxed child could write (or another user could):
    /// loading it would let the run rewrite its own rules.
    #[error(
        "overlay {path}: {why}; keep overlays in a directory only root or this supervisor's user can write, outside the project root"
    )]
    UnsafeOverlay {
        /// The file, or the directory on its path, that is not safe.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// `extends` names neither a shipped policy nor a file, or overlays
    /// extend each other too deeply.
    #[error("{origin}: extends {extends:?}: {why}")]
    Extends {
        /// The overlay.
        origin: String,
        /// As written.
        extends: String,
        /// What is wrong.
        why: String,
    },
    /// The policy does not decide its own examples as written.
    #[error("{}", examples_text(.origin, .failures))]
    Examples {
        /// The file, or the name given to [`Policy::parse`](crate::Policy::parse).
        origin: String,
        /// Every example that failed, in file order.
        failures: Vec<ExampleFailure>,
    },
}

fn excerpt(line: &str) -> String {
    if line.trim().is_empty() {
        String::new()
    } else {
        format!("\n    | {line}")
    }
}

fn issues_text(origin: &str, issues: &[Issue]) -> String {
    let mut out = String::new();
    for (i, issue) in issues.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!(
            "{origin}:{}: `{}`: {}",
            issue.line, issue.key, issue.message
        ));
    }
    out
}

fn examples_text(origin: &str, failures: &[ExampleFailure]) -> String {
    let mut out = format!(
        "{origin}: {} example(s) are not decided as written, so the policy is not loaded:",
        failures.len()
    );
    for f in failures {
        out.push_str(&format!(
            "\n{origin}:{}: `{}`: expected {}, got {}",
            f.line, f.command, f.expected, f.got
        ));
    }
    out
}

/// Offsets of line starts, built once per file so that naming the line of
/// each rule and example stays linear in the file's size (a scan per lookup
/// was a third of the CLI's start-up).
pub(crate) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { starts }
    }

    /// 1-based line of a byte offset.
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|s| *s <= offset)
    }
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
    let col = before.rfind('\n').map_or(before.chars().count(), |nl| {
        before[nl + 1..].chars().count()
    }) + 1;
    (line, col)
}

pub(crate) fn line_text(text: &str, line: usize) -> String {
    text.lines()
        .nth(line.saturating_sub(1))
        .unwrap_or("")
        .to_string()
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Allow => "allow",
            Verdict::RequireApproval => "require_approval",
            Verdict::Deny => "deny",
        })
    }
}
