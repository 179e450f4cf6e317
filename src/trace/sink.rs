//! The seam between the service and whatever records its calls.

use serde_json::Value;

use super::writer::{TraceDir, Tracer};
use crate::policy::Decision;
use crate::result::ToolResult;

/// Receives the evidence of every call a service handles, in order: one
/// `tool_call` when the call arrives, at most one `policy_decision` once
/// the policy (and any approver) decided, and exactly one `tool_result`.
///
/// [`Tracer`] (one JSONL file) and [`TraceDir`] (one JSONL file per
/// session) are the shipped sinks; an embedder may forward the events to
/// its own log or telemetry instead. A sink is called from concurrent calls
/// and must never fail the call it describes: the run has already happened,
/// so a sink logs or counts its own errors.
pub trait TraceSink: Send + Sync {
    /// A call arrived. `args` are the canonical arguments (secrets still in
    /// them: redacting is the sink's job); `deadline_ms` is relative to now.
    fn tool_call(
        &self,
        call_id: &str,
        session: Option<&str>,
        tool: &str,
        args: &Value,
        deadline_ms: u64,
    );

    /// The policy decided; `approval_asked` and `approved` say whether an
    /// approver was asked and what it answered.
    fn policy_decision(
        &self,
        call_id: &str,
        session: Option<&str>,
        decision: &Decision,
        approval_asked: bool,
        approved: Option<bool>,
    );

    /// The call's one answer.
    fn tool_result(&self, call_id: &str, session: Option<&str>, result: &ToolResult);
}

impl TraceSink for Tracer {
    fn tool_call(
        &self,
        call_id: &str,
        session: Option<&str>,
        tool: &str,
        args: &Value,
        deadline_ms: u64,
    ) {
        Tracer::tool_call(self, call_id, session, tool, args, deadline_ms);
    }

    fn policy_decision(
        &self,
        call_id: &str,
        _session: Option<&str>,
        decision: &Decision,
        approval_asked: bool,
        approved: Option<bool>,
    ) {
        Tracer::policy_decision(self, call_id, decision, approval_asked, approved);
    }

    fn tool_result(&self, call_id: &str, _session: Option<&str>, result: &ToolResult) {
        Tracer::tool_result(self, call_id, result);
    }
}

/// Each event goes to its session's file (`default` without a session).
/// A file that cannot be opened loses its events, with a logged error, and
/// the call goes on.
impl TraceSink for TraceDir {
    fn tool_call(
        &self,
        call_id: &str,
        session: Option<&str>,
        tool: &str,
        args: &Value,
        deadline_ms: u64,
    ) {
        if let Some(t) = self.session_tracer(session) {
            t.tool_call(call_id, session, tool, args, deadline_ms);
        }
    }

    fn policy_decision(
        &self,
        call_id: &str,
        session: Option<&str>,
        decision: &Decision,
        approval_asked: bool,
        approved: Option<bool>,
    ) {
        if let Some(t) = self.session_tracer(session) {
            t.policy_decision(call_id, decision, approval_asked, approved);
        }
    }

    fn tool_result(&self, call_id: &str, session: Option<&str>, result: &ToolResult) {
        if let Some(t) = self.session_tracer(session) {
            t.tool_result(call_id, result);
        }
    }
}

impl TraceDir {
    fn session_tracer(&self, session: Option<&str>) -> Option<std::sync::Arc<Tracer>> {
        match self.for_session(session.unwrap_or("default")) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(error = %e, "cannot open the session trace");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{RiskLevel, Verdict};
    use crate::trace::{TraceHeader, TraceOptions, read_trace};

    fn header() -> TraceHeader {
        TraceHeader {
            policy_name: "p".into(),
            policy_sha256: "a".repeat(64),
            tool_schema_sha256: "b".repeat(64),
            landlock_abi: 0,
        }
    }

    /// Drives one call through a sink the way the service does.
    fn one_call(sink: &dyn TraceSink, call_id: &str, session: Option<&str>) {
        let decision = Decision {
            verdict: Verdict::Allow,
            rule: "r".into(),
            risk: RiskLevel::Low,
            reason: "fine".into(),
            token: None,
            read_only: true,
            needs_shell: false,
            injected: Vec::new(),
        };
        sink.tool_call(
            call_id,
            session,
            "run_shell",
            &serde_json::json!({"command": "ls"}),
            5,
        );
        sink.policy_decision(call_id, session, &decision, false, None);
        sink.tool_result(call_id, session, &ToolResult::success(call_id));
    }

    #[test]
    fn a_trace_dir_routes_every_event_to_its_session_file() {
        let dir = tempfile::tempdir().unwrap();
        let td = TraceDir::open(dir.path(), header(), TraceOptions::default()).unwrap();
        one_call(&td, "c1", Some("alpha"));
        one_call(&td, "c2", None);
        let alpha = read_trace(&td.session_path("alpha")).unwrap();
        let default = read_trace(&td.session_path("default")).unwrap();
        // Header plus the call's three events, in each file.
        assert_eq!(alpha.events.len(), 4);
        assert_eq!(default.events.len(), 4);
        let text = std::fs::read_to_string(td.session_path("alpha")).unwrap();
        assert!(
            text.contains("\"c1\"") && !text.contains("\"c2\""),
            "{text}"
        );
    }

    #[test]
    fn a_tracer_writes_one_line_per_event_whatever_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let t = Tracer::create(&path, header(), TraceOptions::default()).unwrap();
        one_call(&t, "c1", Some("s"));
        one_call(&t, "c2", None);
        assert_eq!(read_trace(&path).unwrap().events.len(), 7);
    }
}
