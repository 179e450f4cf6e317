//! Helpers of the `strict_*` tests: the real CLI run with a policy of the
//! test's own, as root or as an ordinary user, with a chosen environment;
//! every result validated against docs/tool-result.schema.json.

#![allow(dead_code)]

/// The one rule for a test that needs a kernel feature, a privilege or a
/// tool the host may lack: a failure under `CI`, a loud skip elsewhere.
#[path = "../../crates/sandbox/tests/common/kernel.rs"]
mod kernel;
#[allow(unused_imports)]
pub use kernel::require_kernel_feature;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");
pub const PYTHON: &str = "/usr/bin/python3";
pub const NOBODY: u32 = 65534;
/// An ordinary user with no passwd entry (the sandbox takes uids by number).
pub const ORDINARY: u32 = 47012;

pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/tool-result.schema.json");
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    })
}

/// A directory with `mode`, owned by `uid` (when the test is root).
pub fn dir(prefix: &str, mode: u32, uid: u32) -> tempfile::TempDir {
    let d = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(d.path(), Some(uid), Some(uid)).unwrap();
    }
    d
}

/// A project root owned by the child's user, and a policy for it.
pub struct Case {
    pub root: tempfile::TempDir,
    policy_dir: tempfile::TempDir,
    /// Who runs the CLI: `None` the test's own user.
    pub supervisor: Option<u32>,
    /// The environment the CLI gets (nothing else of the test's).
    pub env: Vec<(String, String)>,
}

impl Case {
    /// `policy`: the text after the name and the allow-everything default.
    /// `supervisor`: run the CLI as that uid (the root is then theirs),
    /// else as the test's user with `nobody` as the child.
    pub fn new(policy: &str, supervisor: Option<u32>) -> Case {
        let owner = supervisor.unwrap_or(NOBODY);
        let root = dir("ae-strict-root-", 0o755, owner);
        let policy_dir = dir("ae-strict-policy-", 0o755, 0);
        let text = format!(
            "name = \"strict-test\"\ndefault = \"allow\"\ndefault_risk = \"low\"\n\
             [env]\npath = \"/usr/local/bin:/usr/bin:/bin\"\n{policy}"
        );
        let p = policy_dir.path().join("policy.toml");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        Case {
            root,
            policy_dir,
            supervisor,
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        }
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }

    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Case {
        self.env
            .push((k.into(), v.as_ref().to_string_lossy().into_owned()));
        self
    }

    pub fn policy_path(&self) -> PathBuf {
        self.policy_dir.path().join("policy.toml")
    }

    /// Runs the CLI with `args` (after `--policy` and `--root`); returns
    /// its one result, checked against the schema.
    pub fn run(&self, args: &[&str]) -> Value {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .arg("--policy")
            .arg(self.policy_path())
            .arg("--root")
            .arg(self.path())
            .args(args)
            .current_dir("/");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(uid) = self.supervisor {
            cmd.uid(uid).gid(uid);
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().unwrap_or_else(|| {
            panic!(
                "no result; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if let Err(e) = validator().validate(&v) {
            panic!("result does not match the schema: {e}\n{v:#}");
        }
        v
    }

    pub fn shell(&self, script: &str) -> Value {
        self.run(&["--shell", script])
    }
}

pub fn stdout(v: &Value) -> &str {
    v["stdout"].as_str().unwrap_or_default()
}

pub fn not_applied(v: &Value) -> Vec<String> {
    v["sandbox"]["not_applied"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A random hex token, so names of one test never meet another's.
pub fn token() -> String {
    let mut b = [0u8; 8];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut b).unwrap();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Live processes whose command line contains `mark`.
pub fn procs_with(mark: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(b) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && b.windows(mark.len()).any(|w| w == mark.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}
