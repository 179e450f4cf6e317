//! Warnings about a loaded policy that do not stop it loading: rules that
//! can never decide, allowed programs that are not installed, sandbox
//! paths and PATH entries that mean nothing here.

use std::path::Path;

use crate::resolve::resolve_program;
use crate::rules::Rule;
use crate::{Policy, Verdict};

impl Policy {
    /// Warnings that do not stop loading: rules that can never decide,
    /// allowed programs that are not installed, missing sandbox paths.
    pub fn lint(&self) -> Vec<String> {
        let mut out = Vec::new();
        let rules = self.engine.rules.all();
        for (i, rule) in rules.iter().enumerate() {
            // The subcommand is looked for past the options, so an entry
            // that is itself an option is never reached.
            for seq in &rule.subcommands {
                if let Some(first) = seq.first().filter(|w| w.starts_with('-') && w.len() > 1) {
                    out.push(format!(
                        "{}:{}: rule `{}` lists `{}` as a subcommand, which looks like an option and never matches (subcommands are looked for after the options); match it with `prefix = [\"{first}\"]` in a rule of its own",
                        self.origin,
                        rule.line,
                        rule.id,
                        seq.join(" ")
                    ));
                }
            }
            if rule.action == Verdict::Allow {
                for program in &rule.programs {
                    if !program.contains('/') && resolve_program(program, &self.env.path).is_none()
                    {
                        out.push(format!(
                            "{}:{}: rule `{}` allows `{program}`, which does not resolve on the policy's PATH ({})",
                            self.origin, rule.line, rule.id, self.env.path
                        ));
                    }
                }
            }
            for (j, other) in rules.iter().enumerate() {
                if i == j {
                    continue;
                }
                if let Some(program) = shadowed_by(rule, other) {
                    if rule.action == other.action && i < j {
                        continue;
                    }
                    out.push(format!(
                        "{}:{}: rule `{}` never decides `{program}`: rule `{}` (line {}) matches every such command and {}",
                        self.origin,
                        rule.line,
                        rule.id,
                        other.id,
                        other.line,
                        if rule.action == other.action { "comes first" } else { "is stricter" }
                    ));
                }
            }
        }
        for p in &self.sandbox.read {
            if !Path::new(p).exists() {
                out.push(format!(
                    "{}: sandbox.read path {p} does not exist (skipped)",
                    self.origin
                ));
            }
        }
        for dir in self.env.path.split(':') {
            if !dir.starts_with('/') && !dir.starts_with(crate::ROOT_PLACEHOLDER) {
                out.push(format!(
                    "{}: env.path entry `{dir}` is not absolute and is ignored",
                    self.origin
                ));
            }
        }
        out
    }
}

/// If `other` matches every command `rule` matches and wins over it, the
/// program concerned.
fn shadowed_by<'r>(rule: &'r Rule, other: &Rule) -> Option<&'r str> {
    if other.has_conditions()
        || rule.action > other.action
        || other.pattern.is_some()
        || rule.pattern.is_some()
    {
        return None;
    }
    let covers = if rule.action == other.action {
        // Same action: the more specific rule wins, so only an exact
        // duplicate (the later one) never decides.
        !rule.has_conditions()
            && rule.prefix == other.prefix
            && rule.subcommands == other.subcommands
    } else {
        // A stricter rule wins whenever it matches.
        other.prefix.is_empty()
            && (other.subcommands.is_empty()
                || (!rule.subcommands.is_empty()
                    && rule
                        .subcommands
                        .iter()
                        .all(|s| other.subcommands.iter().any(|o| s.starts_with(o)))))
    };
    if !covers {
        return None;
    }
    rule.programs
        .iter()
        .find(|p| other.programs.contains(p))
        .map(|s| s.as_str())
}
