//! Stage 4: everything between the policy's decision and a run. In order:
//! replay (a recorded answer, or a refusal to run live), approval (only
//! for `require_approval`, see `pending.rs`), the verdict itself, then for
//! mutating calls the idempotency key and the session budget.

use std::path::Path;

use super::Service;
use super::refusal::Refusal;
use crate::policy::{Decision, Policy, Verdict};
use crate::request::{RunRequest, SessionId};
use crate::result::ToolResult;
use crate::store::Begin;
use crate::trace::ReplayAnswer;

/// The call being gated, as the gate and the trace know it.
pub(crate) struct GateCall<'a> {
    pub(crate) call_id: &'a str,
    pub(crate) req: &'a RunRequest,
    pub(crate) session: &'a SessionId,
    pub(crate) args_hash: &'a str,
    pub(crate) cwd: &'a Path,
    pub(crate) decision: &'a Decision,
    /// The policy the decision was made under (amendments included).
    pub(crate) policy: &'a Policy,
}

/// A call the gate let through.
pub(crate) struct Pass<'a> {
    /// The approver's answer, when one was asked.
    pub(crate) approved: Option<bool>,
    /// The call spends budget (the policy does not class it read-only).
    pub(crate) mutating: bool,
    /// The idempotency key this call reserved and must settle.
    pub(crate) reserved: Option<&'a str>,
    /// The out-of-band approval the call runs under.
    pub(crate) approval_id: Option<String>,
}

/// Why the gate stopped a call.
pub(crate) enum Stop<'a> {
    /// An answer that needs nothing more: a replayed or duplicate result.
    Answer(Box<ToolResult>),
    /// A refusal; `reserved` is the key it must settle, when the call had
    /// reserved one.
    Refused {
        refusal: Refusal,
        reserved: Option<&'a str>,
    },
}

impl From<Refusal> for Stop<'_> {
    fn from(refusal: Refusal) -> Self {
        Stop::Refused {
            refusal,
            reserved: None,
        }
    }
}

impl Service {
    pub(super) fn gate<'a>(&self, call: &GateCall<'a>) -> Result<Pass<'a>, Stop<'a>> {
        // Replay answers before anything can be asked or run.
        self.replay_gate(call)?;
        let answer = self.approval_step(call);
        let (asked, approved) = (answer.asked, answer.approved);
        if let Some(t) = &self.trace {
            t.policy_decision(call.call_id, call.session, call.decision, asked, approved);
        }
        if let Some(refusal) = answer.refusal {
            return Err(refusal.into());
        }
        verdict_gate(call.decision, asked, approved)?;
        let mutating = !call.decision.read_only;
        let reserved = if mutating {
            self.reserve_key(call)?
        } else {
            None
        };
        if mutating && let Err(refusal) = self.budget_gate(call.session) {
            return Err(Stop::Refused { refusal, reserved });
        }
        Ok(Pass {
            approved,
            mutating,
            reserved,
            approval_id: answer.approval_id,
        })
    }

    fn replay_gate(&self, call: &GateCall<'_>) -> Result<(), Stop<'static>> {
        let Some(replay) = &self.replay else {
            return Ok(());
        };
        match replay.replayer.answer("run_shell", call.args_hash) {
            ReplayAnswer::Recorded(mut recorded) => {
                recorded.call_id = call.call_id.to_string();
                if let Some(t) = &self.trace {
                    t.policy_decision(call.call_id, call.session, call.decision, false, None);
                }
                Err(Stop::Answer(Box::new(recorded)))
            }
            ReplayAnswer::Unrecorded if replay.may_run_live(call.decision.read_only) => Ok(()),
            ReplayAnswer::Unrecorded => Err(Refusal::Unrecorded {
                args_hash: call.args_hash.to_string(),
            }
            .into()),
        }
    }

    /// Reserves the call's idempotency key, or answers from it. Where keys
    /// are required (the daemon), a call the policy marks as changing
    /// state beyond ordinary work (a rule with `needs_key`: commits,
    /// history) is refused without one; any other mutating call may carry
    /// one and is then deduplicated.
    fn reserve_key<'a>(&self, call: &GateCall<'a>) -> Result<Option<&'a str>, Stop<'a>> {
        let key = call.req.idempotency_key.as_deref();
        if self.require_idempotency && call.decision.needs_key && key.is_none() {
            return Err(Refusal::InvalidArguments(format!(
                "args: `{}` changes state beyond ordinary work (rule {}), so the request must carry an idempotency_key (8-128 characters): make one per logical call and reuse it only to retry that same call",
                call.decision.token.as_deref().unwrap_or("this command"),
                call.decision.rule
            ))
            .into());
        }
        let (Some(store), Some(key)) = (&self.store, key) else {
            return Ok(None);
        };
        match store.begin(call.session, key, call.args_hash) {
            Ok(Begin::Fresh) => Ok(Some(key)),
            Ok(Begin::Duplicate(mut stored)) => {
                stored.duplicate = true;
                Err(Stop::Answer(Box::new(stored)))
            }
            Ok(Begin::KeyReuse { stored_args_hash }) => {
                Err(Refusal::KeyReuse { stored_args_hash }.into())
            }
            Ok(Begin::InFlight) => Err(Refusal::KeyInFlight.into()),
            Err(e) => Err(Refusal::Internal(format!("state store: {e}")).into()),
        }
    }

    fn budget_gate(&self, session: &SessionId) -> Result<(), Refusal> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        match store.budget_check(session, &self.budgets) {
            Ok(None) => Ok(()),
            Ok(Some(reason)) => Err(Refusal::BudgetExhausted(reason)),
            Err(e) => Err(Refusal::Internal(format!("state store: {e}"))),
        }
    }
}

/// Only `allow`, or `require_approval` with a yes, goes on.
fn verdict_gate(d: &Decision, asked: bool, approved: Option<bool>) -> Result<(), Refusal> {
    match d.verdict {
        Verdict::Deny => Err(Refusal::Denied {
            reason: d.reason.clone(),
        }),
        Verdict::RequireApproval if approved != Some(true) => Err(Refusal::NotApproved {
            asked,
            answer: approved,
            reason: d.reason.clone(),
        }),
        _ => Ok(()),
    }
}
