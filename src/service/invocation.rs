//! Stage 5: what exactly runs. The environment (a scrubbed copy of the
//! supervisor's plus the policy's), the program and argv (the words
//! themselves, or `bash -p -c` for a command that needs a shell), the
//! working directory and the limits, ready for exec.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::Service;
use super::refusal::Refusal;
use crate::policy::{Decision, EnvFate, Policy};
use crate::request::{CommandSpec, RunRequest};
use crate::result::SandboxSummary;
use crate::sandbox::ExecSpec;
use crate::sandbox::{RootAccess, RunSandbox};

/// The environment every child starts from, computed once: the
/// supervisor's environment does not change while it runs.
pub(crate) struct BaseEnv {
    /// `NAME=value` entries from the keep-list and the policy's fixed values.
    entries: Vec<(String, String)>,
    /// Names present in the supervisor's environment (or set by the
    /// policy) and withheld because they look secret, whether or not the
    /// keep-list named them.
    scrubbed: Vec<String>,
}

/// Names the service sets itself for every run.
const OWN_NAMES: [&str; 3] = ["PATH", "HOME", "TMPDIR"];

impl BaseEnv {
    pub(crate) fn from_policy(policy: &Policy) -> BaseEnv {
        let mut entries = Vec::new();
        let mut scrubbed = Vec::new();
        for (k, v) in std::env::vars_os() {
            let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
                continue;
            };
            match policy.env_fate(k) {
                EnvFate::Pass if crate::policy::is_secret_value(v) => scrubbed.push(k.to_string()),
                EnvFate::Secret => scrubbed.push(k.to_string()),
                EnvFate::Pass if !OWN_NAMES.contains(&k) => {
                    entries.push((k.to_string(), v.to_string()))
                }
                EnvFate::Pass | EnvFate::Drop => {}
            }
        }
        for (k, v) in &policy.env.set {
            if policy.is_secret_name(k) || crate::policy::is_secret_value(v) {
                scrubbed.push(k.clone());
            } else if !OWN_NAMES.contains(&k.as_str()) {
                entries.retain(|(n, _)| n != k);
                entries.push((k.clone(), v.clone()));
            }
        }
        scrubbed.sort();
        scrubbed.dedup();
        BaseEnv { entries, scrubbed }
    }
}

/// One run, ready for exec.
pub(crate) struct Invocation {
    pub(crate) spec: ExecSpec,
    /// The effective timeout, for the message when it expires.
    pub(crate) timeout_ms: u64,
    pub(crate) env_scrubbed: Vec<String>,
    pub(crate) sandbox: SandboxSummary,
    /// When the policy added safe-mode flags: the command as it ran, for
    /// the result's message (and so the trace).
    pub(crate) ran_as: Option<String>,
}

impl Service {
    pub(super) fn invocation(
        &self,
        req: &RunRequest,
        decision: &Decision,
        cwd: &Path,
    ) -> Result<Invocation, Refusal> {
        // What runs is what the policy allowed, with the flags it added.
        let command = decision.command_to_run(&req.command).ok_or_else(|| {
            Refusal::Internal(
                "the policy's safe-mode flags do not fit this command; nothing ran".into(),
            )
        })?;
        let (program, argv) = self.program_and_argv(&command, decision, cwd)?;
        // A command the policy classes read-only, or any command of a
        // read-only policy, gets the ruleset that grants no write on the
        // root: the kernel backs the classification.
        let access = if decision.read_only || self.policy.sandbox.read_only {
            RootAccess::ReadOnly
        } else {
            RootAccess::ReadWrite
        };
        let run = self
            .sandbox
            .for_run_with(access)
            .map_err(|e| Refusal::SandboxUnavailable(e.to_string()))?;
        let env = self.child_env(&run);
        let Ok(cwd) = CString::new(cwd.as_os_str().as_bytes()) else {
            return Err(Refusal::Internal("cwd contains a NUL byte".into()));
        };
        let limits = &self.policy.limits;
        // A request may shorten the output limit, and choose its timeout
        // up to the policy's maximum (validation refused anything above).
        let output_chars = req
            .output_chars
            .map_or(limits.output_chars, |n| n.min(limits.output_chars));
        let timeout_ms = req
            .timeout_ms
            .unwrap_or(limits.timeout_ms)
            .min(limits.max_timeout_ms);
        let sandbox = run.summary().into();
        let spec = ExecSpec {
            program,
            argv,
            env,
            cwd,
            sandbox: Arc::new(run),
            stdin: req.stdin.as_ref().map(|s| s.as_bytes().to_vec()),
            timeout: Duration::from_millis(timeout_ms),
            kill_grace: Duration::from_millis(limits.kill_grace_ms),
            drain: Duration::from_millis(limits.drain_ms),
            output_chars,
            hard_limit_bytes: limits.output_hard_limit_bytes,
        };
        Ok(Invocation {
            spec,
            timeout_ms,
            env_scrubbed: self.base_env.scrubbed.clone(),
            sandbox,
            ran_as: ran_as(&command, decision),
        })
    }

    /// The child's whole environment: the policy's PATH, the base entries,
    /// then the run's private HOME and TMPDIR and what the sandbox adds.
    fn child_env(&self, run: &RunSandbox) -> Vec<CString> {
        let mut env: Vec<CString> = Vec::with_capacity(self.base_env.entries.len() + 8);
        let mut push = |k: &str, v: &str| {
            if let Ok(c) = CString::new(format!("{k}={v}")) {
                env.push(c);
            }
        };
        push("PATH", &self.project_env.path);
        for (k, v) in &self.base_env.entries {
            push(k, v);
        }
        for (k, v) in &self.project_env.env {
            push(k, v);
        }
        if let Some(venv) = self.project_env.virtual_env()
            && !self
                .base_env
                .entries
                .iter()
                .any(|(k, _)| k == "VIRTUAL_ENV")
        {
            push("VIRTUAL_ENV", &venv.to_string_lossy());
        }
        let home = run.home().to_string_lossy().into_owned();
        push("HOME", &home);
        push("TMPDIR", &home);
        let mut extra = run.extra_env();
        add_git_config(&mut extra, &self.project_env.git_identity);
        for (k, v) in extra {
            push(&k, &v);
        }
        env
    }

    /// The program and argv to exec: the words themselves when the request
    /// is one plain command, `bash -p -c STRING` otherwise (only after the
    /// policy passed every part).
    fn program_and_argv(
        &self,
        command: &CommandSpec,
        decision: &Decision,
        cwd: &Path,
    ) -> Result<(CString, Vec<CString>), Refusal> {
        let words: Vec<String> = match (command, decision.needs_shell) {
            (CommandSpec::Shell(s), true) => return self.shell_argv(s),
            // The words exactly as the policy saw them: the same lexer, so
            // what runs is what was checked.
            (CommandSpec::Shell(s), false) => match crate::lexer::lex(s) {
                Ok(script) if script.commands.len() == 1 => script.commands[0]
                    .words
                    .iter()
                    .map(|w| w.value.clone())
                    .collect(),
                Ok(_) => {
                    return Err(Refusal::Internal(
                        "the policy and the lexer disagree on this command's shape; nothing ran"
                            .into(),
                    ));
                }
                Err(e) => {
                    return Err(Refusal::Parse {
                        error: e.to_string(),
                        at: None,
                    });
                }
            },
            (CommandSpec::Argv(v), _) => v.clone(),
        };
        let Some(first) = words.first() else {
            return Err(Refusal::InvalidArguments("command: empty".into()));
        };
        let program: PathBuf = if first.contains('/') {
            cwd.join(first)
        } else {
            crate::policy::resolve_program(first, &self.project_env.path).ok_or_else(|| {
                Refusal::ProgramNotFound {
                    program: first.clone(),
                    path: self.project_env.path.clone(),
                }
            })?
        };
        let program = CString::new(program.as_os_str().as_bytes())
            .map_err(|_| Refusal::InvalidArguments("command: NUL byte".into()))?;
        let argv = words
            .iter()
            .map(|w| cstring(w))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((program, argv))
    }

    fn shell_argv(&self, script: &str) -> Result<(CString, Vec<CString>), Refusal> {
        let Some(shell) = &self.shell else {
            return Err(Refusal::NoShell);
        };
        // bash, because the lexer and the policy read the request with
        // bash's grammar; `-p` keeps BASH_ENV, ENV and exported functions
        // from running anything before the checked string.
        Ok((
            shell.clone(),
            vec![
                c"bash".to_owned(),
                c"-p".to_owned(),
                c"-c".to_owned(),
                cstring(script)?,
            ],
        ))
    }
}

/// How a command the policy added flags to ran, said for the result:
/// `None` when it runs as sent.
fn ran_as(command: &CommandSpec, decision: &Decision) -> Option<String> {
    if decision.injected.is_empty() {
        return None;
    }
    let text = match command {
        CommandSpec::Shell(s) => s.clone(),
        CommandSpec::Argv(v) => shell_words::join(v),
    };
    let mut added: Vec<String> = decision
        .injected
        .iter()
        .map(|f| format!("`{} {}`", f.program, f.flag))
        .collect();
    added.dedup();
    Some(format!(
        "ran as `{text}`: the policy runs read-only programs in their safe mode ({})",
        added.join(", ")
    ))
}

/// Appends git configuration entries to the `GIT_CONFIG_COUNT` list the
/// sandbox started (entries git reads as if from a configuration file the
/// child cannot change for other runs).
fn add_git_config(env: &mut Vec<(String, String)>, entries: &[(String, String)]) {
    if entries.is_empty() {
        return;
    }
    let count_at = env.iter().position(|(k, _)| k == "GIT_CONFIG_COUNT");
    let mut n: usize = count_at.and_then(|i| env[i].1.parse().ok()).unwrap_or(0);
    for (key, value) in entries {
        env.push((format!("GIT_CONFIG_KEY_{n}"), key.clone()));
        env.push((format!("GIT_CONFIG_VALUE_{n}"), value.clone()));
        n += 1;
    }
    match count_at {
        Some(i) => env[i].1 = n.to_string(),
        None => env.push(("GIT_CONFIG_COUNT".into(), n.to_string())),
    }
}

/// The first bash of [`crate::policy::SHELL_PATHS`] the host has.
pub(crate) fn find_shell() -> Option<CString> {
    crate::policy::SHELL_PATHS
        .iter()
        .find(|p| Path::new(p).is_file())
        .and_then(|p| CString::new(*p).ok())
}

fn cstring(s: &str) -> Result<CString, Refusal> {
    CString::new(s).map_err(|_| Refusal::InvalidArguments("command: contains a NUL byte".into()))
}
