//! Export of a trace as OTLP/JSON (an `ExportTraceServiceRequest`), one
//! span per tool call, following the OpenTelemetry GenAI semantic
//! conventions for tool execution.
//!
//! Each span is `execute_tool <tool>` of kind INTERNAL with
//! `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id` and
//! `gen_ai.conversation.id`, `error.type` when the call failed, and the
//! policy decision, the sandbox layers and the result under `agent_exec.*`.
//! Only what the trace holds is exported, and the trace was redacted when
//! it was written: a secret that never reached the trace cannot reach the
//! export. Ids are derived from the trace (the trace id from the run id,
//! the span id from the call id), so exporting twice gives the same spans
//! and a collector can deduplicate them.
//!
//! Byte ids are lowercase hex, as OTLP/JSON requires (not the base64 of
//! protobuf's generic JSON mapping).

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::event::{
    Event, RecordedCall, RecordedDecision, RecordedHeader, RecordedResult, read_trace,
};

/// `SPAN_KIND_INTERNAL`: the tool runs inside the agent's process tree.
const SPAN_KIND_INTERNAL: u64 = 1;
const STATUS_CODE_UNSET: u64 = 0;
const STATUS_CODE_ERROR: u64 = 2;

/// What an export read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportCounts {
    pub spans: usize,
    /// Calls without a recorded result (the writer stopped first); exported
    /// as error spans marked `agent_exec.incomplete`.
    pub incomplete: usize,
    /// Lines of the trace that could not be read.
    pub damaged_lines: usize,
}

/// Reads the traces (each with its rotated segments) and returns the
/// `ExportTraceServiceRequest` as JSON, with what was exported.
pub fn export_otlp_json(paths: &[PathBuf]) -> std::io::Result<(Value, ExportCounts)> {
    let mut spans = Vec::new();
    let mut counts = ExportCounts::default();
    for path in paths {
        for segment in super::segment_files(path) {
            let file = read_trace(&segment)?;
            counts.damaged_lines += file.problems.len();
            spans_of(
                file.events.into_iter().map(|(_, e)| e),
                &mut spans,
                &mut counts,
            );
        }
    }
    counts.spans = spans.len();
    let request = json!({
        "resourceSpans": [{
            "resource": {
                "attributes": [
                    attr("service.name", s("agent-exec")),
                    attr("service.version", s(env!("CARGO_PKG_VERSION"))),
                ]
            },
            "scopeSpans": [{
                "scope": { "name": "agent-exec", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }]
        }]
    });
    Ok((request, counts))
}

/// A call while its decision and result are still to come.
struct Open {
    header: Option<RecordedHeader>,
    call: RecordedCall,
    decision: Option<RecordedDecision>,
}

fn spans_of(events: impl Iterator<Item = Event>, out: &mut Vec<Value>, counts: &mut ExportCounts) {
    let mut header: Option<RecordedHeader> = None;
    let mut open: HashMap<String, Open> = HashMap::new();
    // Calls in the order they started, so the export follows the trace.
    let mut order: Vec<String> = Vec::new();
    let mut done: HashMap<String, Value> = HashMap::new();
    for event in events {
        match event {
            Event::Header(h) => header = Some(h),
            Event::Call(c) => {
                order.push(c.call_id.clone());
                open.insert(
                    c.call_id.clone(),
                    Open {
                        header: header.clone(),
                        call: c,
                        decision: None,
                    },
                );
            }
            Event::Decision(d) => {
                if let Some(o) = open.get_mut(&d.call_id) {
                    o.decision = Some(d);
                }
            }
            Event::Result(r) => {
                if let Some(o) = open.remove(&r.call_id) {
                    done.insert(r.call_id.clone(), span(&o, Some(&r)));
                }
            }
            // Human decisions on approvals are not tool calls: they stay in
            // the trace (and the audit), not in the span export.
            Event::Approval(_) | Event::Other(_) => {}
        }
    }
    for id in order {
        if let Some(span) = done.remove(&id) {
            out.push(span);
        } else if let Some(o) = open.remove(&id) {
            counts.incomplete += 1;
            out.push(span(&o, None));
        }
    }
}

fn span(o: &Open, result: Option<&RecordedResult>) -> Value {
    let c = &o.call;
    let start_ms = c.ts_unix_ms;
    let end_ms = match result {
        Some(r) if r.ts_unix_ms >= start_ms => r.ts_unix_ms,
        Some(r) => start_ms + r.duration_ms,
        None => start_ms,
    };
    let mut attrs = vec![
        attr("gen_ai.operation.name", s("execute_tool")),
        attr("gen_ai.tool.name", s(&c.tool)),
        attr("gen_ai.tool.call.id", s(&c.call_id)),
        attr("gen_ai.tool.type", s("function")),
        attr("agent_exec.run_id", s(&c.run_id)),
        attr("agent_exec.args_hash", s(&c.args_hash)),
        attr("agent_exec.args_preview", s(&c.args_preview)),
    ];
    if let Some(session) = &c.session {
        attrs.push(attr("gen_ai.conversation.id", s(session)));
    }
    // Full arguments exist only in recording traces, already redacted.
    if let Some(args) = &c.args {
        attrs.push(attr(
            "gen_ai.tool.call.arguments",
            s(&super::canonical_json(args)),
        ));
    }
    if let Some(h) = &o.header {
        attrs.push(attr("agent_exec.policy.name", s(&h.policy_name)));
        attrs.push(attr("agent_exec.policy.sha256", s(&h.policy_sha256)));
        attrs.push(attr("os.version", s(&h.host_kernel)));
    }
    if let Some(d) = &o.decision {
        decision_attrs(d, &mut attrs);
    }
    let status = match result {
        Some(r) => {
            result_attrs(r, &mut attrs);
            match &r.error_type {
                Some(e) => {
                    attrs.push(attr("error.type", s(e)));
                    json!({ "code": STATUS_CODE_ERROR, "message": r.message })
                }
                None => json!({ "code": STATUS_CODE_UNSET }),
            }
        }
        None => {
            attrs.push(attr("agent_exec.incomplete", json!({ "boolValue": true })));
            attrs.push(attr("error.type", s("INCOMPLETE")));
            json!({ "code": STATUS_CODE_ERROR, "message": "the trace ends before this call's result" })
        }
    };
    json!({
        "traceId": hex_id(&c.run_id, 16),
        "spanId": hex_id(&c.call_id, 8),
        "name": format!("execute_tool {}", c.tool),
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": nanos(start_ms),
        "endTimeUnixNano": nanos(end_ms),
        "attributes": attrs,
        "status": status,
    })
}

fn decision_attrs(d: &RecordedDecision, attrs: &mut Vec<Value>) {
    attrs.push(attr("agent_exec.decision", s(&enum_text(&d.decision))));
    attrs.push(attr("agent_exec.rule", s(&d.rule)));
    if let Some(risk) = &d.risk_level {
        attrs.push(attr("agent_exec.risk_level", s(&enum_text(risk))));
    }
    attrs.push(attr("agent_exec.reason", s(&d.reason)));
    if let Some(t) = &d.token {
        attrs.push(attr("agent_exec.decided_by", s(t)));
    }
    attrs.push(attr("agent_exec.read_only", b(d.read_only)));
    attrs.push(attr("agent_exec.approval.asked", b(d.approval_asked)));
    if let Some(given) = d.approval_given {
        attrs.push(attr("agent_exec.approval.given", b(given)));
    }
}

fn result_attrs(r: &RecordedResult, attrs: &mut Vec<Value>) {
    attrs.push(attr("agent_exec.status", s(&r.status)));
    if let Some(code) = r.exit_code {
        attrs.push(attr("process.exit.code", int(i64::from(code))));
    }
    if let Some(sig) = r.signal {
        attrs.push(attr("agent_exec.signal", int(i64::from(sig))));
    }
    attrs.push(attr("agent_exec.duration_ms", uint(r.duration_ms)));
    attrs.push(attr("agent_exec.stdout_bytes", uint(r.stdout_bytes)));
    attrs.push(attr("agent_exec.stderr_bytes", uint(r.stderr_bytes)));
    attrs.push(attr(
        "agent_exec.output_truncated",
        b(r.stdout_truncated || r.stderr_truncated),
    ));
    if r.duplicate {
        attrs.push(attr("agent_exec.duplicate", b(true)));
    }
    if let Some(sb) = &r.sandbox {
        attrs.push(attr("agent_exec.sandbox.landlock", s(&sb.landlock)));
        attrs.push(attr(
            "agent_exec.sandbox.landlock_abi",
            uint(u64::from(sb.landlock_abi)),
        ));
        attrs.push(attr("agent_exec.sandbox.seccomp", b(sb.seccomp)));
        attrs.push(attr("agent_exec.sandbox.no_new_privs", b(sb.no_new_privs)));
        attrs.push(attr("agent_exec.sandbox.network", s(&sb.network)));
        attrs.push(attr("agent_exec.sandbox.uid", uint(u64::from(sb.uid))));
        attrs.push(attr("agent_exec.sandbox.limits", strings(&sb.limits)));
        attrs.push(attr(
            "agent_exec.sandbox.not_applied",
            strings(&sb.not_applied),
        ));
    }
}

fn attr(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

fn s(v: &str) -> Value {
    json!({ "stringValue": v })
}

fn b(v: bool) -> Value {
    json!({ "boolValue": v })
}

/// OTLP/JSON carries 64-bit integers as decimal strings.
fn int(v: i64) -> Value {
    json!({ "intValue": v.to_string() })
}

fn uint(v: u64) -> Value {
    json!({ "intValue": v.to_string() })
}

fn strings(v: &[String]) -> Value {
    let values: Vec<Value> = v.iter().map(|x| s(x)).collect();
    json!({ "arrayValue": { "values": values } })
}

fn nanos(ms: u64) -> String {
    (u128::from(ms) * 1_000_000).to_string()
}

/// The wire name of a serialisable enum (`allow`, `high`...).
fn enum_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `len` bytes of SHA-256 over `seed`, as hex; never all zeros (an invalid
/// id in OTLP), which SHA-256 output of this length is not in practice, but
/// the fallback keeps the guarantee unconditional.
fn hex_id(seed: &str, len: usize) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let mut bytes = digest[..len].to_vec();
    if bytes.iter().all(|&x| x == 0) {
        bytes[len - 1] = 1;
    }
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_hex_of_the_right_length() {
        assert_eq!(hex_id("run", 16).len(), 32);
        assert_eq!(hex_id("call", 8).len(), 16);
        assert_eq!(hex_id("run", 16), hex_id("run", 16));
        assert_ne!(hex_id("a", 8), hex_id("b", 8));
    }

    #[test]
    fn a_call_without_a_result_is_an_incomplete_error_span() {
        let lines = [
            r#"{"event":"tool_call","ts_unix_ms":1000,"run_id":"r","gen_ai.tool.call.id":"c1","gen_ai.tool.name":"run_shell","args_hash":"h"}"#,
            r#"{"event":"tool_call","ts_unix_ms":2000,"run_id":"r","gen_ai.tool.call.id":"c2","gen_ai.tool.name":"run_shell","args_hash":"h"}"#,
            r#"{"event":"tool_result","ts_unix_ms":2500,"gen_ai.tool.call.id":"c2","status":"ok","duration_ms":500}"#,
        ];
        let file = super::super::parse_trace((lines.join("\n") + "\n").as_bytes());
        let mut spans = Vec::new();
        let mut counts = ExportCounts::default();
        spans_of(
            file.events.into_iter().map(|(_, e)| e),
            &mut spans,
            &mut counts,
        );
        assert_eq!(spans.len(), 2);
        assert_eq!(counts.incomplete, 1);
        assert_eq!(spans[0]["status"]["code"], STATUS_CODE_ERROR);
        assert_eq!(spans[0]["startTimeUnixNano"], spans[0]["endTimeUnixNano"]);
        assert_eq!(spans[1]["status"]["code"], STATUS_CODE_UNSET);
        assert_eq!(spans[1]["endTimeUnixNano"], "2500000000");
        assert_eq!(spans[0]["traceId"], spans[1]["traceId"]);
    }
}
