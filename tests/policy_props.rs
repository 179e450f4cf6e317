//! Arbitrary input never panics the engine: every string gets a decision
//! or a parse error, and an argv always gets a decision.

use std::path::Path;

use agent_exec::policy::{Context, Policy};
use agent_exec::request::CommandSpec;
use proptest::prelude::*;

fn policy() -> Policy {
    Policy::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml")).unwrap()
}

/// Shell-heavy fragments so generated input reaches the interesting paths
/// (wrappers, nesting, substitutions, globs, redirections, `cd`).
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
        "[a-z./$ -]{0,6}",
        "\\PC{0,3}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn shell_strings_never_panic(parts in prop::collection::vec(fragment(), 0..12)) {
        let root = Path::new("/nonexistent-prop-root");
        let ctx = Context { root, cwd: root };
        let text: String = parts.concat();
        let _ = POLICY.with(|p| p.decide(&CommandSpec::Shell(text), &ctx));
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
}
