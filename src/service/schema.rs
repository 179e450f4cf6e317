//! The `run_shell` tool as a model sees it, and the canonical arguments of
//! a call, which idempotency keys, replay and traces bind to.

use serde_json::{Value, json};

use crate::request::{CommandSpec, RunRequest};
use crate::trace;

/// The `run_shell` tool's JSON Schema, as handed to a model.
pub fn tool_schema() -> Value {
    json!({
        "name": "run_shell",
        "description": "Run one shell command inside the project root under a sandbox and return a structured result (ok, exit_code, stdout, stderr, error_type, suggestion). Commands outside the policy are refused with a reason.",
        "parameters": {
            "type": "object",
            "additionalProperties": false,
            "required": ["command"],
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "The shell command line to run."},
                "cwd": {"type": "string", "description": "Working directory, relative to the project root."},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Wall-clock limit; capped by the policy."},
                "stdin": {"type": "string", "description": "Text given to the command on standard input."},
                "output_chars": {"type": "integer", "minimum": 1, "description": "Characters kept per stream; capped by the policy."}
            }
        }
    })
}

/// SHA-256 of the canonical tool schema: traces and replays bind to it.
pub fn tool_schema_sha256() -> String {
    trace::args_hash(&tool_schema())
}

/// The canonical arguments of a call: what idempotency keys, replay and
/// traces hash. Fields that do not change what runs (session, key) are left
/// out.
pub fn args_json(req: &RunRequest) -> Value {
    let mut m = serde_json::Map::new();
    match &req.command {
        CommandSpec::Shell(s) => m.insert("command".into(), Value::String(s.clone())),
        CommandSpec::Argv(v) => m.insert("argv".into(), json!(v)),
    };
    if let Some(c) = &req.cwd {
        m.insert("cwd".into(), Value::String(c.clone()));
    }
    if let Some(t) = req.timeout_ms {
        m.insert("timeout_ms".into(), json!(t));
    }
    if let Some(s) = &req.stdin {
        m.insert("stdin".into(), Value::String(s.clone()));
    }
    if let Some(o) = req.output_chars {
        m.insert("output_chars".into(), json!(o));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_and_key_do_not_change_the_arguments() {
        let mut a = RunRequest::new(CommandSpec::Shell("ls".into()));
        a.cwd = Some("src".into());
        let mut b = a.clone();
        b.session = Some("s".into());
        b.idempotency_key = Some("key-0001".into());
        assert_eq!(args_json(&a), args_json(&b));
        assert_eq!(args_json(&a), json!({"command": "ls", "cwd": "src"}));
        let argv = RunRequest::new(CommandSpec::Argv(vec!["ls".into()]));
        assert_eq!(args_json(&argv), json!({"argv": ["ls"]}));
    }
}
