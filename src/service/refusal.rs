//! Why a call stopped short of a run, and the one place that says so in a
//! [`ToolResult`].
//!
//! Each stage of the pipeline returns a [`Refusal`] naming what it found
//! (a bad field, a path outside the root, a denied command, a spent
//! budget...). Only [`Refusal::into_result`] turns one into the answer a
//! client sees, so every refusal of a kind reads the same whichever stage
//! or transport met it.

use std::path::PathBuf;

use crate::policy::{Decision, Verdict};
use crate::result::{ErrorType, ToolResult};

/// A call that ends without its command running to an outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A field is missing, malformed or out of the policy's bounds; the
    /// message starts with the field's name.
    InvalidArguments(String),
    /// The command is not valid shell. `at` is the byte the lexer stopped
    /// at, when it knows.
    Parse { error: String, at: Option<usize> },
    /// The working directory resolves outside the project root.
    CwdOutside {
        cwd: String,
        resolved: PathBuf,
        root: PathBuf,
    },
    /// The policy denies the command.
    Denied { reason: String },
    /// The command needs a human's approval and did not get it. `asked`:
    /// an approver was asked; `answer`: what it said.
    NotApproved {
        asked: bool,
        answer: Option<bool>,
        reason: String,
    },
    /// The command needs a human's approval: one was recorded pending,
    /// for a human to decide out of band.
    ApprovalRequested {
        id: String,
        expires_ms: u64,
        reason: String,
        state_dir: PathBuf,
    },
    /// The request named an approval it may not run under.
    ApprovalRefused {
        id: String,
        why: crate::approvals::UseRefusal,
    },
    /// Replay has no recording for the call and may not run it.
    Unrecorded { args_hash: String },
    /// The idempotency key was used before with other arguments.
    KeyReuse { stored_args_hash: String },
    /// A call with the same idempotency key is still running.
    KeyInFlight,
    /// The session's side-effect budget is spent.
    BudgetExhausted(String),
    /// The command needs a shell and the host has no bash.
    NoShell,
    /// The program is not on the policy's PATH.
    ProgramNotFound { program: String, path: String },
    /// The sandbox could not be set up for this run.
    SandboxUnavailable(String),
    /// agent-exec itself failed (state store, an inconsistency).
    Internal(String),
    /// A command that writes names paths the session never saw
    /// (argument provenance under `enforce`).
    AssumedArgument {
        message: String,
        suggestion: String,
        argument: String,
    },
}

impl Refusal {
    /// The answer for this refusal. `decision` is the policy's, when the
    /// call got that far: a refusal made after the decision reports it, so
    /// a client always sees which rule applied.
    pub(crate) fn into_result(self, call_id: &str, decision: Option<&Decision>) -> ToolResult {
        let mut r = match self {
            Refusal::InvalidArguments(m) => {
                ToolResult::refusal(call_id, ErrorType::InvalidArguments, m)
            }
            Refusal::Parse { error, at } => {
                let mut r = ToolResult::refusal(
                    call_id,
                    ErrorType::ParseError,
                    format!("cannot parse the command: {error}"),
                );
                r.decided_by = at.map(|p| format!("byte {p}"));
                r
            }
            Refusal::CwdOutside {
                cwd,
                resolved,
                root,
            } => {
                let mut r = ToolResult::refusal(
                    call_id,
                    ErrorType::PermissionDenied,
                    format!(
                        "cwd {cwd:?} resolves to {} which is outside the project root {}",
                        resolved.display(),
                        root.display()
                    ),
                );
                r.decided_by = Some(cwd);
                r.matched_rule = Some("builtin:cwd-outside-root".into());
                r
            }
            Refusal::Denied { reason } => ToolResult::refusal(
                call_id,
                ErrorType::PermissionDenied,
                format!("refused by policy: {reason}"),
            ),
            Refusal::NotApproved {
                asked,
                answer,
                reason,
            } => {
                let message = if asked {
                    format!("the human did not approve this command ({reason})")
                } else {
                    format!(
                        "this command needs a human's approval and this run is non-interactive: {reason}"
                    )
                };
                let mut r = ToolResult::refusal(call_id, ErrorType::ApprovalRequired, message);
                r.approved = answer;
                r
            }
            Refusal::ApprovalRequested {
                id,
                expires_ms,
                reason,
                state_dir,
            } => {
                let expires = crate::trace::time::rfc3339(expires_ms);
                let mut r = ToolResult::refusal(
                    call_id,
                    ErrorType::ApprovalRequired,
                    format!(
                        "this command needs a human's approval ({reason}). Approval {id} is pending until {expires}: a human can approve it with `agent-exec approve --state {} {id}` (or reject it). Once approved, send the very same request again with \"approval_id\": \"{id}\"; it then runs once.",
                        state_dir.display()
                    ),
                );
                r.approval_id = Some(id);
                r.approval_expires_at = Some(expires);
                r
            }
            Refusal::ApprovalRefused { id, why } => approval_refused(call_id, id, why),
            // One wording for the replay's refusal, the replayer's own.
            Refusal::Unrecorded { args_hash } => {
                crate::trace::unrecorded_result(call_id, "run_shell", &args_hash)
            }
            Refusal::KeyReuse { stored_args_hash } => ToolResult::refusal(
                call_id,
                ErrorType::InvalidArguments,
                format!(
                    "idempotency_key: this key was already used for different arguments (args hash {stored_args_hash}); use a new key for a new call"
                ),
            ),
            Refusal::KeyInFlight => ToolResult::refusal(
                call_id,
                ErrorType::Busy,
                "idempotency_key: a call with this key is still running; wait for its result",
            ),
            Refusal::AssumedArgument {
                message,
                suggestion,
                argument,
            } => {
                let mut r = ToolResult::refusal(call_id, ErrorType::AssumedArgument, message)
                    .with_suggestion(suggestion);
                r.decided_by = Some(argument);
                r
            }
            Refusal::BudgetExhausted(reason) => {
                ToolResult::refusal(call_id, ErrorType::BudgetExhausted, reason)
            }
            Refusal::NoShell => ToolResult::refusal(
                call_id,
                ErrorType::SandboxUnavailable,
                "this command needs a shell and no bash was found (/bin/bash, /usr/bin/bash); send one plain command instead",
            ),
            Refusal::ProgramNotFound { program, path } => {
                let mut r = ToolResult::refusal(
                    call_id,
                    ErrorType::CommandNotFound,
                    format!("{program}: not found on the policy's PATH ({path})"),
                );
                // What a shell reports for a missing program.
                r.exit_code = Some(127);
                r
            }
            Refusal::SandboxUnavailable(e) => ToolResult::refusal(
                call_id,
                ErrorType::SandboxUnavailable,
                format!("the sandbox could not be prepared for this run, so nothing ran: {e}"),
            ),
            Refusal::Internal(m) => ToolResult::refusal(call_id, ErrorType::InternalError, m),
        };
        if let Some(d) = decision {
            apply_decision(&mut r, d);
        }
        r
    }
}

impl Refusal {
    /// The error type's wire name, for traces.
    pub(crate) fn error_name(&self) -> &'static str {
        use crate::approvals::UseRefusal as U;
        match self {
            Refusal::ApprovalRefused { why, .. } => match why {
                U::Unknown => "INVALID_ARGUMENTS",
                U::Pending { .. } => "APPROVAL_PENDING",
                U::Rejected { .. } => "APPROVAL_REJECTED",
                U::Expired { .. } => "APPROVAL_EXPIRED",
                U::Used { .. } => "APPROVAL_USED",
                U::Mismatch { .. } => "APPROVAL_MISMATCH",
            },
            _ => "REFUSED",
        }
    }
}

/// Why a request may not run under the approval it names, as a result.
fn approval_refused(call_id: &str, id: String, why: crate::approvals::UseRefusal) -> ToolResult {
    use crate::approvals::UseRefusal as U;
    let at = crate::trace::time::rfc3339;
    let (kind, message) = match why {
        U::Unknown => (
            ErrorType::InvalidArguments,
            format!(
                "approval_id: no approval has the id {id}; send the request without approval_id to ask for one"
            ),
        ),
        U::Pending { expires_ms } => (
            ErrorType::ApprovalPending,
            format!(
                "approval {id} has not been decided yet; it lapses at {}",
                at(expires_ms)
            ),
        ),
        U::Rejected { by } => (
            ErrorType::ApprovalRejected,
            match by {
                Some(uid) => {
                    format!("a human (uid {uid}) rejected approval {id}; the command did not run")
                }
                None => format!("approval {id} was rejected; the command did not run"),
            },
        ),
        U::Expired { expires_ms } => (
            ErrorType::ApprovalExpired,
            format!(
                "approval {id} lapsed at {}; the command did not run",
                at(expires_ms)
            ),
        ),
        U::Used { by_call } => (
            ErrorType::ApprovalUsed,
            format!(
                "approval {id} was already used (by call {}); an approval runs its command once",
                by_call.as_deref().unwrap_or("unknown")
            ),
        ),
        U::Mismatch { what } => (
            ErrorType::ApprovalMismatch,
            format!(
                "approval {id} was given for another request: the {what} differ from what was approved; nothing ran"
            ),
        ),
    };
    let mut r = ToolResult::refusal(call_id, kind, message);
    r.approval_id = Some(id);
    r
}

/// Copies the policy's verdict, rule, risk and reason into a result. The
/// token that decided is kept only when the result names none of its own
/// (a parse error names a byte, a cwd refusal the directory).
pub(crate) fn apply_decision(r: &mut ToolResult, d: &Decision) {
    r.policy_decision = Some(d.verdict);
    r.risk_level = Some(d.risk);
    r.risk_reason = Some(d.reason.clone());
    r.matched_rule = Some(d.rule.clone());
    if r.decided_by.is_none() {
        r.decided_by = d.token.clone();
    }
    r.approval_required = d.verdict == Verdict::RequireApproval;
    // A refusal the policy knows another form for teaches that form, and
    // another form working is what makes it recoverable.
    if let Some(s) = &d.suggestion
        && matches!(
            r.error_type,
            Some(ErrorType::PermissionDenied | ErrorType::ApprovalRequired)
        )
    {
        r.suggestion = Some(format!("{s}."));
        r.recoverable = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RiskLevel;

    fn decision(verdict: Verdict) -> Decision {
        Decision {
            verdict,
            rule: "rule-1".into(),
            risk: RiskLevel::High,
            reason: "because".into(),
            token: Some("tok".into()),
            read_only: false,
            needs_shell: false,
            needs_key: false,
            injected: Vec::new(),
            suggestion: None,
        }
    }

    #[test]
    fn a_refusal_with_an_alternative_teaches_it_and_is_recoverable() {
        let mut d = decision(Verdict::RequireApproval);
        let plain = Refusal::NotApproved {
            asked: false,
            answer: None,
            reason: "x".into(),
        }
        .into_result("c", Some(&d));
        assert!(!plain.recoverable);
        d.suggestion = Some("allowed forms of `git`: `git status`".into());
        let taught = Refusal::NotApproved {
            asked: false,
            answer: None,
            reason: "x".into(),
        }
        .into_result("c", Some(&d));
        assert!(taught.recoverable);
        assert_eq!(
            taught.suggestion.as_deref(),
            Some("allowed forms of `git`: `git status`.")
        );
        assert_eq!(taught.error_type, Some(ErrorType::ApprovalRequired));
        // A failure of the run itself keeps its own advice.
        let mut ran = ToolResult::refusal("c", ErrorType::NonzeroExit, "exit 1");
        apply_decision(&mut ran, &d);
        assert_eq!(
            ran.suggestion.as_deref(),
            Some(ErrorType::NonzeroExit.suggestion())
        );
    }

    #[test]
    fn a_refusal_before_the_decision_names_no_rule() {
        let r = Refusal::InvalidArguments("command: empty".into()).into_result("c1", None);
        assert_eq!(r.call_id, "c1");
        assert_eq!(r.error_type, Some(ErrorType::InvalidArguments));
        assert_eq!(r.message, "command: empty");
        assert_eq!((r.policy_decision, r.matched_rule), (None, None));
    }

    #[test]
    fn a_refusal_after_the_decision_reports_it() {
        let d = decision(Verdict::Deny);
        let r = Refusal::Denied {
            reason: "because".into(),
        }
        .into_result("c1", Some(&d));
        assert_eq!(r.error_type, Some(ErrorType::PermissionDenied));
        assert_eq!(r.message, "refused by policy: because");
        assert_eq!(r.policy_decision, Some(Verdict::Deny));
        assert_eq!(r.matched_rule.as_deref(), Some("rule-1"));
        assert_eq!(r.decided_by.as_deref(), Some("tok"));
        assert!(!r.approval_required);
    }

    #[test]
    fn an_approval_refusal_says_whether_anyone_was_asked() {
        let d = decision(Verdict::RequireApproval);
        let silent = Refusal::NotApproved {
            asked: false,
            answer: None,
            reason: "x".into(),
        }
        .into_result("c", Some(&d));
        assert!(
            silent.message.contains("non-interactive"),
            "{}",
            silent.message
        );
        assert_eq!(silent.approved, None);
        assert!(silent.approval_required);
        let refused = Refusal::NotApproved {
            asked: true,
            answer: Some(false),
            reason: "x".into(),
        }
        .into_result("c", Some(&d));
        assert!(
            refused.message.contains("did not approve"),
            "{}",
            refused.message
        );
        assert_eq!(refused.approved, Some(false));
    }

    #[test]
    fn a_stage_token_wins_over_the_decision_token() {
        let d = decision(Verdict::Allow);
        let r = Refusal::Parse {
            error: "unterminated quote".into(),
            at: Some(4),
        }
        .into_result("c", Some(&d));
        assert_eq!(r.decided_by.as_deref(), Some("byte 4"));
        let r = Refusal::CwdOutside {
            cwd: "up".into(),
            resolved: "/etc".into(),
            root: "/p".into(),
        }
        .into_result("c", None);
        assert_eq!(r.decided_by.as_deref(), Some("up"));
        assert_eq!(r.matched_rule.as_deref(), Some("builtin:cwd-outside-root"));
    }

    #[test]
    fn a_missing_program_exits_127_like_a_shell() {
        let r = Refusal::ProgramNotFound {
            program: "tree".into(),
            path: "/usr/bin".into(),
        }
        .into_result("c", None);
        assert_eq!(r.exit_code, Some(127));
        assert_eq!(r.cli_exit_code(), 127);
    }
}
