//! The examples each subcommand's --help ends with. Kept together so the
//! help reads as one voice, and every example is a command that works
//! from a checkout of the repository.

pub const CHECK: &str = "\
Prints the decision as JSON (decision, rule, risk_level, reason, token);
exit 0 when allowed, 126 when denied or approval is required.

Examples:
  agent-exec check --policy policies/code.toml --shell 'grep -rn TODO src'
  agent-exec check --policy policies/code.toml --shell 'curl https://example.com'
  agent-exec check --policy policies/readonly.toml -- rm -rf build";

pub const POLICY_VALIDATE: &str = "\
Checks syntax and unknown keys, runs the policy's own [[example]] cases, and
prints lint warnings (programs not on the policy's PATH, missing read paths).
Exit 0 when valid, 125 otherwise.

Examples:
  agent-exec policy validate policies/code.toml
  for p in policies/*.toml; do agent-exec policy validate \"$p\"; done";

pub const SERVE: &str = "\
Newline-delimited JSON over the socket (docs/protocol.md): run_shell,
describe and stats. Under systemd, the socket may be passed by socket
activation instead of --socket (contrib/agent-exec.socket).

Examples:
  agent-exec serve --policy policies/code.toml --root . --socket \"$XDG_RUNTIME_DIR/agent-exec.sock\"
  echo '{\"id\":1,\"tool\":\"run_shell\",\"args\":{\"command\":\"ls\"}}' | socat - UNIX-CONNECT:\"$XDG_RUNTIME_DIR/agent-exec.sock\"
  echo '{\"id\":\"s\",\"tool\":\"stats\"}' | socat - UNIX-CONNECT:\"$XDG_RUNTIME_DIR/agent-exec.sock\"";

pub const AUDIT: &str = "\
Invariants: one result per call, decisions before results, no secret in
the trace, no retry storms. Exit 0 when all hold, 1 when one fails.

Examples:
  agent-exec --policy policies/code.toml --trace run.jsonl -- ls
  agent-exec audit run.jsonl
  agent-exec audit --json --retry-threshold 5 state/traces/*.jsonl";

pub const REPLAY: &str = "\
Examples:
  agent-exec replay run.jsonl
  agent-exec replay --color never run.jsonl | less";

pub const EVAL: &str = "\
Runs each task's command through the real binary under the policy and
reports per check; exit 0 when every task passes, 1 otherwise.

Examples:
  agent-exec eval evals/security.jsonl --policy policies/code.toml
  agent-exec eval evals/utility.jsonl --out report.json
  agent-exec eval evals/utility.jsonl --compare old-report.json";

pub const DOCTOR: &str = "\
Runs `true` through the real pipeline (every layer at best effort, or under
--policy) and reports each layer as applied or not, with the reason, plus
the kernel, the Landlock ABI and the cgroup layout. Under GitHub Actions each
missing layer is also a warning annotation.

Examples:
  agent-exec doctor
  sudo agent-exec doctor --json
  agent-exec doctor --policy policies/code.toml
  agent-exec doctor --require landlock,seccomp,cgroup_memory";

pub const SH: &str = "\
Exit status: the command's own; 126 when refused (one line on stderr),
124 on timeout, 125 when no policy is configured (nothing runs).

Examples:
  AGENT_EXEC_POLICY=policies/code.toml agent-exec sh -c 'ls -la && git status'
  ln -s \"$(command -v agent-exec)\" ~/.local/bin/agent-exec-sh
  SHELL=~/.local/bin/agent-exec-sh AGENT_EXEC_POLICY=policies/code.toml make test";

pub const MCP: &str = "\
One MCP session over stdin/stdout (protocol revision 2025-11-25): tools/list
offers run_shell; stdin closing ends the session and kills what still runs.

Examples:
  agent-exec mcp --policy policies/code.toml --root .
  claude mcp add agent-exec -- agent-exec mcp --policy policies/code.toml --root .
  agent-exec mcp --policy policies/code.toml --root . --state ~/.local/state/agent-exec";

pub const APPROVALS: &str = "\
Lists pending approvals with the command escaped for display, the rule,
risk, reason, session and expiry. Only the supervisor's uid and root can
open the state directory.

Examples:
  agent-exec approvals --state ~/.local/state/agent-exec
  agent-exec approvals --state ~/.local/state/agent-exec --all --json";

pub const APPROVE: &str = "\
The agent then resends the same request with its approval_id; it runs once.
--remember saves an allow rule for that program and argument prefix, shown
before it is saved.

Examples:
  agent-exec approve --state ~/.local/state/agent-exec ap-5e8b164196e72b0c
  agent-exec approve --state ~/.local/state/agent-exec ap-5e8b164196e72b0c --remember --policy policies/code.toml";

pub const REJECT: &str = "\
A rejected approval never runs; the agent's resend is refused with
APPROVAL_REJECTED.

Examples:
  agent-exec reject --state ~/.local/state/agent-exec ap-5e8b164196e72b0c";

pub const POLICY_SHOW: &str = "\
Prints every rule in the order they are checked, the base policy's first
and then each overlay's (extends = \"code\" or a path), with the file each
came from. Exit 0 when the policy loads, 125 otherwise.

Examples:
  agent-exec policy show policies/code.toml
  agent-exec policy show --json policies/ci.toml";

pub const POLICY_EXPLAIN: &str = "\
Every finding of one decision (rules, builtin checks, path checks), the
superseded ones marked, and the strictest, which decides. Runs nothing.

Examples:
  agent-exec policy explain policies/code.toml --shell 'git checkout -- src/lib.rs'
  agent-exec policy explain policies/code.toml --shell 'find . -name \"*.pyc\" -delete' --json";
