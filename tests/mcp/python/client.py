"""Drives `agent-exec mcp` with the official MCP Python SDK over stdio.

Usage: client.py SERVER_BINARY POLICY ROOT SECRET

Started by tests/mcp_clients.rs. Exits 0 when every check holds; on the
first that does not, prints what it saw and exits 1. The SDK itself checks
each structuredContent against the tool's outputSchema; this script checks
it again with jsonschema, so a client that skipped the check would not hide
a mismatch.
"""

import json
import os
import sys
import time

import anyio
import jsonschema
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

BINARY, POLICY, ROOT, SECRET = sys.argv[1:5]
# A distinct duration names the processes the cancelled call starts.
MARKER = "3171"

seen_text = []  # every string the server sent, to look for the secret in
elicitations = []  # what the approval prompts showed
answers = ["accept", "decline", "late"]
# The server's approval timeout (seconds); "late" answers after it.
APPROVAL_TIMEOUT = 2


def check(cond, what, got=None):
    if not cond:
        print(f"FAILED: {what}\n  got: {got!r}", file=sys.stderr)
        sys.exit(1)


def structured(result, schema):
    seen_text.extend(c.text for c in result.content if getattr(c, "text", None))
    s = result.structured_content
    check(isinstance(s, dict), "structuredContent is an object", s)
    seen_text.append(json.dumps(s))
    jsonschema.validate(s, schema)
    return s


def survivors():
    """Processes whose command line is the marked sleep."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", MARKER.encode()]:
            found.append(int(pid))
    return found


async def on_elicit(context, params):
    elicitations.append(params.message)
    action = answers.pop(0) if answers else "decline"
    if action == "late":
        await anyio.sleep(APPROVAL_TIMEOUT + 2)
        return types.ElicitResult(action="accept", content={"approve": True})
    if action == "accept":
        return types.ElicitResult(action="accept", content={"approve": True})
    return types.ElicitResult(action="decline")


async def main():
    server = StdioServerParameters(
        command=BINARY,
        args=["mcp", "--policy", POLICY, "--root", ROOT, "--approval-timeout-secs", str(APPROVAL_TIMEOUT)],
        env={"AGENT_EXEC_TEST_API_KEY": SECRET, "PATH": os.environ["PATH"]},
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            init = await session.initialize()
            check(init.capabilities.tools is not None, "tools advertised", init.capabilities)
            seen_text.append(init.instructions or "")

            tools = (await session.list_tools()).tools
            check([t.name for t in tools] == ["run_shell"], "one tool, run_shell", tools)
            tool = tools[0]
            seen_text.append(tool.description or "")
            schema = tool.output_schema
            check(schema and schema.get("type") == "object", "an object outputSchema", schema)
            props = tool.input_schema.get("properties", {})
            check(tool.input_schema.get("additionalProperties") is False, "strict inputSchema", tool.input_schema)
            check("command" in props and tool.input_schema.get("required") == ["command"], "command required", props)
            ann = tool.annotations
            check(ann is not None and ann.destructive_hint is True and ann.open_world_hint is False, "annotations", ann)
            check(ROOT in (tool.description or ""), "the description names the root", tool.description)

            # Allowed.
            r = await session.call_tool("run_shell", {"command": "cat hello.txt"})
            s = structured(r, schema)
            check(not r.is_error and s["ok"] and s["stdout"] == "hello from the root\n", "allowed call", s)
            check(any("hello from the root" in c.text for c in r.content), "text rendering has the output", r.content)

            # Denied by the policy: nothing runs.
            r = await session.call_tool("run_shell", {"command": "curl http://example.com"})
            s = structured(r, schema)
            check(r.is_error and s["error_type"] == "PERMISSION_DENIED" and s["exit_code"] is None, "denied call", s)

            # Malformed: unknown key, wrong type, missing command.
            for bad in ({"command": "ls", "bogus": 1}, {"command": 5}, {}):
                r = await session.call_tool("run_shell", bad)
                s = structured(r, schema)
                check(r.is_error and s["error_type"] == "INVALID_ARGUMENTS", f"malformed {bad}", s)

            # A secret in the server's environment: the command's environment
            # is the policy's, so it is not there to print.
            r = await session.call_tool("run_shell", {"command": "echo \"key=$AGENT_EXEC_TEST_API_KEY\""})
            s = structured(r, schema)
            check(s["ok"] and s["stdout"] == "key=\n", "the secret is not in the command's environment", s)

            # Progress for a long call, when asked for.
            progress = []

            async def on_progress(p, total, message):
                progress.append(p)

            r = await session.call_tool("run_shell", {"command": "sleep 2.5"}, progress_callback=on_progress)
            structured(r, schema)
            check(not r.is_error and len(progress) >= 1, "progress notifications", progress)

            # Cancelled: the call and what it started are killed.
            check(survivors() == [], "no marked process before", survivors())
            started = time.monotonic()
            with anyio.move_on_after(1.5):
                await session.call_tool(
                    "run_shell",
                    {"command": f"sleep {MARKER} & sleep {MARKER}; wait", "timeout_ms": 600000},
                )
            check(time.monotonic() - started < 10, "cancel returned")
            deadline = time.monotonic() + 10
            while survivors() and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            check(survivors() == [], "no survivor after notifications/cancelled", survivors())

            # The session still serves after a cancel.
            r = await session.call_tool("run_shell", {"command": "echo still here"})
            check(structured(r, schema)["stdout"] == "still here\n", "serves after cancel", r)

            # Approval through elicitation: accepted once, then declined, then
            # answered too late.
            cmd = "getconf PATH # \u200bhidden"
            r = await session.call_tool("run_shell", {"command": cmd})
            s = structured(r, schema)
            check(not r.is_error and s["approved"] is True and "/usr/bin" in s["stdout"], "accepted approval ran", s)
            r = await session.call_tool("run_shell", {"command": cmd})
            s = structured(r, schema)
            check(
                r.is_error and s["error_type"] == "APPROVAL_REQUIRED" and s["approved"] is False and s["stdout"] == "",
                "declined approval did not run",
                s,
            )
            # An answer that comes after the timeout is a refusal too.
            r = await session.call_tool("run_shell", {"command": cmd})
            s = structured(r, schema)
            check(
                r.is_error and s["error_type"] == "APPROVAL_REQUIRED" and s["approved"] is False and s["stdout"] == "",
                "an approval that timed out did not run",
                s,
            )
            check(len(elicitations) == 3, "three elicitations", elicitations)
            for m in elicitations:
                check("getconf PATH # \\u{200b}hidden" in m and "\u200b" not in m, "escaped command shown", m)
                check("rule " in m and "risk" in m, "rule and risk shown", m)
            seen_text.extend(elicitations)

    leaked = [t for t in seen_text if SECRET in t]
    check(leaked == [], "the secret never appears", leaked)
    print(json.dumps({"ok": True, "progress": len(progress), "elicitations": len(elicitations)}))


anyio.run(main)
