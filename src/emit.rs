//! How the command-line front ends print a result: one JSON line, or for a
//! person the command's output and a one-line summary. Shared by
//! `agent-exec` and `agent-exec-client`, so a call answered through
//! either prints the same bytes and exits with the same status.

use std::io::Write;

use crate::result::{ErrorType, ToolResult};
use crate::service::terminal::{visible, visible_lines};

/// How a result is printed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    // (Plain comments: a doc comment here would become each value's help
    // text in `--help`, the man page and the completions.)
    // One ToolResult as a JSON line on stdout.
    Json,
    // The command's output, then a summary line on stderr.
    Human,
}

/// Prints a result the way the user asked and returns the exit status.
pub fn emit(result: &ToolResult, format: Format) -> i32 {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => {
            let line = serde_json::to_string(result).unwrap_or_else(|e| {
                format!(r#"{{"ok":false,"error_type":"INTERNAL_ERROR","message":"cannot serialize the result: {e}"}}"#)
            });
            let _ = writeln!(out, "{line}");
        }
        // A person reads this on a terminal: the command's escape
        // sequences, bidi overrides and invisible characters are shown,
        // not obeyed, so output cannot rewrite what is on the screen.
        Format::Human => {
            let _ = out.write_all(visible_lines(&result.stdout).as_bytes());
            let _ = out.flush();
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(visible_lines(&result.stderr).as_bytes());
            let _ = writeln!(err, "{}", visible(&summary_line(result)));
        }
    }
    result.cli_exit_code()
}

fn summary_line(r: &ToolResult) -> String {
    let mut s = String::from("agent-exec: ");
    match r.error_type {
        None => s.push_str(&format!("ok, exit 0, {} ms", r.duration_ms)),
        Some(e) => {
            let name = serde_json::to_value(e)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            s.push_str(&format!("{name}: {}", r.message));
            if let Some(rule) = &r.matched_rule {
                s.push_str(&format!(" [rule {rule}]"));
            }
            if let Some(sugg) = &r.suggestion {
                s.push_str(&format!(" — {sugg}"));
            }
        }
    }
    if r.stdout_truncated || r.stderr_truncated {
        s.push_str(&format!(
            " (output truncated: {} + {} bytes)",
            r.stdout_bytes, r.stderr_bytes
        ));
    }
    s
}

/// A refusal of the command line itself (nothing ran), told in `format`.
pub fn fail(error_type: ErrorType, message: String, format: Format) -> i32 {
    let r = ToolResult::refusal("none", error_type, message);
    if format == Format::Human {
        eprintln!("{}", visible(&summary_line(&r)));
        r.cli_exit_code()
    } else {
        eprintln!("agent-exec: {}", r.message);
        emit(&r, format)
    }
}
