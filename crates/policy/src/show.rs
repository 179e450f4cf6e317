//! The effective rules of a loaded policy (overlays included), for people
//! reading what a policy does: `agent-exec policy show`.

use serde::Serialize;

use crate::rules::OptSpec;
use crate::{Policy, RiskLevel, Verdict};

/// One rule as the engine uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RuleView {
    /// The rule's id.
    pub id: String,
    /// What it decides.
    pub action: Verdict,
    /// Its risk.
    pub risk: RiskLevel,
    /// The programs it names (empty for `pattern` and `under_root` rules).
    pub programs: Vec<String>,
    /// Its conditions, as written: `subcommands = [...]`, `options = [...]`.
    pub conditions: Vec<String>,
    /// Shown to the model when it decides.
    pub reason: String,
    /// Offered when it refuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    /// An allow rule that classes the command read-only.
    pub read_only: bool,
}

fn quoted(list: impl IntoIterator<Item = String>) -> String {
    let items: Vec<String> = list.into_iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(", "))
}

fn option_text(o: &OptSpec) -> String {
    match o {
        OptSpec::Long(s) | OptSpec::Single(s) => s.clone(),
        OptSpec::Short(c) => format!("-{c}"),
        OptSpec::SinglePrefix(p) => format!("{p}*"),
    }
}

impl Policy {
    /// Every rule in the order the policy (then each overlay) gives them.
    pub fn rules(&self) -> Vec<RuleView> {
        self.engine
            .rules
            .all()
            .iter()
            .map(|r| {
                let mut conditions = Vec::new();
                if !r.subcommands.is_empty() {
                    let subs = r.subcommands.iter().map(|s| s.join(" "));
                    conditions.push(format!("subcommands = {}", quoted(subs)));
                }
                if !r.prefix.is_empty() {
                    conditions.push(format!("prefix = {}", quoted(r.prefix.iter().cloned())));
                }
                if !r.options.is_empty() {
                    let opts = r.options.iter().map(option_text);
                    conditions.push(format!("options = {}", quoted(opts)));
                }
                if let Some(re) = &r.safe_values {
                    conditions.push(format!("safe_values = {:?}", re.as_str()));
                }
                if !r.unless_options.is_empty() {
                    let opts = r.unless_options.iter().map(option_text);
                    conditions.push(format!("unless_options = {}", quoted(opts)));
                }
                if r.global_options_only {
                    conditions.push("global_options_only = true".into());
                }
                if let Some(re) = &r.args_regex {
                    conditions.push(format!("args_regex = {:?}", re.as_str()));
                }
                if let Some(re) = &r.pattern {
                    conditions.push(format!("pattern = {:?}", re.as_str()));
                }
                if r.under_root {
                    conditions.push("under_root = true".into());
                }
                RuleView {
                    id: r.id.clone(),
                    action: r.action,
                    risk: r.risk,
                    programs: r.programs.clone(),
                    conditions,
                    reason: r.reason.clone(),
                    suggestion: r.suggestion.clone(),
                    read_only: r.read_only,
                }
            })
            .collect()
    }
}
