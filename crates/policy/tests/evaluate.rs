//! `Policy::evaluate` keeps every rule match and engine check that fired,
//! for every part of the request, and picks the same winner `decide` does.

use std::path::{Path, PathBuf};

use agent_exec_policy::{
    CommandSpec, Context, Evaluation, FindingKind, Policy, RiskLevel, Verdict,
};

const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    Project { _tmp: tmp, root }
}

fn code_policy() -> Policy {
    Policy::load(&Path::new(POLICIES).join("code.toml")).unwrap()
}

/// Evaluates and checks that `decide` agrees, as every caller may rely on.
fn evaluate(policy: &Policy, root: &Path, command: &str) -> Evaluation {
    let ctx = Context { root, cwd: root };
    let spec = CommandSpec::Shell(command.to_string());
    let evaluation = policy.evaluate(&spec, &ctx).unwrap();
    assert_eq!(
        evaluation.decision(),
        policy.decide(&spec, &ctx).unwrap(),
        "`{command}`"
    );
    evaluation
}

/// `(rule, verdict, command text)` of every finding, in order.
fn summary(e: &Evaluation) -> Vec<(String, Verdict, Option<String>)> {
    e.findings()
        .iter()
        .map(|f| {
            let text = f.command.as_ref().map(|c| c.text.clone());
            (f.rule.clone(), f.verdict, text)
        })
        .collect()
}

fn row(rule: &str, verdict: Verdict, command: Option<&str>) -> (String, Verdict, Option<String>) {
    (rule.to_string(), verdict, command.map(str::to_string))
}

#[test]
fn an_allowed_part_is_kept_beside_the_refused_one() {
    let p = project();
    let e = evaluate(&code_policy(), &p.root, "git status && rm -rf /");
    assert_eq!(e.verdict(), Verdict::Deny);
    let git = e
        .findings()
        .iter()
        .find(|f| f.rule == "git-read")
        .expect("the allow of `git status` is kept");
    assert_eq!(git.verdict, Verdict::Allow);
    assert_eq!(git.token.as_deref(), Some("status"));
    let command = git
        .command
        .as_ref()
        .expect("git status is a simple command");
    assert_eq!(
        (command.index, command.text.as_str(), command.depth),
        (0, "git status", 0)
    );

    let refusals: Vec<_> = e
        .findings()
        .iter()
        .filter(|f| f.verdict == Verdict::Deny)
        .map(|f| (f.rule.as_str(), f.command.as_ref().map(|c| c.text.as_str())))
        .collect();
    // The raw pattern is about the whole request; the path check about `rm`.
    assert_eq!(
        refusals,
        [
            ("rm-rf-root", None),
            ("builtin:path-escape", Some("rm -rf /"))
        ]
    );
    // The first of equally strict findings wins, as in `decide`.
    assert_eq!(e.winner().map(|f| f.rule.as_str()), Some("rm-rf-root"));
    assert_eq!(e.winner().map(|f| f.risk), Some(RiskLevel::Critical));
}

#[test]
fn a_rule_and_a_path_check_both_fire_for_one_command() {
    let p = project();
    let e = evaluate(&code_policy(), &p.root, "cat /etc/passwd");
    assert_eq!(
        summary(&e),
        [
            row("read-tools", Verdict::Allow, Some("cat /etc/passwd")),
            row(
                "builtin:path-escape",
                Verdict::Deny,
                Some("cat /etc/passwd")
            ),
        ]
    );
    let kinds: Vec<_> = e.findings().iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::Rule, FindingKind::Builtin]);
    assert_eq!(
        e.winner().and_then(|f| f.token.as_deref()),
        Some("/etc/passwd")
    );
    assert!(e.findings().iter().all(|f| !f.superseded));
}

#[test]
fn nested_commands_name_their_own_text_and_depth() {
    let p = project();
    let policy = code_policy();
    let e = evaluate(&policy, &p.root, "echo $(cat /etc/passwd)");
    let escape = e
        .findings()
        .iter()
        .find(|f| f.rule == "builtin:path-escape")
        .and_then(|f| f.command.clone())
        .expect("the substitution's path check");
    assert_eq!((escape.text.as_str(), escape.depth), ("cat /etc/passwd", 1));
    // Findings about `echo` made after its substitution still name `echo`.
    let echo: Vec<_> = e
        .findings()
        .iter()
        .filter_map(|f| f.command.as_ref())
        .filter(|c| c.depth == 0)
        .map(|c| (c.index, c.text.as_str()))
        .collect();
    assert!(!echo.is_empty());
    assert!(
        echo.iter().all(|&c| c == (0, "echo $(cat /etc/passwd)")),
        "{echo:?}"
    );
    assert_eq!(escape.index, 1);

    // A nested shell's script is named as written inside it.
    let e = evaluate(&policy, &p.root, "bash -c 'cd sub && cat ../../x'");
    let texts: Vec<_> = e
        .findings()
        .iter()
        .filter_map(|f| f.command.as_ref())
        .map(|c| (c.text.as_str(), c.depth))
        .collect();
    assert!(texts.contains(&("cd sub", 1)), "{texts:?}");
    assert!(texts.contains(&("cat ../../x", 1)), "{texts:?}");
}

#[test]
fn an_engine_allow_is_kept_but_a_rule_allow_decides() {
    let p = project();
    let e = evaluate(&code_policy(), &p.root, "cd sub && git status");
    assert_eq!(
        summary(&e),
        [
            row("builtin:cd", Verdict::Allow, Some("cd sub")),
            row("git-read", Verdict::Allow, Some("git status")),
        ]
    );
    assert_eq!(e.winner().map(|f| f.rule.as_str()), Some("git-read"));
    assert!(e.read_only() && e.needs_shell());
}

#[test]
fn rules_passed_over_are_listed_as_superseded_and_never_decide() {
    let policy = Policy::parse(
        r#"
name = "t"
default = "deny"

[[rule]]
id = "git-any"
program = "git"
action = "allow"
risk = "high"
reason = "Any git command."

[[rule]]
id = "git-status"
program = "git"
subcommands = ["status"]
action = "allow"
risk = "low"
read_only = true
reason = "Shows the working tree."

[[rule]]
id = "git-push"
program = "git"
subcommands = ["push"]
action = "require_approval"
risk = "medium"
reason = "Publishes commits."
"#,
        "t.toml",
    )
    .unwrap();
    let p = project();

    // The more specific allow decides, although the other one is riskier.
    let e = evaluate(&policy, &p.root, "git status");
    let found: Vec<_> = e
        .findings()
        .iter()
        .map(|f| (f.rule.as_str(), f.risk, f.superseded))
        .collect();
    assert_eq!(
        found,
        [
            ("git-status", RiskLevel::Low, false),
            ("git-any", RiskLevel::High, true),
        ]
    );
    assert_eq!(e.decision().risk, RiskLevel::Low);
    assert!(e.decision().read_only);

    // The stricter rule decides over a match that allows.
    let e = evaluate(&policy, &p.root, "git push");
    let found: Vec<_> = e
        .findings()
        .iter()
        .map(|f| (f.rule.as_str(), f.verdict, f.superseded))
        .collect();
    assert_eq!(
        found,
        [
            ("git-push", Verdict::RequireApproval, false),
            ("git-any", Verdict::Allow, true),
        ]
    );
}

#[test]
fn argv_findings_name_the_argv() {
    let p = project();
    let policy = code_policy();
    let ctx = Context {
        root: &p.root,
        cwd: &p.root,
    };
    let argv = CommandSpec::Argv(vec!["cat".into(), "/etc/passwd".into()]);
    let e = policy.evaluate(&argv, &ctx).unwrap();
    assert_eq!(e.decision(), policy.decide(&argv, &ctx).unwrap());
    assert!(!e.needs_shell());
    let texts: Vec<_> = e
        .findings()
        .iter()
        .map(|f| f.command.as_ref().map(|c| c.text.as_str()))
        .collect();
    assert_eq!(texts, [Some("cat /etc/passwd"), Some("cat /etc/passwd")]);
}

#[test]
fn parse_errors_are_returned_by_evaluate_too() {
    let p = project();
    let ctx = Context {
        root: &p.root,
        cwd: &p.root,
    };
    let policy = code_policy();
    for bad in ["echo 'open", "   ", "ls |"] {
        let spec = CommandSpec::Shell(bad.to_string());
        assert_eq!(
            policy.evaluate(&spec, &ctx).map(|e| e.decision()),
            policy.decide(&spec, &ctx),
            "`{bad}`"
        );
        assert!(policy.evaluate(&spec, &ctx).is_err(), "`{bad}`");
    }
}
