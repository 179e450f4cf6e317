//! Approvals asked through the MCP client (`elicitation/create`): the
//! human answers in the agent host's own UI.
//!
//! The service asks its [`Approver`] from a blocking thread; this one
//! sends the elicitation on the server's runtime and waits for the answer
//! with a deadline. Only an explicit accept with `approve: true` runs the
//! command; a decline, a cancel, an error or no answer in time refuses it.
//! A client that did not advertise elicitation is not asked at all: the
//! call is refused with `APPROVAL_REQUIRED`, as without a human.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{Peer, RoleServer};

use crate::service::terminal::visible;
use crate::service::{Approval, ApprovalRequest, Approver};

/// The client of this server's one session, once it has connected.
#[derive(Default)]
pub struct PeerSlot(OnceLock<Peer<RoleServer>>);

impl PeerSlot {
    /// Remembers the session's client; the first one stays.
    pub fn set(&self, peer: &Peer<RoleServer>) {
        let _ = self.0.get_or_init(|| peer.clone());
    }

    fn get(&self) -> Option<&Peer<RoleServer>> {
        self.0.get()
    }
}

/// Asks the human through the MCP client's elicitation.
#[derive(Clone)]
pub struct ElicitationApprover {
    peer: Arc<PeerSlot>,
    runtime: Arc<OnceLock<tokio::runtime::Handle>>,
    timeout: Duration,
}

impl ElicitationApprover {
    pub fn new(peer: Arc<PeerSlot>, timeout: Duration) -> ElicitationApprover {
        ElicitationApprover {
            peer,
            runtime: Arc::new(OnceLock::new()),
            timeout,
        }
    }

    /// The runtime the server's transport runs on; until it is attached
    /// nobody can be asked.
    pub fn attach(&self, runtime: tokio::runtime::Handle) {
        let _ = self.runtime.set(runtime);
    }
}

/// The field the human sets to run the command.
const APPROVE_FIELD: &str = "approve";

/// The text the client shows: the rule, the risk, the reason and the
/// command, each with its control, bidi and invisible characters escaped
/// (the terminal prompt's rendering), so what is shown is what runs.
pub fn elicitation_message(request: &ApprovalRequest<'_>) -> String {
    let d = request.decision;
    format!(
        "agent-exec: approval required ({:?} risk, rule {}): {}\ncommand: {}\ncwd: {}\nRun it?",
        d.risk,
        visible(&d.rule),
        visible(&d.reason),
        visible(&request.command_line()),
        visible(&request.cwd.to_string_lossy()),
    )
}

fn elicitation_params(request: &ApprovalRequest<'_>) -> Option<ElicitRequestParams> {
    let schema = ElicitationSchema::builder()
        .required_bool_property(APPROVE_FIELD, |b| {
            b.description("Run this command once (default: no)")
                .with_default(false)
        })
        .build()
        .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: elicitation_message(request),
        requested_schema: schema,
    })
}

impl Approver for ElicitationApprover {
    fn approve(&self, request: &ApprovalRequest<'_>) -> Approval {
        let (Some(peer), Some(runtime)) = (self.peer.get(), self.runtime.get()) else {
            return Approval::Unavailable;
        };
        if peer.supported_elicitation_modes().is_empty() {
            return Approval::Unavailable;
        }
        let Some(params) = elicitation_params(request) else {
            return Approval::Denied;
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let peer = peer.clone();
        let timeout = self.timeout;
        runtime.spawn(async move {
            let answer = peer
                .create_elicitation_with_timeout(params, Some(timeout))
                .await;
            let _ = tx.send(answer);
        });
        // The SDK times the request out itself; this bound only guards
        // against an answer that never comes back at all.
        match rx.recv_timeout(timeout + Duration::from_secs(5)) {
            Ok(Ok(result)) => {
                let yes = result.action == ElicitationAction::Accept
                    && result
                        .content
                        .as_ref()
                        .and_then(|c| c.get(APPROVE_FIELD))
                        .and_then(serde_json::Value::as_bool)
                        == Some(true);
                if yes {
                    Approval::Approved
                } else {
                    Approval::Denied
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "elicitation failed: the call is refused");
                Approval::Denied
            }
            Err(_) => Approval::Denied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Decision, RiskLevel, Verdict};
    use crate::request::CommandSpec;
    use std::path::Path;

    #[test]
    fn the_message_shows_escapes_not_their_effect() {
        let d = Decision {
            verdict: Verdict::RequireApproval,
            rule: "runners\u{202e}".into(),
            risk: RiskLevel::High,
            reason: "Running code\x1b[2K".into(),
            token: None,
            read_only: false,
            needs_shell: true,
            injected: Vec::new(),
            needs_key: false,
            suggestion: None,
        };
        let cmd = CommandSpec::Shell("rm -rf x\u{200b} # \r\x1b[1Acat README.md".into());
        let req = ApprovalRequest {
            call_id: "c",
            session: None,
            command: &cmd,
            cwd: Path::new("/p"),
            decision: &d,
        };
        let m = elicitation_message(&req);
        assert_eq!(
            m,
            "agent-exec: approval required (High risk, rule runners\\u{202e}): Running code\\x1b[2K\n\
             command: rm -rf x\\u{200b} # \\x0d\\x1b[1Acat README.md\ncwd: /p\nRun it?"
        );
        assert!(elicitation_params(&req).is_some());
    }

    #[test]
    fn nobody_is_asked_before_a_client_connects() {
        let a = ElicitationApprover::new(Arc::new(PeerSlot::default()), Duration::from_secs(1));
        let d = Decision {
            verdict: Verdict::RequireApproval,
            rule: "r".into(),
            risk: RiskLevel::High,
            reason: "x".into(),
            token: None,
            read_only: false,
            needs_shell: false,
            injected: Vec::new(),
            needs_key: false,
            suggestion: None,
        };
        let cmd = CommandSpec::Argv(vec!["true".into()]);
        let req = ApprovalRequest {
            call_id: "c",
            session: None,
            command: &cmd,
            cwd: Path::new("/"),
            decision: &d,
        };
        assert_eq!(a.approve(&req), Approval::Unavailable);
    }
}
