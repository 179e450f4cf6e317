//! What a client may ask for, validated like input to a public API.

/// The command as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandSpec {
    /// One shell string (what agents send).
    Shell(String),
    /// An argv, exec'd directly when the policy allows.
    Argv(Vec<String>),
}

/// One `run_shell` call after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub command: CommandSpec,
    /// Working directory relative to (or inside) the root.
    pub cwd: Option<String>,
    /// May only tighten the policy's timeout.
    pub timeout_ms: Option<u64>,
    pub stdin: Option<String>,
    /// May only tighten the policy's per-stream character limit.
    pub output_chars: Option<usize>,
    pub session: Option<String>,
    pub idempotency_key: Option<String>,
}

impl RunRequest {
    pub fn new(command: CommandSpec) -> Self {
        RunRequest {
            command,
            cwd: None,
            timeout_ms: None,
            stdin: None,
            output_chars: None,
            session: None,
            idempotency_key: None,
        }
    }
}
