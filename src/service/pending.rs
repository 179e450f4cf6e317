//! The approval step of the gate, for `require_approval` decisions: an
//! approval the request names is spent if it matches; otherwise the
//! service's approver is asked; when nobody can answer on the spot and the
//! service keeps state, a pending approval bound to this exact request is
//! recorded for a human to decide out of band.

use super::approve::{Approval, ApprovalRequest};
use super::gate::GateCall;
use super::refusal::Refusal;
use super::{ApprovalHome, Service};
use crate::approvals::{ApprovalRecord, ApprovalState, Binding, UseOutcome, new_id};
use crate::policy::{CommandSpec, Verdict};
use crate::trace::{ApprovalAction, ApprovalEvent};

/// What the approval step came to.
#[derive(Default)]
pub(super) struct Answer {
    /// An approver (or a human, out of band) was asked.
    pub(super) asked: bool,
    pub(super) approved: Option<bool>,
    /// The out-of-band approval the call ran under.
    pub(super) approval_id: Option<String>,
    /// Why the call stops here, when it does.
    pub(super) refusal: Option<Refusal>,
}

impl Answer {
    fn refused(refusal: Refusal) -> Answer {
        Answer {
            refusal: Some(refusal),
            ..Answer::default()
        }
    }
}

impl Service {
    pub(super) fn approval_step(&self, call: &GateCall<'_>) -> Answer {
        if call.decision.verdict != Verdict::RequireApproval {
            return Answer::default();
        }
        // The human approves the command as it will run: with any flag
        // the policy adds. One that does not fit is not asked about (and
        // would not run).
        let Some(command) = call.decision.command_to_run(&call.req.command) else {
            return Answer::default();
        };
        if let Some(id) = &call.req.approval_id {
            return match &self.approvals {
                Some(home) => self.use_approval(call, home, id),
                None => Answer::refused(Refusal::InvalidArguments(
                    "approval_id: this server keeps no approvals (it has no state directory); send the request without it".into(),
                )),
            };
        }
        let request = ApprovalRequest {
            call_id: call.call_id,
            session: call.req.session.as_deref(),
            command: &command,
            cwd: call.cwd,
            decision: call.decision,
        };
        let answer = self.approver.approve(&request);
        if let (Approval::Unavailable, Some(home)) = (answer, &self.approvals) {
            return self.request_approval(call, home, &command);
        }
        let (asked, approved) = answer.recorded();
        Answer {
            asked,
            approved,
            ..Answer::default()
        }
    }

    fn binding<'a>(call: &'a GateCall<'_>, cwd: &'a str) -> Binding<'a> {
        Binding {
            session: call.session,
            args_hash: call.args_hash,
            cwd,
            policy_sha256: &call.policy.sha256,
        }
    }

    fn use_approval(&self, call: &GateCall<'_>, home: &ApprovalHome, id: &str) -> Answer {
        let cwd = call.cwd.display().to_string();
        let outcome = home
            .store
            .approval_use(id, &Self::binding(call, &cwd), call.call_id);
        match outcome {
            Ok(UseOutcome::Granted(record)) => {
                self.approval_event(call, id, ApprovalAction::Used, None);
                Answer {
                    asked: true,
                    approved: Some(true),
                    approval_id: Some(record.id),
                    refusal: None,
                }
            }
            Ok(UseOutcome::Refused(why)) => {
                let refusal = Refusal::ApprovalRefused {
                    id: id.to_string(),
                    why,
                };
                let kind = refusal.error_name();
                self.approval_event(call, id, ApprovalAction::Refused, Some(kind));
                Answer::refused(refusal)
            }
            Err(e) => Answer::refused(Refusal::Internal(format!("state store: {e}"))),
        }
    }

    fn request_approval(
        &self,
        call: &GateCall<'_>,
        home: &ApprovalHome,
        command: &CommandSpec,
    ) -> Answer {
        let id = match new_id() {
            Ok(id) => id,
            Err(e) => return Answer::refused(Refusal::Internal(format!("approval id: {e}"))),
        };
        let now = crate::trace::time::now_unix_ms();
        let (text, shell) = match command {
            CommandSpec::Shell(s) => (s.clone(), true),
            CommandSpec::Argv(v) => (shell_words::join(v), false),
        };
        let approvals = &self.policy.approvals;
        let d = call.decision;
        let record = ApprovalRecord {
            id: id.clone(),
            uid: call.session.uid(),
            session: call.session.label_or_default().to_string(),
            args_hash: call.args_hash.to_string(),
            cwd: call.cwd.display().to_string(),
            policy_sha256: call.policy.sha256.clone(),
            base_policy_sha256: self.policy.sha256.clone(),
            policy_name: self.policy.name.clone(),
            command: text,
            shell,
            rule: d.rule.clone(),
            risk: d.risk,
            reason: d.reason.clone(),
            approvers: approvals.approvers_for(nix::unistd::geteuid().as_raw()),
            created_ms: now,
            expires_ms: now.saturating_add(approvals.ttl_secs.saturating_mul(1000)),
            state: ApprovalState::Pending,
            decided_by: None,
            decided_ms: None,
            used_by: None,
        };
        if let Err(e) = home.store.approval_create(&record) {
            return Answer::refused(Refusal::Internal(format!("state store: {e}")));
        }
        self.approval_event(call, &id, ApprovalAction::Requested, None);
        Answer::refused(Refusal::ApprovalRequested {
            id,
            expires_ms: record.expires_ms,
            reason: d.reason.clone(),
            state_dir: home.dir.clone(),
        })
    }

    fn approval_event(
        &self,
        call: &GateCall<'_>,
        id: &str,
        action: ApprovalAction,
        detail: Option<&str>,
    ) {
        if let Some(t) = &self.trace {
            let event = ApprovalEvent {
                action,
                approval_id: id.to_string(),
                call_id: Some(call.call_id.to_string()),
                uid: call.session.uid(),
                session: call.session.label_or_default().to_string(),
                args_hash: call.args_hash.to_string(),
                rule: call.decision.rule.clone(),
                detail: detail.map(str::to_string),
            };
            t.approval(call.session, &event);
        }
    }
}
