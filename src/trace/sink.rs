//! The seam between the service and whatever records its calls.

use serde_json::Value;

use super::approval::ApprovalEvent;
use super::writer::{TraceDir, Tracer};
use crate::policy::Decision;
use crate::request::SessionId;
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
        session: &SessionId,
        tool: &str,
        args: &Value,
        deadline_ms: u64,
    );

    /// The policy decided; `approval_asked` and `approved` say whether an
    /// approver was asked and what it answered.
    fn policy_decision(
        &self,
        call_id: &str,
        session: &SessionId,
        decision: &Decision,
        approval_asked: bool,
        approved: Option<bool>,
    );

    /// The call's one answer.
    fn tool_result(&self, call_id: &str, session: &SessionId, result: &ToolResult);

    /// A step of an out-of-band approval of `session` (see
    /// [`ApprovalEvent`]). Sinks that keep no approvals ignore it.
    fn approval(&self, session: &SessionId, event: &ApprovalEvent) {
        let _ = (session, event);
    }
}

impl TraceSink for Tracer {
    fn tool_call(
        &self,
        call_id: &str,
        session: &SessionId,
        tool: &str,
        args: &Value,
        deadline_ms: u64,
    ) {
        Tracer::tool_call(self, call_id, session.label(), tool, args, deadline_ms);
    }

    fn policy_decision(
        &self,
        call_id: &str,
        _session: &SessionId,
        decision: &Decision,
        approval_asked: bool,
        approved: Option<bool>,
    ) {
        Tracer::policy_decision(self, call_id, decision, approval_asked, approved);
    }

    fn tool_result(&self, call_id: &str, _session: &SessionId, result: &ToolResult) {
        Tracer::tool_result(self, call_id, result);
    }

    fn approval(&self, _session: &SessionId, event: &ApprovalEvent) {
        Tracer::approval(self, event);
    }
}

/// Each event goes to its session's file (`default` without a label).
/// A file that cannot be opened loses its events, with a logged error, and
/// the call goes on.
impl TraceSink for TraceDir {
    fn tool_call(
        &self,
        call_id: &str,
        session: &SessionId,
        tool: &str,
        args: &Value,
        deadline_ms: u64,
    ) {
        if let Some(t) = self.session_tracer(session) {
            t.tool_call(call_id, session.label(), tool, args, deadline_ms);
        }
    }

    fn policy_decision(
        &self,
        call_id: &str,
        session: &SessionId,
        decision: &Decision,
        approval_asked: bool,
        approved: Option<bool>,
    ) {
        if let Some(t) = self.session_tracer(session) {
            t.policy_decision(call_id, decision, approval_asked, approved);
        }
    }

    fn tool_result(&self, call_id: &str, session: &SessionId, result: &ToolResult) {
        if let Some(t) = self.session_tracer(session) {
            t.tool_result(call_id, result);
        }
    }

    fn approval(&self, session: &SessionId, event: &ApprovalEvent) {
        if let Some(t) = self.session_tracer(session) {
            t.approval(event);
        }
    }
}

impl TraceDir {
    fn session_tracer(&self, session: &SessionId) -> Option<std::sync::Arc<Tracer>> {
        match self.tracer_for(session) {
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
    fn one_call(sink: &dyn TraceSink, call_id: &str, label: Option<&str>) {
        let me = nix::unistd::geteuid().as_raw();
        one_call_as(sink, call_id, &SessionId::new(me, label));
    }

    fn one_call_as(sink: &dyn TraceSink, call_id: &str, session: &SessionId) {
        let decision = Decision {
            verdict: Verdict::Allow,
            rule: "r".into(),
            risk: RiskLevel::Low,
            reason: "fine".into(),
            token: None,
            read_only: true,
            needs_shell: false,
            needs_key: false,
            injected: Vec::new(),
            suggestion: None,
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

    #[test]
    fn other_uids_trace_apart_from_the_owner_under_the_same_label() {
        let dir = tempfile::tempdir().unwrap();
        let td = TraceDir::open(dir.path(), header(), TraceOptions::default()).unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let other = me.wrapping_add(1);
        one_call_as(&td, "mine", &SessionId::new(me, Some("work")));
        one_call_as(&td, "theirs", &SessionId::new(other, Some("work")));
        let mine = std::fs::read_to_string(dir.path().join("work.jsonl")).unwrap();
        let theirs =
            std::fs::read_to_string(dir.path().join(format!("uid-{other}/work.jsonl"))).unwrap();
        assert!(mine.contains("\"mine\"") && !mine.contains("\"theirs\""));
        assert!(theirs.contains("\"theirs\"") && !theirs.contains("\"mine\""));
    }

    #[test]
    fn open_session_traces_are_bounded_and_reopen_where_they_left_off() {
        let dir = tempfile::tempdir().unwrap();
        let opts = TraceOptions {
            rotate_bytes: Some(600),
            ..TraceOptions::default()
        };
        let td = TraceDir::open(dir.path(), header(), opts)
            .unwrap()
            .with_max_open(3);
        // Enough calls for the first session to rotate.
        for n in 0..4 {
            one_call(&td, &format!("first-{n}"), Some("s0"));
        }
        let rotated = td.session_path("s0").with_file_name("s0.1.jsonl");
        assert!(rotated.exists());
        for n in 1..50 {
            one_call(&td, &format!("c{n}"), Some(&format!("s{n}")));
            assert!(td.open_count() <= 3, "{}", td.open_count());
        }
        // The least recently used went first; the last ones are open.
        one_call(&td, "again", Some("s0"));
        assert_eq!(td.open_count(), 3);
        let last = (1..)
            .map(|k| dir.path().join(format!("s0.{k}.jsonl")))
            .take_while(|p| p.exists())
            .last()
            .unwrap();
        let text = std::fs::read_to_string(&last).unwrap();
        assert!(
            text.contains("\"again\""),
            "the reopened trace went on in its last segment, {}",
            last.display()
        );
        let first = std::fs::read_to_string(td.session_path("s0")).unwrap();
        assert!(!first.contains("\"again\""), "{first}");
    }
}
