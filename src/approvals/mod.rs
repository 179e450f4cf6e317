//! Approvals a human gives out of band.
//!
//! When the policy says `require_approval` and no approver answers on the
//! spot, a service with a state directory records a pending approval bound
//! to the exact request, and answers `APPROVAL_REQUIRED` with its id. A
//! human lists pending approvals (`agent-exec approvals`), and approves or
//! rejects one (`agent-exec approve`/`reject`); the agent then resends the
//! very same request with the id, and it runs once.
//!
//! An approval is bound to the caller's session as the server knows it
//! (peer uid and label), the canonical arguments' hash, the resolved
//! working directory and the policy's hash, and it lapses after the
//! policy's `[approvals] ttl_secs`. Any difference, a second use or a
//! lapsed id is refused with its own error type.
//!
//! Who may decide: the uids of the policy's `[approvals] approvers` (by
//! default the supervisor's own uid and root). The caller's uid is the
//! kernel's: the process's real uid, and the state directory is private
//! to the supervisor's uid (mode 0700), so no other uid reaches the store
//! at all; see `crate::approve_cli` for the checks.

mod overlay;

pub use overlay::{AMENDMENTS_FILE, Amendment, amendment_for, amendments_path};
pub(crate) use overlay::{LiveAmendments, appended, save};

use serde::{Deserialize, Serialize};

use crate::policy::RiskLevel;
use crate::request::SessionId;

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Nobody has decided yet.
    Pending,
    /// Approved, not used yet.
    Approved,
    /// Rejected.
    Rejected,
    /// Approved and used by one call.
    Used,
}

impl ApprovalState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Used => "used",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<ApprovalState> {
        Some(match s {
            "pending" => ApprovalState::Pending,
            "approved" => ApprovalState::Approved,
            "rejected" => ApprovalState::Rejected,
            "used" => ApprovalState::Used,
            _ => return None,
        })
    }
}

/// One approval, as the state store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRecord {
    pub id: String,
    /// The session that asked: the caller's uid and its label.
    pub uid: u32,
    pub session: String,
    /// The canonical arguments' hash (as traces and idempotency keys use).
    pub args_hash: String,
    /// The resolved working directory.
    pub cwd: String,
    /// The (amended) policy's hash when the request was decided.
    pub policy_sha256: String,
    /// The base policy's hash and name (without amendments).
    pub base_policy_sha256: String,
    pub policy_name: String,
    /// The command as it would run, unescaped (render it with [`render`]).
    pub command: String,
    /// Whether `command` is a shell string (else an argv, shell-quoted).
    pub shell: bool,
    pub rule: String,
    pub risk: RiskLevel,
    pub reason: String,
    /// The uids that may decide.
    pub approvers: Vec<u32>,
    pub created_ms: u64,
    pub expires_ms: u64,
    pub state: ApprovalState,
    pub decided_by: Option<u32>,
    pub decided_ms: Option<u64>,
    /// The call that ran under it.
    pub used_by: Option<String>,
}

impl ApprovalRecord {
    pub fn is_expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_ms
    }

    /// The session as [`SessionId`].
    pub fn session_id(&self) -> SessionId {
        SessionId::new(self.uid, Some(&self.session))
    }
}

/// What a request that names an approval must match.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    pub session: &'a SessionId,
    pub args_hash: &'a str,
    pub cwd: &'a str,
    pub policy_sha256: &'a str,
}

/// Why a request may not run under the approval it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UseRefusal {
    /// No approval has this id.
    Unknown,
    /// Nobody has decided yet.
    Pending {
        expires_ms: u64,
    },
    Rejected {
        by: Option<u32>,
    },
    Expired {
        expires_ms: u64,
    },
    /// Already used, by this call.
    Used {
        by_call: Option<String>,
    },
    /// The request differs: `what` names the first difference.
    Mismatch {
        what: &'static str,
    },
}

/// What using an approval came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UseOutcome {
    /// The approval was granted and is now spent on this call.
    Granted(Box<ApprovalRecord>),
    Refused(UseRefusal),
}

/// Why a human's decision was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideRefusal {
    Unknown,
    /// The deciding uid is not one of the approvers.
    NotApprover {
        uid: u32,
        approvers: Vec<u32>,
    },
    /// Already decided (or used).
    Decided(ApprovalState),
    Expired,
}

impl std::fmt::Display for DecideRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecideRefusal::Unknown => write!(f, "no approval has this id"),
            DecideRefusal::NotApprover { uid, approvers } => write!(
                f,
                "uid {uid} may not decide this approval (the policy's approvers are {approvers:?})"
            ),
            DecideRefusal::Decided(s) => write!(f, "this approval is already {}", s.as_str()),
            DecideRefusal::Expired => write!(f, "this approval has expired"),
        }
    }
}

/// A fresh approval id: `ap-` and 128 random bits in hex, so ids can be
/// neither guessed nor enumerated.
pub(crate) fn new_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(format!("ap-{}", hex::encode(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_and_well_formed() {
        let a = new_id().unwrap();
        let b = new_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 32);
        assert!(a.starts_with("ap-"));
    }

    #[test]
    fn states_round_trip() {
        for s in [
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Rejected,
            ApprovalState::Used,
        ] {
            assert_eq!(ApprovalState::parse(s.as_str()), Some(s));
        }
        assert_eq!(ApprovalState::parse("x"), None);
    }
}
