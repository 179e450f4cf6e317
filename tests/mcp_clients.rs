//! `agent-exec mcp` driven by MCP clients nobody here wrote: the official
//! Python SDK (PyPI `mcp`) and TypeScript SDK (npm
//! `@modelcontextprotocol/sdk`), each over stdio, with the scripts under
//! `tests/mcp/`. `.ci/run` installs both under `target/mcp-clients/`
//! (`AGENT_EXEC_MCP_CLIENTS` points elsewhere); without them these tests
//! fail under CI and skip loudly otherwise.
//!
//! The scripts check what a host sees: the tool list and its schemas,
//! allowed, denied and malformed calls, progress, a cancelled call leaving
//! no process behind, approvals through elicitation (Python), and that a
//! secret in the server's environment is in nothing the client receives.

#[path = "../crates/sandbox/tests/common/kernel.rs"]
mod kernel;
use kernel::require_kernel_feature;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn top() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn clients_dir() -> PathBuf {
    std::env::var_os("AGENT_EXEC_MCP_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| top().join("target/mcp-clients"))
}

/// A project root the sandboxed child (`nobody` under a root supervisor)
/// can enter and read.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let hello = dir.path().join("hello.txt");
    std::fs::write(&hello, "hello from the root\n").unwrap();
    std::fs::set_permissions(&hello, std::fs::Permissions::from_mode(0o644)).unwrap();
    dir
}

/// A value no output could contain by chance.
fn secret() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("sk-test-{}-{nanos}-do-not-print", std::process::id())
}

fn policy() -> PathBuf {
    top().join("policies/code.toml")
}

fn assert_client_passed(out: &Output, secret: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("\"ok\""), "{stdout}");
    // The server's logs reach this stderr too.
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "the secret leaked:\n{stdout}\n{stderr}"
    );
}

#[test]
fn the_python_sdk_lists_calls_cancels_and_approves_through_elicitation() {
    let python = clients_dir().join("venv/bin/python");
    if !require_kernel_feature(
        "the MCP Python SDK in target/mcp-clients/venv (installed by .ci/run)",
        python.is_file(),
    ) {
        return;
    }
    let root = project();
    let secret = secret();
    let out = Command::new(&python)
        .arg(top().join("tests/mcp/python/client.py"))
        .arg(env!("CARGO_BIN_EXE_agent-exec"))
        .arg(policy())
        .arg(root.path())
        .arg(&secret)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_client_passed(&out, &secret);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"elicitations\": 3"), "{stdout}");
}

#[test]
fn the_typescript_sdk_lists_calls_and_cancels() {
    let js = clients_dir().join("js");
    let sdk = js.join("node_modules/@modelcontextprotocol/sdk/package.json");
    let node = Command::new("node").arg("--version").output();
    if !require_kernel_feature(
        "node and the MCP TypeScript SDK in target/mcp-clients/js (installed by .ci/run)",
        sdk.is_file() && node.is_ok_and(|o| o.status.success()),
    ) {
        return;
    }
    let root = project();
    let secret = secret();
    let out = Command::new("node")
        .arg(top().join("tests/mcp/js/client.cjs"))
        .arg(&js)
        .arg(env!("CARGO_BIN_EXE_agent-exec"))
        .arg(policy())
        .arg(root.path())
        .arg(&secret)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_client_passed(&out, &secret);
}

/// Processes whose command line starts with `sleep MARKER`.
fn marked(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if argv.len() >= 2 && argv[0] == b"sleep" && argv[1] == marker.as_bytes() {
            found.push(pid);
        }
    }
    found
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < until, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server on pipes, past the `initialize` handshake.
struct Raw {
    server: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Raw {
    fn start(root: &Path) -> Raw {
        Raw::start_with(root, &policy(), &[])
    }

    fn start_with(root: &Path, policy: &Path, extra: &[&std::ffi::OsStr]) -> Raw {
        let mut server = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(["mcp", "--policy"])
            .arg(policy)
            .arg("--root")
            .arg(root)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = server.stdin.take();
        let stdout = BufReader::new(server.stdout.take().unwrap());
        let mut raw = Raw {
            server,
            stdin,
            stdout,
        };
        raw.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#);
        let reply = raw.reply();
        assert_eq!(reply["result"]["protocolVersion"], "2025-11-25", "{reply}");
        assert!(
            reply["result"]["capabilities"]["tools"].is_object(),
            "{reply}"
        );
        raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        raw
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn reply(&mut self) -> serde_json::Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }
}

/// Requests no `tools/call` can be made of get JSON-RPC errors; a line
/// that is not JSON is dropped; the session goes on either way.
#[test]
fn malformed_requests_get_errors_and_the_session_goes_on() {
    let root = project();
    let mut raw = Raw::start(root.path());
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_shell","arguments":"ls"}}"#);
    let reply = raw.reply();
    assert_eq!(reply["id"], 2, "{reply}");
    assert!(reply["error"]["code"].is_i64(), "{reply}");
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rm_everything","arguments":{}}}"#);
    let reply = raw.reply();
    assert_eq!(reply["id"], 3, "{reply}");
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    raw.send("this is not JSON {");
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_shell","arguments":{"command":"cat hello.txt"}}}"#);
    let reply = raw.reply();
    assert_eq!(reply["id"], 4, "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"]["stdout"], "hello from the root\n",
        "{reply}"
    );
    drop(raw.stdin.take());
    assert!(raw.server.wait().unwrap().success());
}

/// No SDK needed: the session ends when the client closes stdin, and what
/// still runs is killed with it.
#[test]
fn closing_stdin_ends_the_session_and_kills_what_runs() {
    let root = project();
    let marker = "5813";
    let mut raw = Raw::start(root.path());
    raw.send(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"run_shell","arguments":{{"command":"sleep {marker} & sleep {marker}; wait"}}}}}}"#
    ));
    wait_until("the call's two processes run", || marked(marker).len() == 2);
    drop(raw.stdin.take());
    let mut status = None;
    wait_until("the server exits", || {
        status = raw.server.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{status:?}");
    wait_until("no process of the call survives", || {
        marked(marker).is_empty()
    });
}

/// A client without elicitation gets the out-of-band flow: the call is
/// held with an `approval_id`, a human approves it with `agent-exec
/// approve`, and the same call resent with that id beside its arguments
/// runs once; a second use is refused and does not run.
#[test]
fn an_approval_id_travels_beside_the_arguments() {
    let root = project();
    // The child (`nobody` under a root supervisor) must be able to create
    // the file once approved.
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let state = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    let policy_file = conf.path().join("policy.toml");
    std::fs::write(
        &policy_file,
        "name = \"mcp-approvals\"\ndefault = \"deny\"\n\n\
         [[rule]]\nid = \"touch\"\naction = \"require_approval\"\nrisk = \"medium\"\n\
         reason = \"creates files\"\nprogram = \"touch\"\n",
    )
    .unwrap();
    let mut raw = Raw::start_with(
        root.path(),
        &policy_file,
        &["--state".as_ref(), state.path().as_os_str()],
    );
    let call = |raw: &mut Raw, id: u32, extra: &str| {
        raw.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"run_shell","arguments":{{"command":"touch made.txt"{extra}}}}}}}"#
        ));
        let reply = raw.reply();
        assert_eq!(reply["id"], id, "{reply}");
        reply["result"]["structuredContent"].clone()
    };
    let first = call(&mut raw, 2, "");
    assert_eq!(first["error_type"], "APPROVAL_REQUIRED", "{first}");
    let approval = first["approval_id"].as_str().unwrap().to_string();
    assert!(!root.path().join("made.txt").exists());

    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["approve", "--state"])
        .arg(state.path())
        .arg(&approval)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    let extra = format!(r#","approval_id":"{approval}","idempotency_key":"mcp-key-0001""#);
    let ran = call(&mut raw, 3, &extra);
    assert_eq!(ran["ok"], true, "{ran}");
    assert!(root.path().join("made.txt").exists());
    std::fs::remove_file(root.path().join("made.txt")).unwrap();

    let again = call(
        &mut raw,
        4,
        &format!(r#","approval_id":"{approval}","idempotency_key":"mcp-key-0002""#),
    );
    assert_eq!(again["error_type"], "APPROVAL_USED", "{again}");
    assert!(!root.path().join("made.txt").exists());
    drop(raw.stdin.take());
    assert!(raw.server.wait().unwrap().success());
}

/// The MCP session is the provenance session: a file a listing showed is
/// `observed` (the listing's call named), a new name in a listed directory
/// is `invented`, a path nothing showed is `assumed`.
#[test]
fn an_mcp_session_keeps_a_provenance_ledger() {
    let root = project();
    let src = root.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a.py"), "").unwrap();
    for d in [root.path(), src.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(src.join("a.py"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let conf = tempfile::tempdir().unwrap();
    let policy_file = conf.path().join("policy.toml");
    std::fs::write(
        &policy_file,
        "name = \"mcp-provenance\"\ndefault = \"deny\"\n\n[provenance]\nmode = \"tag\"\n\n\
         [[rule]]\nid = \"ls\"\naction = \"allow\"\nrisk = \"low\"\nreason = \"lists\"\n\
         program = \"ls\"\nread_only = true\n\n\
         [[rule]]\nid = \"touch\"\naction = \"allow\"\nrisk = \"low\"\nreason = \"creates files\"\n\
         program = \"touch\"\nwrites = \"operands\"\n",
    )
    .unwrap();
    let mut raw = Raw::start_with(root.path(), &policy_file, &[]);
    let mut call = |id: u32, command: &str| {
        raw.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"run_shell","arguments":{{"command":"{command}"}}}}}}"#
        ));
        let reply = raw.reply();
        assert_eq!(reply["id"], id, "{reply}");
        let r = reply["result"]["structuredContent"].clone();
        assert_eq!(r["ok"], true, "{r}");
        r
    };
    let listing = call(2, "ls src");
    assert_eq!(listing["stdout"], "a.py\n", "{listing}");
    let tag_of = |r: &serde_json::Value, arg: &str| {
        r["provenance"]
            .as_array()
            .unwrap_or_else(|| panic!("no provenance: {r}"))
            .iter()
            .find(|p| p["arg"] == arg)
            .cloned()
            .unwrap_or_else(|| panic!("{arg} not tagged: {r}"))
    };
    let edit = call(3, "touch src/a.py");
    let p = tag_of(&edit, "src/a.py");
    assert_eq!(p["tag"], "observed", "{p}");
    assert_eq!(p["source"], listing["call_id"], "{p}");
    let new = call(4, "touch src/b.py");
    assert_eq!(tag_of(&new, "src/b.py")["tag"], "invented", "{new}");
    let guess = call(5, "touch c.py");
    assert_eq!(tag_of(&guess, "c.py")["tag"], "assumed", "{guess}");
    drop(raw.stdin.take());
    assert!(raw.server.wait().unwrap().success());
}
