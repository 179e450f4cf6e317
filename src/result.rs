//! The one structured answer every call produces, whatever the transport.
//!
//! A model reads `ok`, `error_type`, `recoverable` and `suggestion` to decide
//! its next step, so `ErrorType` is a stable, closed vocabulary and every kind
//! carries advice it can act on. The JSON shape is documented in
//! `docs/tool-result.md` and `docs/tool-result.schema.json`.

use serde::{Deserialize, Serialize};

use crate::policy::{RiskLevel, Verdict};

/// Bumped whenever a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 1;

/// Why a call did not succeed. Serialized in SCREAMING_SNAKE_CASE and never
/// renamed: models and clients match on these strings. New kinds may be
/// added, so code outside this crate matches with a fallback arm.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorType {
    InvalidArguments,
    ParseError,
    PermissionDenied,
    ApprovalRequired,
    CommandNotFound,
    CommandTimeout,
    NonzeroExit,
    KilledBySignal,
    OutputLimit,
    /// The run passed its memory cap and the kernel killed processes of it.
    MemoryLimit,
    SandboxViolation,
    /// A name lookup or connection failed because the run has no network
    /// (beyond the loopback ports a policy allows).
    NetworkDisabled,
    /// Exit status 1 of `grep` (and `egrep`, `fgrep`, `rg`), `diff`, `cmp`,
    /// `test` or `[` with nothing on stderr: no match, the inputs differ,
    /// or the condition is false. An answer, not a failure; `ok` is still
    /// false, as the status is not 0.
    NoMatch,
    SandboxUnavailable,
    BudgetExhausted,
    Busy,
    Cancelled,
    UnrecordedCall,
    /// A command that writes names a path no earlier result of the session
    /// showed (argument provenance, `[provenance] mode = "enforce"`).
    AssumedArgument,
    /// The policy file is missing or invalid, so nothing can run.
    PolicyError,
    InternalError,
    /// The request's `approval_id` names an approval nobody has decided yet.
    ApprovalPending,
    /// The human rejected the approval the request names.
    ApprovalRejected,
    /// The approval the request names lapsed before it was used.
    ApprovalExpired,
    /// The approval the request names was already used once.
    ApprovalUsed,
    /// The request differs from the one that was approved: arguments,
    /// session, working directory or policy.
    ApprovalMismatch,
}

impl ErrorType {
    /// Whether the same agent can reasonably get to success by changing what
    /// it sends (or by waiting), as opposed to needing a human or a new policy.
    pub fn recoverable(self) -> bool {
        match self {
            ErrorType::InvalidArguments
            | ErrorType::ParseError
            | ErrorType::CommandNotFound
            | ErrorType::CommandTimeout
            | ErrorType::NonzeroExit
            | ErrorType::OutputLimit
            | ErrorType::MemoryLimit
            | ErrorType::Busy
            | ErrorType::PermissionDenied
            | ErrorType::SandboxViolation
            | ErrorType::NetworkDisabled
            | ErrorType::NoMatch
            | ErrorType::KilledBySignal
            | ErrorType::ApprovalPending
            | ErrorType::ApprovalMismatch
            | ErrorType::AssumedArgument => true,
            ErrorType::ApprovalRequired
            | ErrorType::SandboxUnavailable
            | ErrorType::BudgetExhausted
            | ErrorType::Cancelled
            | ErrorType::UnrecordedCall
            | ErrorType::PolicyError
            | ErrorType::InternalError
            | ErrorType::ApprovalRejected
            | ErrorType::ApprovalExpired
            | ErrorType::ApprovalUsed => false,
        }
    }

    /// Advice a model can act on without further context.
    pub fn suggestion(self) -> &'static str {
        match self {
            ErrorType::InvalidArguments => {
                "Fix the named field (type, length or allowed value) and send the request again."
            }
            ErrorType::ParseError => {
                "The command is not valid shell: close every quote and bracket, or send a simpler command."
            }
            ErrorType::PermissionDenied => {
                "The policy refuses this command. Do not retry it as is; use a path inside the project root or an allowed command instead."
            }
            ErrorType::ApprovalRequired => {
                "A human must approve this command. When the result has an approval_id, ask the user to approve it (the message says how), then send the very same request again with that approval_id; otherwise use an allowed alternative."
            }
            ErrorType::ApprovalPending => {
                "Nobody has decided on this approval yet. Ask the user to approve or reject it, then send the same request with the same approval_id again; do not send it in a loop."
            }
            ErrorType::ApprovalRejected => {
                "The user rejected this command. Do not run it; choose another approach or ask the user what they want instead."
            }
            ErrorType::ApprovalExpired => {
                "The approval lapsed. Send the request again without approval_id to get a new one, and ask the user to decide sooner."
            }
            ErrorType::ApprovalUsed => {
                "An approval lets its command run once, and this one has run. To run the command again, send it without approval_id and ask the user for a new approval."
            }
            ErrorType::ApprovalMismatch => {
                "The approval covers another request: resend exactly the approved command with the same cwd, stdin, limits and session, or send this request without approval_id to ask for a new approval."
            }
            ErrorType::CommandNotFound => {
                "The program is not installed or not on the policy's PATH. Check the spelling or use another tool."
            }
            ErrorType::CommandTimeout => {
                "The command ran past its deadline and was killed with all its children. Narrow it (fewer files, a filter) or ask for a longer timeout within the policy's maximum."
            }
            ErrorType::NonzeroExit => {
                "The command ran and failed. Read stderr and fix the cause before retrying."
            }
            ErrorType::KilledBySignal => {
                "The command was killed by a signal (crash or resource limit). Read stderr; retrying unchanged will likely fail the same way."
            }
            ErrorType::OutputLimit => {
                "The command printed more than the hard output limit and was stopped. Filter its output (grep, head, a narrower path)."
            }
            ErrorType::MemoryLimit => {
                "The command's processes together used more memory than the run's cap, and the kernel killed some of them. Reduce the working set (smaller inputs, fewer parallel jobs such as make -j1, streaming instead of loading whole files), or ask the operator to raise memory_max_bytes in the policy's [sandbox] table."
            }
            ErrorType::SandboxViolation => {
                "The sandbox blocked an operation (a path outside the root, the network, or a privileged call). Stay inside the project root and work offline."
            }
            ErrorType::NetworkDisabled => {
                "This sandbox has no network, so retrying will not help. Work offline: use what is installed or vendored in the project, or ask the user to fetch it outside."
            }
            ErrorType::NoMatch => {
                "Not an error: the command ran correctly and answered no (no match, the inputs differ, or the condition is false). Act on that answer."
            }
            ErrorType::SandboxUnavailable => {
                "The kernel sandbox could not be set up on this host, so nothing ran. An operator must fix the host or the policy's enforcement setting."
            }
            ErrorType::BudgetExhausted => {
                "This session's side-effect budget is spent. Stop making changes and report to the user."
            }
            ErrorType::Busy => {
                "The server is at capacity. Wait briefly and retry the same request."
            }
            ErrorType::Cancelled => {
                "The call was cancelled before it finished; nothing more will run for it."
            }
            ErrorType::UnrecordedCall => {
                "Replay has no recorded result for this call. The session diverged from the recording."
            }
            ErrorType::AssumedArgument => {
                "This command writes to a path no earlier result showed. Look first (list the directory, or search for the file), then send the command again."
            }
            ErrorType::PolicyError => {
                "The policy is missing or invalid, so nothing ran. An operator must fix the file named in the message."
            }
            ErrorType::InternalError => {
                "agent-exec failed internally. Report the message to the operator; retrying may not help."
            }
        }
    }

    /// The process exit status the CLI uses for this outcome (coreutils
    /// `timeout`/`env` conventions), when the child's own status does not apply.
    pub fn cli_exit_code(self) -> i32 {
        match self {
            ErrorType::CommandTimeout => 124,
            ErrorType::PermissionDenied
            | ErrorType::ApprovalRequired
            | ErrorType::ApprovalPending
            | ErrorType::ApprovalRejected
            | ErrorType::ApprovalExpired
            | ErrorType::ApprovalUsed
            | ErrorType::ApprovalMismatch
            | ErrorType::BudgetExhausted
            | ErrorType::AssumedArgument => 126,
            ErrorType::CommandNotFound => 127,
            _ => 125,
        }
    }
}

/// How the kernel layers were applied to the child. Filled by the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSummary {
    /// Landlock ABI version the kernel offers (0: none).
    pub landlock_abi: u32,
    /// `full`, `partial` or `none`.
    pub landlock: String,
    pub seccomp: bool,
    pub no_new_privs: bool,
    /// `none`, or `loopback:PORT,...`.
    pub network: String,
    pub uid: u32,
    pub gid: u32,
    /// Limits actually applied, e.g. `rlimit_nofile=1024`, `cgroup_pids_max=256`.
    pub limits: Vec<String>,
    /// Layers that were requested but could not be applied (best-effort only).
    pub not_applied: Vec<String>,
    /// Setup problems that do not stop the run, e.g. the child user cannot
    /// write the root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl From<agent_exec_sandbox::Summary> for SandboxSummary {
    fn from(s: agent_exec_sandbox::Summary) -> Self {
        SandboxSummary {
            landlock_abi: s.landlock_abi,
            landlock: s.landlock,
            seccomp: s.seccomp,
            no_new_privs: s.no_new_privs,
            network: s.network,
            uid: s.uid,
            gid: s.gid,
            limits: s.limits,
            not_applied: s.not_applied,
            warnings: s.warnings,
        }
    }
}

/// Where a path argument of a request came from (argument provenance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvenanceTag {
    /// An earlier result of the session showed it.
    Observed,
    /// A new name directly inside a directory an earlier result listed.
    Invented,
    /// Neither: a guess.
    Assumed,
}

/// One path argument of a request, tagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgProvenance {
    /// The argument as the request wrote it.
    pub arg: String,
    /// The path it names, relative to the project root (`.` is the root;
    /// absolute outside it).
    pub path: String,
    pub tag: ProvenanceTag,
    /// The call whose result showed the path (or listed its directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The command writes, creates or removes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub write: bool,
}

/// One call's answer. Field order is the order a model reads best: verdict
/// first, then output, then detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub schema_version: u32,
    /// The caller's request id (daemon), echoed so out-of-order answers match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<serde_json::Value>,
    pub call_id: String,
    pub ok: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub error_type: Option<ErrorType>,
    pub message: String,
    pub recoverable: bool,
    pub suggestion: Option<String>,
    pub policy_decision: Option<Verdict>,
    pub risk_level: Option<RiskLevel>,
    pub risk_reason: Option<String>,
    pub matched_rule: Option<String>,
    /// The token (argument, path, operator) that decided, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    pub approval_required: bool,
    pub approved: Option<bool>,
    /// The approval a human may grant for this request (with
    /// `APPROVAL_REQUIRED`), or the one it ran or was refused under. Send
    /// it back with the very same request once approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// When `approval_id` lapses (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_expires_at: Option<String>,
    /// Names, never values, of variables withheld from the child.
    pub env_scrubbed: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxSummary>,
    /// True when an idempotency key matched an earlier call and nothing ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
    /// Argument provenance: one entry per path argument, when the policy's
    /// `[provenance]` mode is not `off`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<ArgProvenance>,
}

impl ToolResult {
    /// Every field at its neutral value; each public constructor sets the
    /// verdict fields together so they cannot disagree.
    fn blank(call_id: String) -> Self {
        ToolResult {
            schema_version: SCHEMA_VERSION,
            id: None,
            call_id,
            ok: false,
            exit_code: None,
            signal: None,
            duration_ms: 0,
            stdout: String::new(),
            stderr: String::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            stdout_bytes: 0,
            stderr_bytes: 0,
            error_type: None,
            message: String::new(),
            recoverable: false,
            suggestion: None,
            policy_decision: None,
            risk_level: None,
            risk_reason: None,
            matched_rule: None,
            decided_by: None,
            approval_required: false,
            approved: None,
            approval_id: None,
            approval_expires_at: None,
            env_scrubbed: Vec::new(),
            sandbox: None,
            duplicate: false,
            provenance: Vec::new(),
        }
    }

    /// A call that succeeded: `ok`, no error kind, no suggestion, an empty
    /// message. The caller fills in what ran (exit status, output, sandbox).
    pub fn success(call_id: impl Into<String>) -> Self {
        ToolResult {
            ok: true,
            recoverable: true,
            ..ToolResult::blank(call_id.into())
        }
    }

    /// A call that did not succeed, with `recoverable` and `suggestion`
    /// taken from `error_type`. Nothing ran unless the caller adds output:
    /// refusals use it as is, failed runs fill in what the command did.
    pub fn refusal(
        call_id: impl Into<String>,
        error_type: ErrorType,
        message: impl Into<String>,
    ) -> Self {
        let mut r = ToolResult::blank(call_id.into());
        r.set_error(error_type, message);
        r
    }

    /// The daemon's answer to `describe`: ok, exit status 0, the
    /// description as JSON text in `stdout`. `recoverable` is false there,
    /// as it has been since the protocol's first version (clients match the
    /// answer byte for byte); it names no run that could be retried.
    pub fn description(call_id: impl Into<String>, description: &serde_json::Value) -> Self {
        let stdout = description.to_string();
        ToolResult {
            ok: true,
            exit_code: Some(0),
            stdout_bytes: stdout.len() as u64,
            stdout,
            message: "describe: the tool definition, policy and limits are in stdout as JSON"
                .into(),
            ..ToolResult::blank(call_id.into())
        }
    }

    /// Replaces the error kind's generic advice with a more precise one
    /// (a stage that knows exactly what to change). A success has no
    /// suggestion, so this leaves one unchanged.
    pub fn with_suggestion(mut self, suggestion: impl Into<String>) -> Self {
        if self.error_type.is_some() {
            self.suggestion = Some(suggestion.into());
        }
        self
    }

    /// Sets the error kind together with the fields derived from it, so they
    /// can never disagree.
    pub fn set_error(&mut self, error_type: ErrorType, message: impl Into<String>) {
        self.ok = false;
        self.error_type = Some(error_type);
        self.message = message.into();
        self.recoverable = error_type.recoverable();
        self.suggestion = Some(error_type.suggestion().to_string());
    }

    /// The CLI's exit status for this result.
    pub fn cli_exit_code(&self) -> i32 {
        match self.error_type {
            None => self.exit_code.unwrap_or(0),
            Some(ErrorType::NonzeroExit) => self.exit_code.unwrap_or(1),
            Some(ErrorType::KilledBySignal) => 128 + self.signal.unwrap_or(0),
            Some(ErrorType::SandboxViolation | ErrorType::NetworkDisabled | ErrorType::NoMatch) => {
                match (self.exit_code, self.signal) {
                    (Some(code), _) => code,
                    (None, Some(sig)) => 128 + sig,
                    (None, None) => 125,
                }
            }
            Some(other) => other.cli_exit_code(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ErrorType; 24] = [
        ErrorType::InvalidArguments,
        ErrorType::ParseError,
        ErrorType::PermissionDenied,
        ErrorType::ApprovalRequired,
        ErrorType::CommandNotFound,
        ErrorType::CommandTimeout,
        ErrorType::NonzeroExit,
        ErrorType::KilledBySignal,
        ErrorType::OutputLimit,
        ErrorType::MemoryLimit,
        ErrorType::SandboxViolation,
        ErrorType::SandboxUnavailable,
        ErrorType::BudgetExhausted,
        ErrorType::Busy,
        ErrorType::Cancelled,
        ErrorType::UnrecordedCall,
        ErrorType::AssumedArgument,
        ErrorType::PolicyError,
        ErrorType::InternalError,
        ErrorType::ApprovalPending,
        ErrorType::ApprovalRejected,
        ErrorType::ApprovalExpired,
        ErrorType::ApprovalUsed,
        ErrorType::ApprovalMismatch,
    ];

    #[test]
    fn memory_limit_is_recoverable_and_says_what_to_change() {
        let e = ErrorType::MemoryLimit;
        assert_eq!(
            serde_json::to_value(e).unwrap(),
            serde_json::json!("MEMORY_LIMIT")
        );
        assert!(e.recoverable());
        assert!(e.suggestion().contains("memory_max_bytes"));
        assert!(e.suggestion().contains("working set"));
        assert_eq!(e.cli_exit_code(), 125);
    }

    #[test]
    fn a_refusal_takes_advice_and_recoverability_from_its_kind() {
        for e in ALL {
            let r = ToolResult::refusal("c", e, "why");
            assert!(!r.ok);
            assert_eq!(r.error_type, Some(e));
            assert_eq!(r.recoverable, e.recoverable(), "{e:?}");
            assert_eq!(r.suggestion.as_deref(), Some(e.suggestion()), "{e:?}");
            assert_eq!(r.message, "why");
        }
    }

    #[test]
    fn a_success_has_no_error_and_no_advice() {
        let r = ToolResult::success("c");
        assert!(r.ok && r.recoverable);
        assert_eq!((r.error_type, r.suggestion.as_deref()), (None, None));
        assert!(r.message.is_empty());
        assert_eq!(r.cli_exit_code(), 0);
    }

    #[test]
    fn set_error_turns_a_success_into_a_consistent_failure() {
        let mut r = ToolResult::success("c");
        r.set_error(ErrorType::ApprovalRequired, "ask");
        assert_eq!(
            r,
            ToolResult::refusal("c", ErrorType::ApprovalRequired, "ask")
        );
    }

    #[test]
    fn a_precise_suggestion_overrides_only_an_error() {
        let r = ToolResult::refusal("c", ErrorType::Busy, "m").with_suggestion("wait 1 s");
        assert_eq!(r.suggestion.as_deref(), Some("wait 1 s"));
        assert_eq!(r.recoverable, ErrorType::Busy.recoverable());
        let ok = ToolResult::success("c").with_suggestion("ignored");
        assert_eq!(ok.suggestion, None);
    }

    #[test]
    fn the_description_answer_keeps_its_wire_form() {
        let r = ToolResult::description("c", &serde_json::json!({"tool": "run_shell"}));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(v["exit_code"], 0);
        assert_eq!(v["recoverable"], false);
        assert_eq!(v["suggestion"], serde_json::Value::Null);
        assert_eq!(v["stdout"], r#"{"tool":"run_shell"}"#);
        assert_eq!(v["stdout_bytes"], 20);
    }
}
