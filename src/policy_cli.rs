//! `agent-exec policy show` and `agent-exec policy explain`: what a policy
//! (with its overlays) says, and how it reaches one decision.

use std::path::{Path, PathBuf};

use agent_exec::policy::{CommandSpec, Context, FindingKind, Policy};

/// Exit status for a policy that does not load.
const POLICY_ERROR: i32 = 125;

fn load(file: &Path) -> Result<Policy, i32> {
    Policy::load(file).map_err(|e| {
        eprintln!("agent-exec: {e}");
        POLICY_ERROR
    })
}

/// The policy at `file`, amended by the rules humans saved in the state
/// directory `state` (`approve --remember`), as a service using that state
/// directory decides under it.
fn load_amended(file: &Path, state: Option<&Path>) -> Result<(Policy, usize), i32> {
    let policy = load(file)?;
    let Some(dir) = state else {
        return Ok((policy, 0));
    };
    let path = agent_exec::approvals::amendments_path(dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((policy, 0)),
        Err(e) => {
            eprintln!("agent-exec: {}: {e}", path.display());
            return Err(POLICY_ERROR);
        }
    };
    let before = policy.rules().len();
    let amended = policy
        .with_amendments(&text, &path.display().to_string())
        .map_err(|e| {
            eprintln!("agent-exec: {e}");
            POLICY_ERROR
        })?;
    let added = amended.rules().len().saturating_sub(before);
    Ok((amended, added))
}

/// The effective rules: the base policy's, then each overlay's, then the
/// amendments saved in `state`.
pub(crate) fn show(file: &Path, state: Option<&Path>, json: bool) -> i32 {
    let (policy, amendments) = match load_amended(file, state) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let rules = policy.rules();
    if json {
        let out = serde_json::json!({
            "name": policy.name,
            "origin": policy.origin,
            "sha256": policy.sha256,
            "default": policy.default,
            "layers": policy.layers(),
            "amendments": amendments,
            "shell": policy.shell,
            "env_path": policy.env.path,
            "rules": rules,
        });
        println!("{out}");
        return 0;
    }
    println!(
        "policy {:?} ({}), sha256 {}",
        policy.name, policy.origin, policy.sha256
    );
    for (origin, added) in policy.layers() {
        println!("  overlay {origin}: {added} rule(s) added");
    }
    if let Some(dir) = state {
        println!(
            "  amendments {}: {amendments} rule(s) added",
            agent_exec::approvals::amendments_path(dir).display()
        );
    }
    println!(
        "default: {} (risk {:?})",
        policy.default, policy.default_risk
    );
    println!(
        "control flow: {:?}, unsupported constructs: {:?}",
        policy.shell.control_flow, policy.shell.unsupported
    );
    println!("PATH: {}", policy.env.path);
    println!("{} rule(s), strictest matching rule decides:", rules.len());
    for r in rules {
        let who = match r.programs.as_slice() {
            [] => String::new(),
            list => format!(" {}", list.join(",")),
        };
        println!(
            "  {:<22} {:<16} {:<8}{who}{}",
            r.id,
            r.action.to_string(),
            format!("{:?}", r.risk).to_lowercase(),
            if r.read_only { " (read-only)" } else { "" }
        );
        for c in &r.conditions {
            println!("      {c}");
        }
    }
    0
}

/// Every finding for one command, in walk order, and the one that decides.
pub(crate) fn explain(
    file: &Path,
    shell: String,
    root: Option<PathBuf>,
    cwd: Option<String>,
    state: Option<&Path>,
    json: bool,
) -> i32 {
    let policy = match load_amended(file, state) {
        Ok((p, _)) => p,
        Err(code) => return code,
    };
    let root = root.unwrap_or_else(|| PathBuf::from("."));
    let root = match std::fs::canonicalize(&root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent-exec: --root {}: {e}", root.display());
            return POLICY_ERROR;
        }
    };
    let cwd = cwd.map_or_else(|| root.clone(), |c| root.join(c));
    let ctx = Context {
        root: &root,
        cwd: &cwd,
    };
    let evaluation = match policy.evaluate(&CommandSpec::Shell(shell), &ctx) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("agent-exec: cannot parse the command: {e}");
            return 2;
        }
    };
    let decision = evaluation.decision();
    if json {
        let findings: Vec<_> = evaluation
            .findings()
            .iter()
            .map(|f| {
                serde_json::json!({
                    "command": f.command.as_ref().map(|c| &c.text),
                    "depth": f.command.as_ref().map(|c| c.depth),
                    "kind": format!("{:?}", f.kind).to_lowercase(),
                    "rule": f.rule,
                    "verdict": f.verdict,
                    "risk": f.risk,
                    "reason": f.reason,
                    "token": f.token,
                    "superseded": f.superseded,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({ "findings": findings, "decision": decision })
        );
    } else {
        for f in evaluation.findings() {
            let at = f
                .command
                .as_ref()
                .map_or("(the whole request)".to_string(), |c| {
                    format!("{}`{}`", "  ".repeat(c.depth), c.text)
                });
            let kind = match f.kind {
                FindingKind::Rule => "rule",
                FindingKind::Default => "default",
                FindingKind::Builtin => "check",
                _ => "other",
            };
            println!(
                "{at}\n    {kind} {} -> {}{}: {}",
                f.rule,
                f.verdict,
                if f.superseded { " (passed over)" } else { "" },
                f.reason
            );
        }
        println!(
            "decision: {} by `{}` (risk {:?}{}): {}",
            decision.verdict,
            decision.rule,
            decision.risk,
            decision
                .token
                .as_ref()
                .map_or(String::new(), |t| format!(", at `{t}`")),
            decision.reason
        );
        if let Some(s) = &decision.suggestion {
            println!("instead: {s}");
        }
    }
    match decision.verdict {
        agent_exec::Verdict::Allow => 0,
        _ => 126,
    }
}
