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

/// The effective rules: the base policy's, then each overlay's.
pub(crate) fn show(file: &Path, json: bool) -> i32 {
    let policy = match load(file) {
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
    json: bool,
) -> i32 {
    let policy = match load(file) {
        Ok(p) => p,
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
