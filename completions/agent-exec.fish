# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_agent_exec_global_optspecs
    string join \n policy= root= cwd= shell= timeout-ms= output-chars= stdin= format= approve= trace= record= replay= replay-mode= allow-live-writes state= idempotency-key= session= approval-id= session-file= daemon= h/help V/version
end

function __fish_agent_exec_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_agent_exec_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_agent_exec_using_subcommand
    set -l cmd (__fish_agent_exec_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c agent-exec -n "__fish_agent_exec_needs_command" -l policy -d 'The policy file (TOML). Required: no policy, no run' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l root -d 'Project root the command is confined to (default: the current directory)' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l cwd -d 'Working directory inside the root' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l shell -d 'Run a command given as one shell string (what agents send)' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l timeout-ms -d 'Wall-clock limit in milliseconds, up to the policy\'s max_timeout_ms' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l output-chars -d 'Characters kept per output stream (can only tighten the policy\'s)' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l stdin -d 'Text passed to the command on standard input' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l format -d 'json: one ToolResult on stdout; human: the output, then a summary line' -r -f -a "json\t''
human\t''"
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l approve -d 'Who approves commands the policy marks require_approval' -r -f -a "never\t'Refuse (APPROVAL_REQUIRED)'
tty\t'Ask on the terminal'"
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l trace -d 'Append a trace (JSONL) of this call to FILE' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l record -d 'Like --trace, and keep full (redacted) arguments and results for replay' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l replay -d 'Answer from a recorded trace instead of running' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l replay-mode -d 'strict: an unrecorded call is refused; lenient: it runs (reads only, unless --allow-live-writes)' -r -f -a "strict\t''
lenient\t''"
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l state -d 'Idempotency and budget state directory' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l idempotency-key -d 'Idempotency key (with --state): a repeated key returns the stored result' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l session -d 'Session name for budgets and traces' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l approval-id -d 'Run under this approval (from an APPROVAL_REQUIRED result, once a human approved it; with --state)' -r
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l session-file -d 'Argument provenance ledger shared by the one-shot calls that name the same file (when the policy\'s [provenance] mode is not off)' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l daemon -d 'Hand the call to the daemon listening on SOCKET when it serves the same policy file and root (default: $AGENT_EXEC_DAEMON); run it here otherwise. The command then runs with the daemon\'s environment' -r -F
complete -c agent-exec -n "__fish_agent_exec_needs_command" -l allow-live-writes -d 'In lenient replay, let unrecorded mutating calls run for real'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -s V -l version -d 'Print version'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "check" -d 'Print the policy decision for a command; run nothing'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "policy" -d 'Policy tools'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "serve" -d 'Serve the run_shell tool over a Unix socket'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "sh" -d 'A drop-in for `$SHELL -c STRING`: the command\'s own output and exit status, a refusal as one line on stderr and 126. Policy and root from AGENT_EXEC_POLICY / AGENT_EXEC_ROOT or $XDG_CONFIG_HOME/agent-exec/config.toml. A link named agent-exec-sh is this command'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "mcp" -d 'Serve the run_shell tool to an MCP client over stdio'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "audit" -d 'Check a trace\'s invariants; exit 1 when one fails'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "replay" -d 'Tell a trace as a readable story'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "eval" -d 'Run a task set against a policy and report per check'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "approvals" -d 'List the approvals waiting for a human (escaped for display)'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "approve" -d 'Approve a pending approval; only the policy\'s approvers may'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "reject" -d 'Reject a pending approval; only the policy\'s approvers may'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "doctor" -d 'Report which sandbox layers this host\'s kernel applies'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "trace" -d 'Trace tools: export to OpenTelemetry'
complete -c agent-exec -n "__fish_agent_exec_needs_command" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand check" -l policy -d 'The policy file (TOML). Required: no policy, no run' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand check" -l root -d 'Project root the command is confined to (default: the current directory)' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand check" -l cwd -d 'Working directory inside the root' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand check" -l shell -d 'Run a command given as one shell string (what agents send)' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand check" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and not __fish_seen_subcommand_from validate show explain help" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and not __fish_seen_subcommand_from validate show explain help" -f -a "validate" -d 'Load a policy, lint it and check its embedded examples'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and not __fish_seen_subcommand_from validate show explain help" -f -a "show" -d 'Print the effective rules of a policy (an overlay: its base\'s, then its own)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and not __fish_seen_subcommand_from validate show explain help" -f -a "explain" -d 'Walk one decision: every rule and check that fired, and the strictest, which decides'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and not __fish_seen_subcommand_from validate show explain help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from validate" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from show" -l state -d 'Also the rules humans saved with `approve --remember` in this state directory, as a service using it decides' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from show" -l json -d 'As JSON'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from explain" -l shell -d 'The command, as one shell string' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from explain" -l root -d 'Project root (default: the current directory)' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from explain" -l cwd -d 'Working directory inside the root' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from explain" -l state -d 'Also the rules humans saved with `approve --remember` in this state directory' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from explain" -l json -d 'As JSON'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from explain" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from help" -f -a "validate" -d 'Load a policy, lint it and check its embedded examples'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from help" -f -a "show" -d 'Print the effective rules of a policy (an overlay: its base\'s, then its own)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from help" -f -a "explain" -d 'Walk one decision: every rule and check that fired, and the strictest, which decides'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand policy; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l policy -d 'Policy file (TOML); validated before the socket is created' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l root -d 'Project root the commands run in' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l socket -d 'Socket path; its directory must belong to this user and be writable by no one else. Optional under systemd socket activation (a socket passed in `LISTEN_FDS` is served instead of binding one)' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l state -d 'State directory (idempotency keys, budgets). Default: systemd\'s `$STATE_DIRECTORY` when set, else `state` next to the socket' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l max-concurrent -d 'Calls running at once. Default: twice the number of cores' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l queue -d 'Calls waiting beyond those; more are answered BUSY at once' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l max-connections -d 'Connections open at once; another is answered BUSY and closed. Each may hold up to one request line (1 MiB) in memory' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l uid-budget-sessions -d 'How many sessions\' budgets one peer uid may spend in total, across all its session labels (see docs/protocol.md, "Sessions")' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l grace-ms -d 'On SIGTERM/SIGINT, how long running calls may finish before they are cancelled' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l replay -d 'Answer calls from this recorded trace instead of running them' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l replay-mode -d 'strict: an unrecorded call answers UNRECORDED_CALL; lenient: it runs' -r -f -a "strict\t''
lenient\t''"
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l reap-for -d 'Internal: run as the reaper of the daemon with this pid (see `reaper`); started by the daemon itself' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l record -d 'Session traces keep full (redacted) arguments and results, so a session can be replayed later'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -l allow-live-writes -d 'In lenient replay, let unrecorded mutating calls run for real'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand serve" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand sh" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand mcp" -l policy -d 'Policy file (TOML); validated before the server answers anything' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand mcp" -l root -d 'Project root the commands run in' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand mcp" -l state -d 'State directory (budgets, idempotency), kept across restarts' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand mcp" -l trace -d 'Append every call of the session to this JSONL trace' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand mcp" -l approval-timeout-secs -d 'How long a human may take to answer an approval asked through the client (MCP elicitation); no answer in time is a refusal' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand mcp" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand audit" -l retry-threshold -d 'Same tool and arguments this many times in one run is a retry storm' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand audit" -l json -d 'Print the report as JSON'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand audit" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand replay" -l color -d 'Colour: auto (on a terminal), always or never' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand replay" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand eval" -l policy -d 'Policy to evaluate (default: policies/code.toml under the current directory)' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand eval" -l compare -d 'An earlier report: show which tasks got better or worse' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand eval" -l out -d 'Write the JSON report here (it is printed to stdout otherwise)' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand eval" -l filter -d 'Only tasks whose id contains this' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand eval" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approvals" -l state -d 'The supervisor\'s state directory' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approvals" -l all -d 'Also list decided, used and expired approvals'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approvals" -l json -d 'One JSON array instead of text'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approvals" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approve" -l state -d 'The supervisor\'s state directory' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approve" -l prefix-args -d 'With --remember: keep only the first N arguments as the prefix (default: all of them)' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approve" -l policy -d 'With --remember: the policy file the supervisor runs (the rule is checked against it, examples included)' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approve" -l remember -d 'Also save an allow rule for this program and argument prefix to the policy amendments in the state directory, so the same call runs without asking from now on. The rule is shown before it is saved'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approve" -l yes -d 'With --remember: save without asking for confirmation'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand approve" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand reject" -l state -d 'The supervisor\'s state directory' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand reject" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand doctor" -l policy -d 'Probe with this policy (its enforcement and requirements) instead of the built-in best-effort probe: answers "would my policy run here?"' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand doctor" -l require -d 'Exit 1 unless these layers applied (comma-separated names as in the report, e.g. `landlock,seccomp,cgroup_memory`)' -r
complete -c agent-exec -n "__fish_agent_exec_using_subcommand doctor" -l json -d 'Print the report as one JSON object'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and not __fish_seen_subcommand_from export help" -s h -l help -d 'Print help'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and not __fish_seen_subcommand_from export help" -f -a "export" -d 'Export a trace\'s calls as spans for an observability backend'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and not __fish_seen_subcommand_from export help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and __fish_seen_subcommand_from export" -l format -d 'Output format' -r -f -a "otlp-json\t'OTLP/JSON: an ExportTraceServiceRequest, as POSTed to /v1/traces'"
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and __fish_seen_subcommand_from export" -l out -d 'Write here instead of stdout' -r -F
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and __fish_seen_subcommand_from help" -f -a "export" -d 'Export a trace\'s calls as spans for an observability backend'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand trace; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "check" -d 'Print the policy decision for a command; run nothing'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "policy" -d 'Policy tools'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "serve" -d 'Serve the run_shell tool over a Unix socket'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "sh" -d 'A drop-in for `$SHELL -c STRING`: the command\'s own output and exit status, a refusal as one line on stderr and 126. Policy and root from AGENT_EXEC_POLICY / AGENT_EXEC_ROOT or $XDG_CONFIG_HOME/agent-exec/config.toml. A link named agent-exec-sh is this command'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "mcp" -d 'Serve the run_shell tool to an MCP client over stdio'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "audit" -d 'Check a trace\'s invariants; exit 1 when one fails'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "replay" -d 'Tell a trace as a readable story'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "eval" -d 'Run a task set against a policy and report per check'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "approvals" -d 'List the approvals waiting for a human (escaped for display)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "approve" -d 'Approve a pending approval; only the policy\'s approvers may'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "reject" -d 'Reject a pending approval; only the policy\'s approvers may'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "doctor" -d 'Report which sandbox layers this host\'s kernel applies'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "trace" -d 'Trace tools: export to OpenTelemetry'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and not __fish_seen_subcommand_from check policy serve sh mcp audit replay eval approvals approve reject doctor trace help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and __fish_seen_subcommand_from policy" -f -a "validate" -d 'Load a policy, lint it and check its embedded examples'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and __fish_seen_subcommand_from policy" -f -a "show" -d 'Print the effective rules of a policy (an overlay: its base\'s, then its own)'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and __fish_seen_subcommand_from policy" -f -a "explain" -d 'Walk one decision: every rule and check that fired, and the strictest, which decides'
complete -c agent-exec -n "__fish_agent_exec_using_subcommand help; and __fish_seen_subcommand_from trace" -f -a "export" -d 'Export a trace\'s calls as spans for an observability backend'
