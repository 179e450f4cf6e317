//! The `approval` trace event: every step of an out-of-band approval
//! (requested, approved, rejected, used, refused, amended) with who took
//! it, so an audit can tell an approval used twice, a run under a refused
//! one, or an approval no call asked for.

use serde::{Deserialize, Serialize};

pub const EVENT_APPROVAL: &str = "approval";

/// What happened to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    /// A call needed one; the approval was created pending.
    Requested,
    /// A human approved it.
    Approved,
    /// A human rejected it.
    Rejected,
    /// A call ran under it.
    Used,
    /// A call named it and was refused (mismatch, expired, used...).
    Refused,
    /// A human turned it into a policy amendment.
    Amended,
}

/// One approval step, as a service or the approval commands report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalEvent {
    pub action: ApprovalAction,
    pub approval_id: String,
    /// The call that asked for, used or was refused the approval.
    #[serde(
        rename = "gen_ai.tool.call.id",
        skip_serializing_if = "Option::is_none"
    )]
    pub call_id: Option<String>,
    /// Who took the step: the deciding human's uid for approved, rejected
    /// and amended; the calling session's uid otherwise.
    pub uid: u32,
    /// The session that asked (its label).
    pub session: String,
    pub args_hash: String,
    pub rule: String,
    /// The error type of a refusal, the saved rule's id of an amendment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// An `approval` line as read back.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RecordedApproval {
    #[serde(default)]
    pub ts_unix_ms: u64,
    pub action: ApprovalAction,
    pub approval_id: String,
    #[serde(rename = "gen_ai.tool.call.id", default)]
    pub call_id: Option<String>,
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub session: String,
    #[serde(default)]
    pub args_hash: String,
    #[serde(default)]
    pub rule: String,
    #[serde(default)]
    pub detail: Option<String>,
}

/// The line as written: the event with its kind and time.
#[derive(Serialize)]
pub(crate) struct ApprovalLine<'a> {
    pub event: &'static str,
    pub ts: &'a str,
    pub ts_unix_ms: u64,
    #[serde(flatten)]
    pub approval: &'a ApprovalEvent,
}
