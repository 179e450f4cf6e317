//! Helpers of the containment tests: a project root owned per deployment,
//! the CLI run on it (under `setpriv` for a non-root supervisor), the same
//! script run without a sandbox as a control, and victim processes of the
//! child's uid.

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
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");
pub const PYTHON: &str = "/usr/bin/python3";
pub const NOBODY: u32 = 65534;
/// An ordinary user for the deployments where the project belongs to one
/// (no passwd entry needed: the sandbox takes the root's owner by number).
pub const ORDINARY: u32 = 47011;

/// A kernel feature or tool a test needs is absent. In CI that is a
/// failure; elsewhere the test says loudly that it did not run.
pub fn missing(what: &str) {
    require_kernel_feature(what, false);
}

pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// Who supervises and who the child runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deployment {
    /// A root supervisor on a root-owned project: the child is uid 0
    /// without capabilities.
    RootOnRootProject,
    /// A root supervisor on a project of an ordinary user: the child is
    /// that user.
    RootOnUserProject,
    /// The supervisor itself runs as an ordinary user (its own project).
    User,
}

impl Deployment {
    /// Every deployment this test process can set up: all of them as root,
    /// only its own user otherwise.
    pub fn all() -> Vec<Deployment> {
        if is_root() {
            if which("setpriv").is_none() {
                missing("setpriv (util-linux), to run the CLI as an ordinary user");
                return vec![Deployment::RootOnRootProject, Deployment::RootOnUserProject];
            }
            vec![
                Deployment::RootOnRootProject,
                Deployment::RootOnUserProject,
                Deployment::User,
            ]
        } else {
            eprintln!(
                "SKIPPED: the root-supervisor deployments need root; testing the own-user one"
            );
            vec![Deployment::User]
        }
    }

    /// The uid the sandboxed child gets.
    pub fn child_uid(self) -> u32 {
        match self {
            Deployment::RootOnRootProject => 0,
            _ if is_root() => ORDINARY,
            _ => nix::unistd::Uid::effective().as_raw(),
        }
    }

    fn owner(self) -> u32 {
        match self {
            Deployment::RootOnRootProject => 0,
            _ => self.child_uid(),
        }
    }
}

pub fn which(prog: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.exists())
}

/// A project root and the policy file the CLI is given for it.
pub struct Project {
    pub dep: Deployment,
    root: tempfile::TempDir,
    policy_dir: tempfile::TempDir,
}

impl Project {
    /// A root owned per `dep`; the policy allows every command (the kernel
    /// sandbox is what these tests are about) and sets `unix_sockets`.
    pub fn new(dep: Deployment, unix_sockets: bool) -> Project {
        Project::with_sandbox(dep, unix_sockets, "")
    }

    /// As `new`, with `extra` lines appended to the `[sandbox]` table.
    pub fn with_sandbox(dep: Deployment, unix_sockets: bool, extra: &str) -> Project {
        Project::with_tables(dep, unix_sockets, "", extra)
    }

    /// As `with_sandbox`, with `env` lines (`path` included) as the
    /// `[env]` table when not empty.
    pub fn with_tables(dep: Deployment, unix_sockets: bool, env: &str, extra: &str) -> Project {
        Project::with_tables_in(dep, unix_sockets, env, extra, None)
    }

    /// As `with_tables`, the root made in `parent` (default: the temp
    /// directory).
    pub fn with_tables_in(
        dep: Deployment,
        unix_sockets: bool,
        env: &str,
        extra: &str,
        parent: Option<&Path>,
    ) -> Project {
        let env = match env {
            "" => "path = \"/usr/local/bin:/usr/bin:/bin\"\n",
            given => given,
        };
        let root = match parent {
            Some(dir) => {
                let d = tempfile::Builder::new()
                    .prefix("ae-contain-root-")
                    .tempdir_in(dir)
                    .unwrap();
                std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
                d
            }
            None => tempdir("ae-contain-root-", 0o755),
        };
        let policy_dir = tempdir("ae-contain-policy-", 0o755);
        // An ordinary user gets a run cgroup only where a subtree is
        // delegated to it, and strict enforcement requires one unless the
        // policy says otherwise: that deployment takes what the host gives.
        let require = match dep {
            Deployment::User => "[sandbox.require]\ncgroup = \"best_effort\"\n",
            _ => "",
        };
        let policy = format!(
            "name = \"contain-test\"\n\
             description = \"Allows every command; the kernel sandbox contains it.\"\n\
             default = \"allow\"\n\
             default_risk = \"low\"\n\
             [env]\n\
             {env}\
             [limits]\n\
             timeout_ms = 30000\n\
             [sandbox]\n\
             enforcement = \"strict\"\n\
             unix_sockets = {unix_sockets}\n\
             {extra}{require}"
        );
        let p = policy_dir.path().join("policy.toml");
        std::fs::write(&p, policy).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let project = Project {
            dep,
            root,
            policy_dir,
        };
        project.chown(project.path());
        project
    }

    pub fn path(&self) -> &Path {
        self.root.path()
    }

    /// The policy file the CLI is given.
    pub fn policy_file(&self) -> PathBuf {
        self.policy_dir.path().join("policy.toml")
    }

    pub fn child_uid(&self) -> u32 {
        self.dep.child_uid()
    }

    fn chown(&self, p: &Path) {
        if is_root() {
            let o = self.dep.owner();
            std::os::unix::fs::chown(p, Some(o), Some(o)).unwrap();
        }
    }

    /// Writes a file into the root, owned like the root, readable by all;
    /// its directories are made (owned like the root) when missing.
    pub fn write(&self, rel: &str, content: &str) {
        let p = self.path().join(rel);
        let mut made = Vec::new();
        let mut at = p.parent();
        while let Some(dir) = at.filter(|d| !d.exists()) {
            made.push(dir.to_path_buf());
            at = dir.parent();
        }
        for dir in made.iter().rev() {
            std::fs::create_dir(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            self.chown(dir);
        }
        std::fs::write(&p, content).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        self.chown(&p);
    }

    /// As `write`, executable by all.
    pub fn write_exec(&self, rel: &str, content: &str) {
        self.write(rel, content);
        let p = self.path().join(rel);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Runs `argv` through the CLI in the sandbox and returns its result.
    pub fn run(&self, argv: &[&str]) -> Value {
        let mut args = vec!["--"];
        args.extend_from_slice(argv);
        self.run_cli(&args)
    }

    /// Runs a shell string through the CLI in the sandbox.
    pub fn run_shell(&self, script: &str) -> Value {
        self.run_cli(&["--shell", script])
    }

    /// As `run_shell`, with `env` in the supervisor's environment.
    pub fn run_shell_env(&self, script: &str, env: &[(&str, &str)]) -> Value {
        self.run_cli_env(&["--shell", script], env)
    }

    /// The CLI with the project's policy and root, then `args`.
    fn run_cli(&self, args: &[&str]) -> Value {
        self.run_cli_env(args, &[])
    }

    fn run_cli_env(&self, args: &[&str], env: &[(&str, &str)]) -> Value {
        let mut cmd = self.as_supervisor(BIN);
        cmd.envs(env.iter().copied());
        cmd.arg("--policy")
            .arg(self.policy_dir.path().join("policy.toml"))
            .arg("--root")
            .arg(self.path())
            .args(args);
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().unwrap_or_else(|| {
            panic!(
                "{:?}: no result; stderr: {}",
                self.dep,
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            v["sandbox"]["seccomp"], true,
            "{:?}: the run must be sandboxed: {v:#}",
            self.dep
        );
        v
    }

    /// Runs `argv` in the root as the child's uid without any sandbox: the
    /// control that shows what the same program does when nothing stops it.
    pub fn run_unconfined(&self, argv: &[&str]) -> Output {
        let uid = self.child_uid();
        let mut cmd = if is_root() {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .args(argv);
            c
        } else {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        };
        cmd.current_dir(self.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TMPDIR", "/tmp")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The CLI (or another program) as this deployment's supervisor.
    fn as_supervisor(&self, program: &str) -> Command {
        let mut cmd = if self.dep == Deployment::User && is_root() {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={ORDINARY}"))
                .arg(format!("--regid={ORDINARY}"))
                .arg("--clear-groups")
                .arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.env_clear().env("PATH", "/usr/bin:/bin");
        cmd
    }
}

fn tempdir(prefix: &str, mode: u32) -> tempfile::TempDir {
    let d = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// A directory outside every project root, open to every user by its mode
/// bits, so only the sandbox can be what keeps a child out.
pub fn outside_dir() -> tempfile::TempDir {
    tempdir("ae-contain-outside-", 0o777)
}

/// The stdout of a run, for messages and checks.
pub fn stdout(v: &Value) -> &str {
    v["stdout"].as_str().unwrap_or_default()
}

/// A process of `uid` outside the sandbox, in its own process group;
/// killed when dropped.
pub struct Victim {
    child: Child,
}

impl Victim {
    pub fn start(uid: u32) -> Victim {
        let mut cmd = Command::new("/bin/sleep");
        cmd.arg("60").process_group(0);
        if is_root() {
            cmd.uid(uid).gid(uid);
        }
        Victim {
            child: cmd.spawn().unwrap(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A random hex token, so names made by one test never meet another's.
pub fn token() -> String {
    let mut b = [0u8; 6];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut b).unwrap();
    b.iter().map(|x| format!("{x:02x}")).collect()
}
