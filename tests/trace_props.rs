//! Properties: readers never crash on damaged traces, and generated
//! secrets never survive redaction.

use agent_exec::trace::parse_trace;
use agent_exec::trace::{AuditOptions, Redactor, audit};
use proptest::prelude::*;

const VALID: &str = r#"{"event":"tool_call","ts_unix_ms":1,"gen_ai.tool.call.id":"c1","gen_ai.tool.name":"run_shell","args_hash":"h","deadline_ms":0}"#;

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn damaged_traces_are_reported_not_fatal(
        chunks in prop::collection::vec(
            prop_oneof![
                Just(VALID.to_string()),
                Just(VALID[..VALID.len() / 2].to_string()),
                "\\PC{0,40}",
                prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            ],
            0..12,
        ),
        trailing_newline in any::<bool>(),
    ) {
        let mut text = chunks.join("\n");
        if trailing_newline {
            text.push('\n');
        }
        let lines = text.split('\n').count();
        let parsed = parse_trace(text.as_bytes());
        for p in &parsed.problems {
            prop_assert!(p.line >= 1 && p.line <= lines);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, &text).unwrap();
        let report = audit(&[path], &AuditOptions::default());
        prop_assert_eq!(report.failed(), !report.issues.is_empty());
    }

    #[test]
    fn generated_keys_never_survive(
        prefix in "[a-z ]{0,20}",
        suffix in "[a-z ]{0,20}",
        body in "[A-Za-z0-9]{36}",
        kind in 0usize..4,
    ) {
        let secret = match kind {
            0 => format!("ghp_{body}"),
            1 => format!("sk-proj-{body}"),
            2 => format!("AKIA{}", body.to_ascii_uppercase().get(..16).unwrap_or("")),
            _ => format!("API_TOKEN={body}"),
        };
        let red = Redactor::with_literals(vec![]);
        let text = format!("{prefix} {secret} {suffix}");
        let out = red.redact(&text);
        let needle = if kind == 3 { body.as_str() } else { secret.as_str() };
        prop_assert!(!out.contains(needle), "{} survived in {}", needle, out);
    }
}
