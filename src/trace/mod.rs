//! Traces: JSONL evidence of every call, decision and result.
//!
//! One event per line, appended and flushed as it happens, so a crash loses
//! at most the line being written. A trace starts with a header (schema and
//! agent-exec versions, policy name and hash, tool schema hash, start time,
//! kernel, Landlock ABI); each call then yields a `tool_call`, a
//! `policy_decision` and exactly one `tool_result`. Arguments are stored as
//! a hash plus a redacted preview unless `record_full` is set, and secrets
//! are scrubbed before anything is written (see [`Redactor`]).
//!
//! Writers: [`Tracer`] (one file) and [`TraceDir`] (a file per session),
//! both [`TraceSink`]s, the seam through which a service reports its calls.
//! Readers: [`audit()`] checks invariants, [`story()`] tells a trace as a
//! readable story, [`Replayer`] serves recorded results, [`read_trace`]
//! parses one. The format is documented in `docs/trace.md`.

mod approval;
mod audit;
mod audit_provenance;
mod event;
mod otlp;
mod redact;
mod replay;
mod sink;
mod story;
pub(crate) mod time;
mod writer;

use std::path::PathBuf;

use sha2::{Digest, Sha256};

pub use approval::{ApprovalAction, ApprovalEvent, EVENT_APPROVAL, RecordedApproval};
pub use audit::{AuditOptions, AuditReport, Issue, IssueKind, audit};
pub use audit_provenance::{AssumedArgument, SessionProvenance};
pub use event::{
    Event, LineProblem, RecordedCall, RecordedDecision, RecordedHeader, RecordedResult,
    TRACE_SCHEMA_VERSION, TraceFile, parse_line, parse_trace, read_trace,
};
pub use otlp::{ExportCounts, export_otlp_json};
pub use redact::{REDACTED, Redactor, is_secret_name};
pub use replay::{KeyUsage, ReplayAnswer, ReplayMode, ReplaySummary, Replayer, unrecorded_result};
pub use sink::TraceSink;
pub use story::story;
pub use writer::{MAX_OPEN_SESSION_TRACES, TraceDir, Tracer};

/// What the caller knows about the run; the writer adds the agent-exec
/// version, kernel release, start time and run id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeader {
    pub policy_name: String,
    pub policy_sha256: String,
    pub tool_schema_sha256: String,
    pub landlock_abi: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceOptions {
    /// Store full (redacted) arguments and full results, as replay needs.
    pub record_full: bool,
    /// Environment variables whose values are scrubbed wherever they appear
    /// (in addition to every variable whose name looks secret).
    pub secret_names: Vec<String>,
    /// Start a new segment file once the current one reaches this size.
    pub rotate_bytes: Option<u64>,
}

/// Why a trace could not be written, read or replayed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot {action} trace {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "trace {path} has no header line (expected a first line with \"event\":\"trace_header\")"
    )]
    NoHeader { path: PathBuf },
    #[error(
        "trace {path} cannot be replayed: it was written without record_full, so it holds argument hashes and previews but not the results; record the session again with --record"
    )]
    NotRecorded { path: PathBuf },
    #[error(
        "strict replay refused: trace {path} was recorded with {what} {recorded}, but the current {what} is {current}; use the same {what} or --replay-mode lenient"
    )]
    HashMismatch {
        path: PathBuf,
        what: &'static str,
        recorded: String,
        current: String,
    },
    #[error("cannot write the story: {0}")]
    Output(#[source] std::io::Error),
}

impl TraceError {
    fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> TraceError {
        TraceError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// SHA-256 (hex) of the canonical JSON of `args`: object keys sorted, no
/// whitespace. The same call hashes the same whatever key order a client
/// used, which is what replay keys on.
pub fn args_hash(args: &serde_json::Value) -> String {
    let mut hasher = Sha256::new();
    let mut w = HashWriter(&mut hasher);
    // Writing into a hasher cannot fail.
    let _ = write_canonical(&mut w, args);
    hex::encode(hasher.finalize())
}

/// The canonical JSON text [`args_hash`] hashes.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    let _ = write_canonical(&mut out, value);
    String::from_utf8(out).unwrap_or_default()
}

struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// Written by hand rather than relying on serde_json's map order, which
// flips to insertion order when any crate in the build enables
// `preserve_order`.
fn write_canonical(out: &mut dyn std::io::Write, value: &serde_json::Value) -> std::io::Result<()> {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.write_all(b"{")?;
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, k)?;
                out.write_all(b":")?;
                if let Some(v) = map.get(k) {
                    write_canonical(out, v)?;
                }
            }
            out.write_all(b"}")
        }
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical(out, v)?;
            }
            out.write_all(b"]")
        }
        scalar => serde_json::to_writer(out, scalar).map_err(std::io::Error::other),
    }
}

/// A trace and its rotated successors (`NAME.1.EXT`, `NAME.2.EXT`, ...),
/// in order, as far as they exist.
pub fn segment_files(path: &std::path::Path) -> Vec<PathBuf> {
    let mut out = vec![path.to_path_buf()];
    for n in 1.. {
        let next = writer::segment_path(path, n);
        if !next.exists() {
            break;
        }
        out.push(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn args_hash_ignores_key_order_and_whitespace() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b": [1, {"y":2,"x":1}], "a": "s"}"#).unwrap();
        let b = json!({"a": "s", "b": [1, {"x": 1, "y": 2}]});
        assert_eq!(args_hash(&a), args_hash(&b));
        assert_eq!(canonical_json(&a), r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#);
        assert_ne!(
            args_hash(&a),
            args_hash(&json!({"a": "t", "b": [1, {"x": 1, "y": 2}]}))
        );
        assert_eq!(args_hash(&a).len(), 64);
    }
}
