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
    pub message: String,
}

/// An `[[example]]` whose decision differs from what the policy decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleFailure {
    pub line: usize,
    pub command: String,
    pub expected: String,
    /// What the policy decided (verdict, rule), or the parse error.
    pub got: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("policy file {path} does not exist")]
    NotFound { path: String },
    #[error("cannot read policy file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Malformed TOML, unknown keys, wrong types.
    #[error("{origin}:{line}:{column}: {message}{}", excerpt(.source_line))]
    Syntax {
        origin: String,
        line: usize,
        column: usize,
        message: String,
        source_line: String,
    },
    /// Well-formed TOML that is not a valid policy (bad regex, duplicate or
    /// contradictory rules, ...). Lists every problem found.
    #[error("{}", issues_text(.origin, .issues))]
    Invalid { origin: String, issues: Vec<Issue> },
    /// The policy does not decide its own examples as written.
    #[error("{}", examples_text(.origin, .failures))]
    Examples {
        origin: String,
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
