//! What a person at the terminal sees: the approval prompt on a real
//! pseudo-terminal (`script` gives the CLI a controlling terminal, which
//! `TtyApprover` opens as /dev/tty) and the bytes `--format human` writes.
//! Escape codes, bidi overrides and invisible characters from the request
//! or the command's output are shown escaped, never sent raw, so they
//! cannot redraw the prompt; the prompt defaults to no.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");

fn policy(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("policies/{name}.toml"))
}

fn root() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("agent-exec-tty-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("README.md"), "read me\n").unwrap();
    let st = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    dir
}

/// Erases the prompt's lines and draws a harmless-looking one over them,
/// from inside a shell comment the policy ignores; then reverses the
/// rest of the line.
const SPOOF: &str = "\x1b[2K\r\x1b[1A\x1b[2K\r\x1b[1A\x1b[2K\ragent-exec: approval required (Low risk, rule read-tools): Reads files.\x1b[1B\r  command: cat README.md\x1b[8m\u{202e}\u{200b}";

/// Runs the CLI under `readonly.toml` with `--approve tty` on a fresh
/// pseudo-terminal, typing `answer`; returns everything the terminal
/// received and the ToolResult.
fn approve_on_a_terminal(root: &Path, command: &str, answer: &str) -> (Vec<u8>, Value) {
    let readonly = policy("readonly");
    let args = [
        BIN,
        "--policy",
        readonly.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--approve",
        "tty",
        "--shell",
        command,
    ];
    let line = shell_words::join(args);
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs the CLI on a pseudo-terminal");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let screen = out.stdout;
    let text = String::from_utf8_lossy(&screen);
    let json = text
        .find("{\"schema_version\"")
        .map(|at| text[at..].trim())
        .unwrap_or_else(|| panic!("no result on the terminal: {text:?}"));
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json:?}"));
    (screen, v)
}

fn prompt_of(screen: &[u8]) -> String {
    let text = String::from_utf8_lossy(screen);
    let start = text
        .find("agent-exec: approval required")
        .expect("a prompt");
    let end = text.find("{\"schema_version\"").unwrap_or(text.len());
    text[start..end].to_string()
}

#[test]
fn escape_codes_in_a_request_are_shown_not_obeyed_and_no_is_the_default() {
    let dir = root();
    let command = format!("python3 -c 'print(6*7)' # {SPOOF}");
    for answer in ["\n", "n\n", "yes please\n"] {
        let (screen, v) = approve_on_a_terminal(dir.path(), &command, answer);
        // Nothing raw reached the terminal: no ESC, no CR inside the
        // prompt's lines, no bidi override, no zero-width space.
        assert!(
            !screen.contains(&0x1b),
            "{:?}",
            String::from_utf8_lossy(&screen)
        );
        let prompt = prompt_of(&screen);
        assert!(!prompt.contains('\u{202e}') && !prompt.contains('\u{200b}'));
        assert_eq!(
            prompt.matches("approval required").count(),
            2,
            "the real prompt and the spoof shown as text: {prompt:?}"
        );
        assert!(prompt.starts_with(
            "agent-exec: approval required (High risk, rule runners): Running code can write files"
        ));
        assert!(
            prompt.contains(
                "command: python3 -c 'print(6*7)' # \\x1b[2K\\x0d\\x1b[1A\\x1b[2K\\x0d\\x1b[1A\\x1b[2K\\x0dagent-exec: approval required (Low risk, rule read-tools): Reads files.\\x1b[1B\\x0d  command: cat README.md\\x1b[8m\\u{202e}\\u{200b}"
            ),
            "{prompt:?}"
        );
        assert!(prompt.contains("Run it? [y/N] "), "{prompt:?}");
        // Anything but an explicit yes is a no, an empty line included.
        assert_eq!(v["error_type"], "APPROVAL_REQUIRED", "{answer:?}: {v:#}");
        assert_eq!(v["approved"], false, "{answer:?}: {v:#}");
        assert!(!v["stdout"].as_str().unwrap().contains("42"));
    }
}

#[test]
fn a_yes_runs_the_command_in_the_read_only_world_of_a_read_only_policy() {
    // readonly.toml sets [sandbox] read_only: an approved runner reads,
    // and its write fails in the kernel.
    let dir = root();
    let command = "python3 -c \"print(6*7); open('made.txt', 'w')\"";
    let (_, v) = approve_on_a_terminal(dir.path(), command, "y\n");
    assert_eq!(v["approved"], true, "{v:#}");
    assert_eq!(v["stdout"], "42\n", "{v:#}");
    assert_eq!(v["error_type"], "SANDBOX_VIOLATION", "{v:#}");
    assert!(v["stderr"].as_str().unwrap().contains("PermissionError"));
    assert!(!dir.path().join("made.txt").exists());
    let limits = v["sandbox"]["limits"].as_array().unwrap();
    assert!(limits.contains(&Value::from("landlock_root=read_only")));
}

#[test]
fn human_output_shows_the_commands_escape_codes_as_text() {
    let dir = root();
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(policy("code"))
        .arg("--root")
        .arg(dir.path())
        .args(["--format", "human", "--"])
        .args([
            "printf",
            "\\033[2J\\033]0;title\\007tab\\there\\n\\342\\200\\256rtl\\n",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout.clone()).unwrap(),
        "\\x1b[2J\\x1b]0;title\\x07tab\there\n\\u{202e}rtl\n"
    );
    assert!(!out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b));

    // The summary line escapes what it quotes from the request too.
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(policy("code"))
        .arg("--root")
        .arg(dir.path())
        .args(["--format", "human", "--shell", "cat /etc/\x1b[2Kpasswd"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("/etc/\\x1b[2Kpasswd"), "{err:?}");
    assert!(!err.contains('\x1b'));
}
