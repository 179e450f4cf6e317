//! The JSONL line formats: what the writer emits and what the readers
//! (audit, story, replay) accept.
//!
//! Field names follow the OpenTelemetry GenAI semantic conventions where
//! one exists (`gen_ai.tool.name`, `gen_ai.tool.call.id`,
//! `gen_ai.operation.name`, `gen_ai.conversation.id`) so traces can be
//! mapped onto spans without a dictionary. Readers take every field as
//! optional-with-default where that is harmless, so an older or damaged
//! trace is still audited rather than rejected.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::{RiskLevel, Verdict};
use crate::result::{ArgProvenance, ErrorType, SandboxSummary, ToolResult};

/// Bumped whenever a trace field changes meaning or disappears.
pub const TRACE_SCHEMA_VERSION: u32 = 1;

/// `gen_ai.operation.name` for every call event.
pub const OPERATION_EXECUTE_TOOL: &str = "execute_tool";

pub const EVENT_HEADER: &str = "trace_header";
pub const EVENT_TOOL_CALL: &str = "tool_call";
pub const EVENT_POLICY_DECISION: &str = "policy_decision";
pub const EVENT_TOOL_RESULT: &str = "tool_result";

// ---- write side: borrowed, so emitting a line copies nothing -------------

#[derive(Serialize)]
pub(crate) struct HeaderLine<'a> {
    pub event: &'static str,
    pub schema_version: u32,
    pub agent_exec_version: &'static str,
    pub run_id: &'a str,
    pub policy_name: &'a str,
    pub policy_sha256: &'a str,
    pub tool_schema_sha256: &'a str,
    pub start_time: &'a str,
    pub start_time_unix_ms: u64,
    pub host_kernel: &'a str,
    pub landlock_abi: u32,
    pub record_full: bool,
    /// 0 for the first file of a trace, n for its n-th rotated successor.
    pub segment: u32,
}

#[derive(Serialize)]
pub(crate) struct CallLine<'a> {
    pub event: &'static str,
    pub ts: &'a str,
    pub ts_unix_ms: u64,
    #[serde(rename = "gen_ai.operation.name")]
    pub operation: &'static str,
    pub run_id: &'a str,
    #[serde(
        rename = "gen_ai.conversation.id",
        skip_serializing_if = "Option::is_none"
    )]
    pub session: Option<&'a str>,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: &'a str,
    #[serde(rename = "gen_ai.tool.name")]
    pub tool: &'a str,
    pub args_hash: &'a str,
    pub args_preview: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<&'a Value>,
    pub deadline_ms: u64,
}

#[derive(Serialize)]
pub(crate) struct DecisionLine<'a> {
    pub event: &'static str,
    pub ts: &'a str,
    pub ts_unix_ms: u64,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: &'a str,
    pub decision: Verdict,
    pub rule: &'a str,
    pub risk_level: RiskLevel,
    pub reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<&'a str>,
    pub read_only: bool,
    pub approval_asked: bool,
    pub approval_given: Option<bool>,
}

#[derive(Serialize)]
pub(crate) struct ResultLine<'a> {
    pub event: &'static str,
    pub ts: &'a str,
    pub ts_unix_ms: u64,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: &'a str,
    pub status: &'static str,
    pub error_type: Option<ErrorType>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub policy_decision: Option<Verdict>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<&'a SandboxSummary>,
    /// Argument provenance: the request's path arguments, tagged.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub provenance: &'a [ArgProvenance],
    /// The whole (redacted) result, only when recording for replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a ToolResult>,
    /// How the call was served, when the writer was told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<&'a str>,
}

// ---- read side -------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct RecordedHeader {
    pub schema_version: u32,
    pub agent_exec_version: String,
    pub run_id: String,
    pub policy_name: String,
    pub policy_sha256: String,
    pub tool_schema_sha256: String,
    pub start_time: String,
    pub start_time_unix_ms: u64,
    pub host_kernel: String,
    pub landlock_abi: u32,
    pub record_full: bool,
    pub segment: u32,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecordedCall {
    #[serde(default)]
    pub ts: String,
    #[serde(default)]
    pub ts_unix_ms: u64,
    #[serde(default)]
    pub run_id: String,
    #[serde(rename = "gen_ai.conversation.id", default)]
    pub session: Option<String>,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: String,
    #[serde(rename = "gen_ai.tool.name")]
    pub tool: String,
    pub args_hash: String,
    #[serde(default)]
    pub args_preview: String,
    #[serde(default)]
    pub args: Option<Value>,
    #[serde(default)]
    pub deadline_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecordedDecision {
    #[serde(default)]
    pub ts_unix_ms: u64,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: String,
    pub decision: Verdict,
    #[serde(default)]
    pub rule: String,
    pub risk_level: Option<RiskLevel>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub approval_asked: bool,
    #[serde(default)]
    pub approval_given: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecordedResult {
    #[serde(default)]
    pub ts: String,
    #[serde(default)]
    pub ts_unix_ms: u64,
    #[serde(rename = "gen_ai.tool.call.id")]
    pub call_id: String,
    #[serde(default)]
    pub status: String,
    /// Kept as text: an error kind added later must not make old readers
    /// reject the line.
    #[serde(default)]
    pub error_type: Option<String>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    #[serde(default)]
    pub duration_ms: u64,
    #[serde(default)]
    pub stdout_bytes: u64,
    #[serde(default)]
    pub stderr_bytes: u64,
    #[serde(default)]
    pub stdout_truncated: bool,
    #[serde(default)]
    pub stderr_truncated: bool,
    #[serde(default)]
    pub policy_decision: Option<Verdict>,
    #[serde(default)]
    pub duplicate: bool,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub sandbox: Option<SandboxSummary>,
    #[serde(default)]
    pub provenance: Vec<ArgProvenance>,
    #[serde(default)]
    pub result: Option<ToolResult>,
    /// How the call was served (`direct`, with the reason a configured
    /// daemon was not used), when the writer said.
    #[serde(default)]
    pub via: Option<String>,
}

/// One parsed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Header(RecordedHeader),
    Call(RecordedCall),
    Decision(RecordedDecision),
    Result(Box<RecordedResult>),
    /// A step of an out-of-band approval.
    Approval(super::approval::RecordedApproval),
    /// A well-formed line of a kind this version does not know.
    Other(String),
}

/// Parses one line; the error text says what is wrong with it.
pub fn parse_line(line: &str) -> Result<Event, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let kind = value
        .get("event")
        .and_then(Value::as_str)
        .ok_or_else(|| "no \"event\" field".to_string())?
        .to_string();
    let bad = |e: serde_json::Error| format!("bad {kind} event: {e}");
    Ok(match kind.as_str() {
        EVENT_HEADER => Event::Header(serde_json::from_value(value).map_err(bad)?),
        EVENT_TOOL_CALL => Event::Call(serde_json::from_value(value).map_err(bad)?),
        EVENT_POLICY_DECISION => Event::Decision(serde_json::from_value(value).map_err(bad)?),
        EVENT_TOOL_RESULT => Event::Result(Box::new(serde_json::from_value(value).map_err(bad)?)),
        super::approval::EVENT_APPROVAL => {
            Event::Approval(serde_json::from_value(value).map_err(bad)?)
        }
        _ => Event::Other(kind),
    })
}

/// A line that could not be used, by 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineProblem {
    pub line: usize,
    /// `truncated` (last line without its newline: the writer died mid-line)
    /// or `invalid`.
    pub kind: &'static str,
    pub message: String,
}

/// A whole trace file, parsed leniently.
#[derive(Debug, Clone, Default)]
pub struct TraceFile {
    pub events: Vec<(usize, Event)>,
    pub problems: Vec<LineProblem>,
}

/// Reads and parses a trace file. Only I/O errors fail; damaged lines are
/// collected as problems.
pub fn read_trace(path: &std::path::Path) -> std::io::Result<TraceFile> {
    let bytes = std::fs::read(path)?;
    Ok(parse_trace(&bytes))
}

/// Parses trace bytes (see [`read_trace`]).
pub fn parse_trace(bytes: &[u8]) -> TraceFile {
    let mut out = TraceFile::default();
    let ends_with_newline = bytes.last() == Some(&b'\n');
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if ends_with_newline || bytes.is_empty() {
        lines.pop();
    }
    let count = lines.len();
    for (i, raw) in lines.into_iter().enumerate() {
        let line_no = i + 1;
        let last_unterminated = i + 1 == count && !ends_with_newline;
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t.trim_end_matches('\r'),
            Err(e) => {
                out.problems.push(LineProblem {
                    line: line_no,
                    kind: "invalid",
                    message: format!("not UTF-8: {e}"),
                });
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match parse_line(text) {
            Ok(ev) if !last_unterminated => out.events.push((line_no, ev)),
            Ok(_) => out.problems.push(LineProblem {
                line: line_no,
                kind: "truncated",
                message: "last line has no newline: the writer stopped mid-line".into(),
            }),
            Err(msg) if last_unterminated => out.problems.push(LineProblem {
                line: line_no,
                kind: "truncated",
                message: format!("last line cut short ({msg})"),
            }),
            Err(msg) => out.problems.push(LineProblem {
                line: line_no,
                kind: "invalid",
                message: msg,
            }),
        }
    }
    out
}
