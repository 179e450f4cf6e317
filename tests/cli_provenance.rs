//! Argument provenance for one-shot CLI calls: `--session-file` carries the
//! ledger from one invocation to the next.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");

/// The shipped code policy with provenance enforced.
fn policy(dir: &Path) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml");
    let text = std::fs::read_to_string(shipped).unwrap();
    let path = dir.join("policy.toml");
    std::fs::write(&path, format!("{text}\n[provenance]\nmode = \"enforce\"\n")).unwrap();
    path
}

/// A project the sandboxed child can write (as root it runs as `nobody`).
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.py"), "x = 1\n").unwrap();
    if nix::unistd::geteuid().is_root() {
        for p in [
            dir.path().to_path_buf(),
            dir.path().join("src"),
            dir.path().join("src/a.py"),
        ] {
            std::os::unix::fs::chown(p, Some(65_534), Some(65_534)).unwrap();
        }
    }
    dir
}

fn run(policy: &Path, root: &Path, extra: &[&str], shell: &str) -> (i32, Value) {
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(policy)
        .arg("--root")
        .arg(root)
        .args(extra)
        .arg("--shell")
        .arg(shell)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not a ToolResult ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn a_session_file_carries_the_ledger_between_invocations() {
    let root = project();
    let scratch = tempfile::tempdir().unwrap();
    let policy = policy(scratch.path());
    let file = scratch.path().join("session.json");
    let session = ["--session-file", file.to_str().unwrap()];

    // Never seen: held back, exit status 126, nothing written.
    let (code, guess) = run(&policy, root.path(), &session, "echo y >> src/a.py");
    assert_eq!(guess["error_type"], "ASSUMED_ARGUMENT", "{guess}");
    assert_eq!(code, 126);
    assert_eq!(
        std::fs::read_to_string(root.path().join("src/a.py")).unwrap(),
        "x = 1\n"
    );

    let (_, listing) = run(&policy, root.path(), &session, "ls src");
    assert_eq!(listing["ok"], true, "{listing}");
    assert!(file.exists(), "the ledger was saved");

    let (code, edit) = run(&policy, root.path(), &session, "echo y >> ./src/a.py");
    assert_eq!((code, &edit["ok"]), (0, &Value::Bool(true)), "{edit}");
    let e = &edit["provenance"][0];
    assert_eq!(
        (&e["tag"], &e["path"]),
        (&Value::from("observed"), &Value::from("src/a.py")),
        "{edit}"
    );
    assert_eq!(e["source"], listing["call_id"], "{edit}");

    // Without the file, each invocation starts with an empty ledger.
    let (_, alone) = run(&policy, root.path(), &[], "echo y >> src/a.py");
    assert_eq!(alone["error_type"], "ASSUMED_ARGUMENT", "{alone}");
}
