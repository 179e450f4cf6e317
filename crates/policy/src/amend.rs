//! Approvals and amendments: the `[approvals]` table, and allow rules a
//! human added by approving a command ("approve and remember").
//!
//! An amendment file holds `[[rule]]`s in the policy's own syntax. They
//! are compiled and checked like the policy's rules, may only allow, and
//! outrank the `require_approval` rules they answer (never a deny, never
//! an engine check). The amended policy must still pass the policy's own
//! examples, and its hash covers both files, so anything bound to the
//! policy's hash (approvals, traces, replay) sees the change.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toml::Spanned;

use crate::engine::Engine;
use crate::error::{Issue, LineIndex, PolicyError};
use crate::load::{RuleFile, check_examples, compile_all, compile_rules, syntax_error};
use crate::{Policy, Verdict};

/// How long an approval holds unless the policy says otherwise: long
/// enough for a human to look, short enough that a forgotten one lapses.
pub const DEFAULT_APPROVAL_TTL_SECS: u64 = 15 * 60;

/// `[approvals]`: who may decide `require_approval` calls out of band, and
/// how long a pending or granted approval holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsPolicy {
    /// Uids that may approve or reject. Empty: the uid the supervisor runs
    /// as, and root.
    pub approvers: Vec<u32>,
    /// Seconds from the request until its approval lapses (at least 1).
    pub ttl_secs: u64,
}

impl Default for ApprovalsPolicy {
    fn default() -> Self {
        ApprovalsPolicy {
            approvers: Vec::new(),
            ttl_secs: DEFAULT_APPROVAL_TTL_SECS,
        }
    }
}

impl ApprovalsPolicy {
    /// The uids that may approve, for a supervisor running as `supervisor`.
    pub fn approvers_for(&self, supervisor: u32) -> Vec<u32> {
        if !self.approvers.is_empty() {
            return self.approvers.clone();
        }
        let mut uids = vec![supervisor];
        if supervisor != 0 {
            uids.push(0);
        }
        uids
    }
}

/// An amendment file: nothing but rules.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AmendmentFile {
    #[serde(default, rename = "rule")]
    rules: Vec<Spanned<RuleFile>>,
}

impl Policy {
    /// This policy with the allow rules of the amendment file `text`
    /// (`origin` names it in messages) added. Refused, with the file's
    /// line and key, when a rule does not validate, is not a program
    /// allow rule, reuses an id, or when the amended policy fails one of
    /// this policy's examples.
    pub fn with_amendments(&self, text: &str, origin: &str) -> Result<Policy, PolicyError> {
        let file: AmendmentFile =
            toml::from_str(text).map_err(|e| syntax_error(text, origin, e))?;
        let lines = LineIndex::new(text);
        let mut issues = Vec::new();
        let mut added = compile_rules(&lines, &file.rules, &mut issues);
        let base = self.engine.rules.all();
        for rule in &mut added {
            if rule.action != Verdict::Allow || rule.pattern.is_some() {
                issues.push(Issue {
                    line: rule.line,
                    key: format!("rule {}: action", rule.id),
                    message:
                        "an amendment may only allow a program (action = \"allow\" with `program`)"
                            .into(),
                });
            }
            if let Some(same) = base.iter().find(|b| b.id == rule.id) {
                issues.push(Issue {
                    line: rule.line,
                    key: format!("rule {}: id", rule.id),
                    message: format!(
                        "the policy already has a rule with this id (line {})",
                        same.line
                    ),
                });
            }
            rule.amendment = true;
        }
        if let Err(more) = compile_all(&added) {
            issues.extend(more);
        }
        if !issues.is_empty() {
            return Err(PolicyError::Invalid {
                origin: origin.to_string(),
                issues,
            });
        }
        let mut rules = base.to_vec();
        rules.extend(added);
        let mut engine = Engine::build(
            rules,
            &self.env,
            &self.sandbox,
            &self.shell,
            self.engine.secret_names.clone(),
        );
        engine.example_count = self.engine.example_count;
        let mut hasher = Sha256::new();
        hasher.update(self.sha256.as_bytes());
        hasher.update(b"\n");
        hasher.update(text.as_bytes());
        let amended = Policy {
            sha256: hex::encode(hasher.finalize()),
            engine,
            ..self.clone()
        };
        check_examples(&amended, &self.origin, &self.examples)?;
        Ok(amended)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{CommandSpec, Context};

    const BASE: &str = r#"
name = "t"
default = "deny"

[[rule]]
id = "python"
program = "python3"
action = "require_approval"
risk = "high"
reason = "runs code"

[[rule]]
id = "rm-root"
program = "rm"
prefix = ["-rf", "/"]
action = "deny"
risk = "critical"
reason = "no"

[[example]]
command = "python3 -c 'print(2)'"
decision = "require_approval"
"#;

    fn decide(p: &Policy, cmd: &str) -> Verdict {
        let root = Path::new("/nonexistent-amend-root");
        let ctx = Context { root, cwd: root };
        p.decide(&CommandSpec::Shell(cmd.into()), &ctx)
            .unwrap()
            .verdict
    }

    fn amendment(program: &str, prefix: &str) -> String {
        format!(
            "[[rule]]\nid = \"approved-1\"\nprogram = \"{program}\"\nprefix = {prefix}\naction = \"allow\"\nrisk = \"high\"\nreason = \"approved by uid 0\"\n"
        )
    }

    #[test]
    fn an_amendment_allows_its_prefix_and_nothing_else() {
        let base = Policy::parse(BASE, "t.toml").unwrap();
        let amended = base
            .with_amendments(&amendment("python3", r#"["-c", "print(1)"]"#), "o.toml")
            .unwrap();
        assert_eq!(decide(&amended, "python3 -c 'print(1)'"), Verdict::Allow);
        assert_eq!(
            decide(&amended, "python3 -c 'print(1)' extra"),
            Verdict::Allow
        );
        assert_eq!(
            decide(&amended, "python3 -c 'print(3)'"),
            Verdict::RequireApproval
        );
        assert_eq!(
            decide(&base, "python3 -c 'print(1)'"),
            Verdict::RequireApproval
        );
        assert_ne!(amended.sha256, base.sha256);
    }

    #[test]
    fn an_amendment_never_outranks_a_deny() {
        let base = Policy::parse(BASE, "t.toml").unwrap();
        let amended = base
            .with_amendments(&amendment("rm", r#"["-rf"]"#), "o.toml")
            .unwrap();
        assert_eq!(decide(&amended, "rm -rf /"), Verdict::Deny);
    }

    #[test]
    fn an_amendment_is_checked_like_every_rule() {
        let base = Policy::parse(BASE, "t.toml").unwrap();
        let bad = "[[rule]]\nid = \"x\"\naction = \"deny\"\nrisk = \"low\"\nreason = \"r\"\nprogram = \"ls\"\n";
        let e = base.with_amendments(bad, "o.toml").unwrap_err().to_string();
        assert!(e.contains("may only allow"), "{e}");
        let dup = amendment("python3", "[]").replace("approved-1", "python");
        let e = base
            .with_amendments(&dup, "o.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("already has a rule"), "{e}");
        let unknown = "[[rule]]\nid = \"x\"\nbogus = 1\n";
        assert!(base.with_amendments(unknown, "o.toml").is_err());
        // The policy's example says `print(2)` needs approval.
        let breaks = amendment("python3", r#"["-c"]"#);
        let e = base
            .with_amendments(&breaks, "o.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("print(2)"), "{e}");
    }

    #[test]
    fn default_approvers_are_the_supervisor_and_root() {
        let a = ApprovalsPolicy::default();
        assert_eq!(a.approvers_for(1000), vec![1000, 0]);
        assert_eq!(a.approvers_for(0), vec![0]);
        let named = ApprovalsPolicy {
            approvers: vec![7],
            ttl_secs: 1,
        };
        assert_eq!(named.approvers_for(0), vec![7]);
    }
}
