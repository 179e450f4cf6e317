//! What a client may ask for, validated like input to a public API.
//!
//! [`RunRequest`] is a call as every transport hands it to the service.
//! The daemon's wire format (one JSON object per line) is checked here too,
//! strictly, before the service sees it.

pub use agent_exec_policy::CommandSpec;

/// One `run_shell` call after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub command: CommandSpec,
    /// Working directory relative to (or inside) the root.
    pub cwd: Option<String>,
    /// Any timeout up to the policy's `max_timeout_ms` (default: its
    /// `timeout_ms`).
    pub timeout_ms: Option<u64>,
    pub stdin: Option<String>,
    /// May only tighten the policy's per-stream character limit.
    pub output_chars: Option<usize>,
    pub session: Option<String>,
    pub idempotency_key: Option<String>,
    /// An approval a human granted for this very request (from an earlier
    /// `APPROVAL_REQUIRED` result): it runs once under it.
    pub approval_id: Option<String>,
}

impl RunRequest {
    /// A request with nothing but the command; the policy's limits apply.
    pub fn new(command: CommandSpec) -> Self {
        RunRequest {
            command,
            cwd: None,
            timeout_ms: None,
            stdin: None,
            output_chars: None,
            session: None,
            idempotency_key: None,
            approval_id: None,
        }
    }

    /// A command given as one shell string, as agents send it.
    pub fn shell(command: impl Into<String>) -> Self {
        RunRequest::new(CommandSpec::Shell(command.into()))
    }

    /// A program and its arguments, run without a shell.
    pub fn argv<S: Into<String>>(argv: impl IntoIterator<Item = S>) -> Self {
        RunRequest::new(CommandSpec::Argv(
            argv.into_iter().map(Into::into).collect(),
        ))
    }
}

/// Whose call it is, as the server establishes it: the caller's uid, which
/// the transport takes from the kernel (the daemon reads `SO_PEERCRED`; the
/// CLI and an embedding program are their own caller), and the session
/// label the client chose.
///
/// The label only groups one caller's calls; it is never an identity.
/// Idempotency keys, budgets and per-session traces are kept per
/// `SessionId`, so two uids using the same label share nothing, and no
/// label can reach what another uid stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionId {
    uid: u32,
    label: Option<String>,
}

impl SessionId {
    /// The label calls without one are grouped under.
    pub const DEFAULT_LABEL: &'static str = "default";

    pub fn new(uid: u32, label: Option<&str>) -> SessionId {
        SessionId {
            uid,
            label: label.map(str::to_string),
        }
    }

    /// The caller's uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The label as the client sent it, if it sent one.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The label budgets, keys and traces group by: `default` without one.
    pub fn label_or_default(&self) -> &str {
        self.label.as_deref().unwrap_or(Self::DEFAULT_LABEL)
    }
}

// ---------------------------------------------------------------------------
// Wire validation (daemon protocol, see docs/protocol.md).
//
// A request line is checked strictly before anything else sees it: unknown
// keys at any level, wrong JSON types and over-long strings are refused with
// the path of the offending field, never coerced, so what the policy decides
// on is exactly what the client meant.

mod json;

use serde_json::{Map, Value};

use crate::result::{ErrorType, ToolResult};
use json::parse_unique_keys;

/// Bounds applied to a request line before it reaches the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestLimits {
    /// Largest line (without its newline) the daemon reads.
    pub max_line_bytes: usize,
    pub max_command_bytes: usize,
    pub max_cwd_bytes: usize,
    pub max_stdin_bytes: usize,
    /// Largest `id` string echoed back.
    pub max_id_chars: usize,
    pub max_session_chars: usize,
    pub min_key_chars: usize,
    pub max_key_chars: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_line_bytes: 1 << 20,
            max_command_bytes: 64 << 10,
            max_cwd_bytes: 4096,
            max_stdin_bytes: 1 << 20,
            max_id_chars: 128,
            max_session_chars: 128,
            min_key_chars: 8,
            max_key_chars: 128,
        }
    }
}

impl RequestLimits {
    /// The defaults, with the command and stdin bounds taken from the policy.
    pub(crate) fn from_policy(limits: &crate::policy::Limits) -> Self {
        RequestLimits {
            max_command_bytes: limits.max_command_bytes,
            max_stdin_bytes: limits.max_stdin_bytes,
            ..RequestLimits::default()
        }
    }
}

/// The tools the daemon offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolCall {
    RunShell(RunRequest),
    Describe,
    /// The daemon's operating numbers (see `docs/protocol.md`, "Stats").
    Stats,
}

/// One validated request line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Envelope {
    /// Echoed verbatim in the response (string or number).
    pub id: Option<Value>,
    pub call: ToolCall,
}

/// A refused request line: which field, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub(crate) struct FieldError {
    /// The request id when it could be read, so the refusal still matches.
    pub id: Option<Value>,
    /// Dotted path of the offending field (`args.timeout_ms`); `request` when
    /// the line as a whole is unusable.
    pub field: String,
    pub reason: String,
}

impl FieldError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        FieldError {
            id: None,
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The `INVALID_ARGUMENTS` result a client receives for this refusal.
    pub(crate) fn to_result(&self, call_id: impl Into<String>) -> ToolResult {
        let mut r = ToolResult::refusal(call_id, ErrorType::InvalidArguments, self.to_string());
        r.id = self.id.clone();
        r
    }
}

const ENVELOPE_KEYS: &[&str] = &[
    "id",
    "tool",
    "args",
    "session",
    "idempotency_key",
    "approval_id",
];
const RUN_SHELL_KEYS: &[&str] = &["command", "cwd", "timeout_ms", "stdin", "output_chars"];

/// Validates one request line (without its trailing newline).
pub(crate) fn parse_request_line(
    line: &[u8],
    limits: &RequestLimits,
) -> Result<Envelope, FieldError> {
    if line.len() > limits.max_line_bytes {
        return Err(FieldError::new(
            "request",
            format!(
                "line is {} bytes, over the limit of {}",
                line.len(),
                limits.max_line_bytes
            ),
        ));
    }
    let value = parse_unique_keys(line)?;
    let Value::Object(obj) = value else {
        return Err(FieldError::new("request", "must be a JSON object"));
    };
    // The id is read first so every later refusal can carry it.
    let id = match obj.get("id") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Number(_)) => Some(v.clone()),
        Some(Value::String(s)) => {
            if s.chars().count() > limits.max_id_chars {
                return Err(FieldError::new(
                    "id",
                    format!("longer than {} characters", limits.max_id_chars),
                ));
            }
            Some(Value::String(s.clone()))
        }
        Some(other) => {
            return Err(FieldError::new(
                "id",
                format!("must be a string or a number, got {}", type_name(other)),
            ));
        }
    };
    parse_envelope(&obj, limits)
        .map(|call| Envelope {
            id: id.clone(),
            call,
        })
        .map_err(|mut e| {
            e.id = id;
            e
        })
}

fn parse_envelope(
    obj: &Map<String, Value>,
    limits: &RequestLimits,
) -> Result<ToolCall, FieldError> {
    reject_unknown(obj, ENVELOPE_KEYS, "")?;
    let tool = match obj.get("tool") {
        None => {
            return Err(FieldError::new(
                "tool",
                "is required (run_shell or describe)",
            ));
        }
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(FieldError::new(
                "tool",
                format!("must be a string, got {}", type_name(other)),
            ));
        }
    };
    let session = opt_string(obj, "session", "session")?;
    if let Some(s) = &session {
        check_token(s, "session", 1, limits.max_session_chars)?;
    }
    let (key, approval_id) = call_tokens(obj, limits)?;
    match tool {
        "describe" | "stats" => {
            match obj.get("args") {
                None | Some(Value::Null) => {}
                Some(Value::Object(a)) => reject_unknown(a, &[], "args.")?,
                Some(other) => {
                    return Err(FieldError::new(
                        "args",
                        format!("must be an object, got {}", type_name(other)),
                    ));
                }
            }
            Ok(if tool == "stats" {
                ToolCall::Stats
            } else {
                ToolCall::Describe
            })
        }
        "run_shell" => {
            let args = match obj.get("args") {
                None => return Err(FieldError::new("args", "is required for run_shell")),
                Some(Value::Object(a)) => a,
                Some(other) => {
                    return Err(FieldError::new(
                        "args",
                        format!("must be an object, got {}", type_name(other)),
                    ));
                }
            };
            let mut req = parse_run_shell(args, limits)?;
            req.session = session;
            req.idempotency_key = key;
            req.approval_id = approval_id;
            Ok(ToolCall::RunShell(req))
        }
        other => Err(FieldError::new(
            "tool",
            format!(
                "unknown tool {:?} (expected run_shell, describe or stats)",
                truncate_for_message(other)
            ),
        )),
    }
}

/// The `run_shell` arguments alone, checked exactly as the daemon checks
/// a request line's `args` (unknown keys, types, sizes): for transports
/// whose envelope is not this crate's, such as MCP's `tools/call`. Such a
/// transport has nowhere else to carry the two call-level tokens, so
/// `idempotency_key` and `approval_id` are accepted here beside the
/// arguments, checked as the envelope checks them.
pub(crate) fn parse_run_shell_arguments(
    args: &Map<String, Value>,
    limits: &RequestLimits,
) -> Result<RunRequest, FieldError> {
    let mut core = args.clone();
    core.remove("idempotency_key");
    core.remove("approval_id");
    let mut req = parse_run_shell(&core, limits)?;
    (req.idempotency_key, req.approval_id) = call_tokens(args, limits)?;
    Ok(req)
}

/// The idempotency key and the approval id of a call, where `obj` (an
/// envelope, or MCP's arguments) carries them, checked alike everywhere.
fn call_tokens(
    obj: &Map<String, Value>,
    limits: &RequestLimits,
) -> Result<(Option<String>, Option<String>), FieldError> {
    let key = opt_string(obj, "idempotency_key", "idempotency_key")?;
    if let Some(k) = &key {
        check_token(
            k,
            "idempotency_key",
            limits.min_key_chars,
            limits.max_key_chars,
        )?;
    }
    let approval_id = opt_string(obj, "approval_id", "approval_id")?;
    if let Some(a) = &approval_id {
        check_token(a, "approval_id", 8, 128)?;
    }
    Ok((key, approval_id))
}

fn parse_run_shell(
    args: &Map<String, Value>,
    limits: &RequestLimits,
) -> Result<RunRequest, FieldError> {
    reject_unknown(args, RUN_SHELL_KEYS, "args.")?;
    let command = match args.get("command") {
        None => return Err(FieldError::new("args.command", "is required")),
        Some(Value::String(s)) => s,
        Some(other) => {
            return Err(FieldError::new(
                "args.command",
                format!("must be a string, got {}", type_name(other)),
            ));
        }
    };
    if command.trim().is_empty() {
        return Err(FieldError::new("args.command", "must not be empty"));
    }
    check_bytes(command, "args.command", limits.max_command_bytes)?;
    let cwd = opt_string(args, "cwd", "args.cwd")?;
    if let Some(c) = &cwd {
        if c.is_empty() {
            return Err(FieldError::new(
                "args.cwd",
                "must not be empty (omit it for the root)",
            ));
        }
        check_bytes(c, "args.cwd", limits.max_cwd_bytes)?;
    }
    let stdin = opt_string(args, "stdin", "args.stdin")?;
    if let Some(s) = &stdin {
        check_bytes(s, "args.stdin", limits.max_stdin_bytes)?;
    }
    let timeout_ms = opt_positive(args, "timeout_ms", "args.timeout_ms")?;
    let output_chars = opt_positive(args, "output_chars", "args.output_chars")?
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    Ok(RunRequest {
        command: CommandSpec::Shell(command.clone()),
        cwd,
        timeout_ms,
        stdin,
        output_chars,
        session: None,
        idempotency_key: None,
        approval_id: None,
    })
}

fn reject_unknown(
    obj: &Map<String, Value>,
    known: &[&str],
    prefix: &str,
) -> Result<(), FieldError> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(FieldError::new(
            format!("{prefix}{}", truncate_for_message(k)),
            if known.is_empty() {
                "unknown key (this tool takes no arguments)".to_string()
            } else {
                format!("unknown key (expected one of: {})", known.join(", "))
            },
        )),
    }
}

fn opt_string(
    obj: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            if s.contains('\0') {
                return Err(FieldError::new(field, "must not contain NUL characters"));
            }
            Ok(Some(s.clone()))
        }
        Some(other) => Err(FieldError::new(
            field,
            format!("must be a string, got {}", type_name(other)),
        )),
    }
}

/// A positive integer; `"5"`, `5.0` and `-1` are all refused.
fn opt_positive(
    obj: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<u64>, FieldError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) => Err(FieldError::new(field, "must be at least 1")),
            Some(v) => Ok(Some(v)),
            None => Err(FieldError::new(field, "must be a positive integer")),
        },
        Some(other) => Err(FieldError::new(
            field,
            format!("must be a positive integer, got {}", type_name(other)),
        )),
    }
}

fn check_bytes(s: &str, field: &str, max: usize) -> Result<(), FieldError> {
    if s.contains('\0') {
        return Err(FieldError::new(field, "must not contain NUL characters"));
    }
    if s.len() > max {
        return Err(FieldError::new(
            field,
            format!("is {} bytes, over the limit of {max}", s.len()),
        ));
    }
    Ok(())
}

/// Sessions and keys become database keys and log fields, so they are kept
/// to a printable, unambiguous alphabet.
fn check_token(s: &str, field: &str, min: usize, max: usize) -> Result<(), FieldError> {
    let n = s.chars().count();
    if n < min || n > max {
        return Err(FieldError::new(
            field,
            format!("must be {min} to {max} characters, got {n}"),
        ));
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '@'))
    {
        return Err(FieldError::new(
            field,
            "may only contain ASCII letters, digits and - _ . : / @",
        ));
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Field names come from the client: cap what is echoed back.
fn truncate_for_message(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        None => s.to_string(),
        Some((i, _)) => format!("{}...", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Envelope, FieldError> {
        parse_request_line(s.as_bytes(), &RequestLimits::default())
    }

    fn field_of(s: &str) -> String {
        match parse(s) {
            Ok(e) => panic!("accepted {s}: {e:?}"),
            Err(e) => e.field,
        }
    }

    #[test]
    fn full_run_shell_request_is_accepted() {
        let e = parse(
            r#"{"id":7,"tool":"run_shell","session":"s-1","idempotency_key":"key-0001",
               "args":{"command":"ls -l","cwd":"src","timeout_ms":500,"stdin":"x","output_chars":100}}"#,
        )
        .unwrap();
        assert_eq!(e.id, Some(serde_json::json!(7)));
        let ToolCall::RunShell(r) = e.call else {
            panic!("not run_shell")
        };
        assert_eq!(r.command, CommandSpec::Shell("ls -l".into()));
        assert_eq!(r.cwd.as_deref(), Some("src"));
        assert_eq!(r.timeout_ms, Some(500));
        assert_eq!(r.stdin.as_deref(), Some("x"));
        assert_eq!(r.output_chars, Some(100));
        assert_eq!(r.session.as_deref(), Some("s-1"));
        assert_eq!(r.idempotency_key.as_deref(), Some("key-0001"));
    }

    #[test]
    fn describe_needs_no_args() {
        assert_eq!(
            parse(r#"{"tool":"describe"}"#).unwrap().call,
            ToolCall::Describe
        );
        assert_eq!(field_of(r#"{"tool":"describe","args":{"x":1}}"#), "args.x");
    }

    #[test]
    fn types_are_never_coerced() {
        assert_eq!(
            field_of(r#"{"id":1,"tool":"run_shell","args":{"command":"ls","timeout_ms":"5"}}"#),
            "args.timeout_ms"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls","timeout_ms":5.0}}"#),
            "args.timeout_ms"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls","timeout_ms":-1}}"#),
            "args.timeout_ms"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls","timeout_ms":0}}"#),
            "args.timeout_ms"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":["ls"]}}"#),
            "args.command"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls","stdin":1}}"#),
            "args.stdin"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls","output_chars":true}}"#),
            "args.output_chars"
        );
        assert_eq!(field_of(r#"{"tool":"run_shell","args":"ls"}"#), "args");
        assert_eq!(field_of(r#"{"tool":5}"#), "tool");
        assert_eq!(field_of(r#"{"id":[1],"tool":"describe"}"#), "id");
    }

    #[test]
    fn unknown_keys_at_every_level_are_refused() {
        assert_eq!(field_of(r#"{"tool":"describe","extra":1}"#), "extra");
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls","env":{}}}"#),
            "args.env"
        );
    }

    #[test]
    fn missing_required_keys_are_named() {
        assert_eq!(field_of(r#"{"id":"a"}"#), "tool");
        assert_eq!(field_of(r#"{"tool":"run_shell"}"#), "args");
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{}}"#),
            "args.command"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"  "}}"#),
            "args.command"
        );
        assert_eq!(field_of(r#"{"tool":"rm_rf","args":{}}"#), "tool");
    }

    #[test]
    fn lengths_are_bounded() {
        let limits = RequestLimits {
            max_line_bytes: 64,
            ..RequestLimits::default()
        };
        let long = format!(
            r#"{{"tool":"run_shell","args":{{"command":"{}"}}}}"#,
            "a".repeat(100)
        );
        assert_eq!(
            parse_request_line(long.as_bytes(), &limits)
                .unwrap_err()
                .field,
            "request"
        );
        let big_cmd = format!(
            r#"{{"tool":"run_shell","args":{{"command":"{}"}}}}"#,
            "a".repeat(70_000)
        );
        assert_eq!(field_of(&big_cmd), "args.command");
        assert_eq!(
            field_of(r#"{"tool":"describe","idempotency_key":"short"}"#),
            "idempotency_key"
        );
        let long_key = format!(
            r#"{{"tool":"describe","idempotency_key":"{}"}}"#,
            "k".repeat(129)
        );
        assert_eq!(field_of(&long_key), "idempotency_key");
        assert_eq!(
            field_of(r#"{"tool":"describe","idempotency_key":"has space!"}"#),
            "idempotency_key"
        );
        assert_eq!(field_of(r#"{"tool":"describe","session":""}"#), "session");
        let long_id = format!(r#"{{"tool":"describe","id":"{}"}}"#, "i".repeat(129));
        assert_eq!(field_of(&long_id), "id");
    }

    #[test]
    fn refusals_carry_the_id_when_readable() {
        let e =
            parse(r#"{"id":"req-9","tool":"run_shell","args":{"command":"ls","timeout_ms":"5"}}"#)
                .unwrap_err();
        assert_eq!(e.id, Some(serde_json::json!("req-9")));
        let r = e.to_result("c1");
        assert_eq!(r.id, Some(serde_json::json!("req-9")));
        assert_eq!(r.error_type, Some(ErrorType::InvalidArguments));
        assert!(r.message.starts_with("args.timeout_ms:"), "{}", r.message);
        assert_eq!(parse("not json").unwrap_err().field, "request");
        assert_eq!(parse("[1,2]").unwrap_err().field, "request");
        assert_eq!(parse("not json").unwrap_err().id, None);
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth_and_named() {
        // The case that ran a command: the last `tool` would have won.
        assert_eq!(
            field_of(r#"{"tool":"describe","tool":"run_shell","args":{"command":"touch x"}}"#),
            "tool"
        );
        let e = parse(r#"{"tool":"describe","tool":"describe"}"#).unwrap_err();
        assert!(e.reason.contains("duplicate key"), "{e}");
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"echo a","command":"touch b"}}"#),
            "args.command"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls"},"args":{"command":"ls"}}"#),
            "args"
        );
        // Escapes do not hide a repeat: both keys read `tool`.
        assert_eq!(
            field_of(r#"{"tool":"describe","t\u006fol":"run_shell"}"#),
            "tool"
        );
        // Deeper, and inside arrays (here in an unknown key, refused anyway).
        assert_eq!(
            field_of(r#"{"tool":"describe","x":[{"a":1},{"b":{"c":1,"c":2}}]}"#),
            "x.1.b.c"
        );
        // The same key in two different objects is no repeat.
        assert!(
            parse(r#"{"id":1,"tool":"run_shell","args":{"command":"ls","cwd":"src"}}"#).is_ok()
        );
        // Values survive the strict parse exactly.
        let e = parse(r#"{"id":-3,"tool":"run_shell","args":{"command":"ls","timeout_ms":5}}"#)
            .unwrap();
        assert_eq!(e.id, Some(serde_json::json!(-3)));
        // Trailing garbage is still not JSON, and nesting stays bounded.
        assert_eq!(field_of(r#"{"tool":"describe"} x"#), "request");
        assert_eq!(field_of(&"[".repeat(100_000)), "request");
        assert_eq!(
            field_of(&format!(
                "{}1{}",
                "{\"a\":".repeat(100_000),
                "}".repeat(100_000)
            )),
            "request"
        );
    }

    #[test]
    fn nul_bytes_are_refused() {
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls\u0000-la"}}"#),
            "args.command"
        );
        assert_eq!(
            field_of(r#"{"tool":"run_shell","args":{"command":"ls","cwd":"a\u0000b"}}"#),
            "args.cwd"
        );
    }
}
