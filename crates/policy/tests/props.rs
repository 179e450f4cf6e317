//! Arbitrary input never panics the engine: every string gets a decision
//! or a parse error, an argv always gets a decision, and the full
//! evaluation always agrees with the decision.

use std::path::Path;

use agent_exec_policy::{CommandSpec, Context, Policy, Verdict};
use proptest::prelude::*;

/// The policies the project ships, at the workspace root.
const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");

fn policy() -> Policy {
    Policy::load(&Path::new(POLICIES).join("code.toml")).unwrap()
}

/// Shell-heavy fragments so generated input reaches the interesting paths
/// (wrappers, nesting, substitutions, globs, redirections, `cd`, control
/// flow, `xargs`, `find -exec`).
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cd ".to_string()),
        Just("env -i ".to_string()),
        Just("bash -c '".to_string()),
        Just("$(".to_string()),
        Just(")".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just(" && ".to_string()),
        Just(" | ".to_string()),
        Just(" > ".to_string()),
        Just("{a,../b}".to_string()),
        Just("*".to_string()),
        Just("~".to_string()),
        Just("..".to_string()),
        Just("/".to_string()),
        Just("=".to_string()),
        Just("-".to_string()),
        Just("git ".to_string()),
        Just("sed -i ".to_string()),
        Just("ln -s ".to_string()),
        Just("eval ".to_string()),
        // Control flow and inner commands (code.toml checks them).
        Just("for f in ".to_string()),
        Just("; do ".to_string()),
        Just("; done".to_string()),
        Just("if ".to_string()),
        Just("; then ".to_string()),
        Just("; fi".to_string()),
        Just("case $x in ".to_string()),
        Just(") ".to_string()),
        Just(";; esac".to_string()),
        Just("( ".to_string()),
        Just("{ ".to_string()),
        Just("; }".to_string()),
        Just("f() ".to_string()),
        Just("while ".to_string()),
        Just("xargs ".to_string()),
        Just("find . -exec ".to_string()),
        Just(" {} ;".to_string()),
        Just(" -delete".to_string()),
        "[a-z./$ -]{0,6}",
        "\\PC{0,3}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn shell_strings_never_panic(parts in prop::collection::vec(fragment(), 0..12)) {
        let root = Path::new("/nonexistent-prop-root");
        let ctx = Context { root, cwd: root };
        let text: String = parts.concat();
        let _ = POLICY.with(|p| p.decide(&CommandSpec::Shell(text), &ctx));
    }

    /// `decide` keeps only the winner; the full evaluation must pick the
    /// same one, for shell strings and argvs alike.
    #[test]
    fn evaluate_agrees_with_decide(
        parts in prop::collection::vec(fragment(), 0..12),
        as_argv in any::<bool>(),
    ) {
        let root = Path::new("/nonexistent-prop-root");
        let ctx = Context { root, cwd: root };
        let spec = if as_argv {
            CommandSpec::Argv(parts)
        } else {
            CommandSpec::Shell(parts.concat())
        };
        let (decided, evaluated) = POLICY.with(|p| {
            (p.decide(&spec, &ctx), p.evaluate(&spec, &ctx))
        });
        if let Ok(e) = &evaluated {
            // The winner is one of the findings, and none is stricter.
            let strictest = e.findings().iter().filter(|f| !f.superseded).map(|f| f.verdict).max();
            prop_assert_eq!(strictest, e.winner().map(|w| w.verdict));
        }
        prop_assert_eq!(evaluated.map(|e| e.decision()), decided);
    }

    #[test]
    fn argv_always_decides(argv in prop::collection::vec(fragment(), 1..6)) {
        let root = Path::new("/nonexistent-prop-root");
        let ctx = Context { root, cwd: root };
        let nonempty = !argv[0].is_empty();
        let result = POLICY.with(|p| p.decide(&CommandSpec::Argv(argv), &ctx));
        prop_assert_eq!(result.is_ok(), nonempty);
    }
}

thread_local! {
    static POLICY: Policy = policy();
    static READONLY: Policy =
        Policy::load(&Path::new(POLICIES).join("readonly.toml")).unwrap();
    static CI: Policy =
        Policy::load(&Path::new(POLICIES).join("ci.toml")).unwrap();
}

/// Words that write, run or reach out, mixed with harmless ones.
fn risky() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("ls ".to_string()),
        Just("cat README.md ".to_string()),
        Just("git status ".to_string()),
        Just("git commit -m x ".to_string()),
        Just("sed -i s/a/b/ f ".to_string()),
        Just("tee out ".to_string()),
        Just("> out ".to_string()),
        Just(">> out ".to_string()),
        Just("2>&1 ".to_string()),
        Just("| ".to_string()),
        Just("&& ".to_string()),
        Just("; ".to_string()),
        Just("find . -delete ".to_string()),
        Just("sort -o x ".to_string()),
        Just("awk '{print > \"f\"}' ".to_string()),
        Just("env ".to_string()),
        Just("bash -c 'touch x' ".to_string()),
        Just("$(rm x) ".to_string()),
        Just("python3 x.py ".to_string()),
        Just("curl x ".to_string()),
        Just("cd sub ".to_string()),
        Just("unknowncmd ".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The read-only policy never allows a request it does not class as
    /// read-only.
    #[test]
    fn readonly_never_allows_a_mutating_request(parts in prop::collection::vec(risky(), 1..6)) {
        let root = Path::new("/nonexistent-prop-root");
        let ctx = Context { root, cwd: root };
        let text: String = parts.concat();
        if let Ok(d) = READONLY.with(|p| p.decide(&CommandSpec::Shell(text.clone()), &ctx)) {
            prop_assert!(d.verdict != Verdict::Allow || d.read_only, "{text}: {d:?}");
        }
    }

    /// CI is non-interactive: nothing is ever sent to approval.
    #[test]
    fn ci_never_asks_for_approval(parts in prop::collection::vec(risky(), 1..6)) {
        let root = Path::new("/nonexistent-prop-root");
        let ctx = Context { root, cwd: root };
        let text: String = parts.concat();
        if let Ok(d) = CI.with(|p| p.decide(&CommandSpec::Shell(text.clone()), &ctx)) {
            prop_assert!(d.verdict != Verdict::RequireApproval, "{text}: {d:?}");
        }
    }
}
