//! Every shipped policy loads (its own examples pass) and carries enough
//! examples to document itself.

use std::path::Path;

use agent_exec_policy::Policy;

/// The policies the project ships, at the workspace root.
const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");

#[test]
fn every_shipped_policy_loads_with_at_least_30_examples() {
    let dir = Path::new(POLICIES);
    let mut seen = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        seen += 1;
        match Policy::load(&path) {
            Ok(policy) => {
                assert!(
                    policy.example_count() >= 30,
                    "{} has only {} examples",
                    path.display(),
                    policy.example_count()
                );
                assert_eq!(policy.sha256.len(), 64);
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        seen >= 3,
        "expected code, readonly and ci policies, found {seen}"
    );
}
