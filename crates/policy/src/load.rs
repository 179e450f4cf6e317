//! Loading a policy: strict TOML, compiled rules, semantic checks, and the
//! policy's own examples, in that order. Nothing half-valid comes out.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toml::Spanned;

use crate::engine::Engine;
use crate::error::{ExampleFailure, Issue, LineIndex, PolicyError, line_col, line_text};
use crate::resolve::normalize_lexically;
use crate::rules::{LazyRegex, OptSpec, Rule, Writes};
use crate::secret::SecretNames;
use crate::{
    ApprovalsPolicy, BudgetPolicy, CommandSpec, Context, DaemonPolicy, EnvPolicy, FeatureAction,
    Limits, Policy, RiskLevel, SandboxPolicy, ShellPolicy, TracePolicy, Verdict,
};

/// Examples are decided against this root so they mean the same on every
/// machine: nothing under it exists, so no path is canonicalized.
pub const EXAMPLE_ROOT: &str = "/nonexistent-example-root";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    name: String,
    #[serde(default)]
    description: String,
    default: Verdict,
    #[serde(default = "medium")]
    default_risk: RiskLevel,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    env: EnvPolicy,
    #[serde(default)]
    sandbox: SandboxPolicy,
    #[serde(default)]
    budget: BudgetPolicy,
    #[serde(default)]
    daemon: DaemonPolicy,
    #[serde(default)]
    trace: TracePolicy,
    #[serde(default)]
    approvals: ApprovalsPolicy,
    #[serde(default)]
    provenance: crate::ProvenancePolicy,
    #[serde(default)]
    shell: Option<Spanned<ShellPolicy>>,
    #[serde(default, rename = "rule")]
    rules: Vec<Spanned<RuleFile>>,
    #[serde(default, rename = "example")]
    examples: Vec<Spanned<ExampleFile>>,
}

fn medium() -> RiskLevel {
    RiskLevel::Medium
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleFile {
    id: Spanned<String>,
    action: Verdict,
    risk: RiskLevel,
    reason: String,
    #[serde(default)]
    suggestion: Option<String>,
    #[serde(default)]
    program: Option<String>,
    #[serde(default)]
    programs: Vec<String>,
    #[serde(default)]
    subcommands: Vec<String>,
    #[serde(default)]
    prefix: Vec<String>,
    #[serde(default)]
    option_values: Vec<String>,
    #[serde(default)]
    options: Vec<String>,
    #[serde(default)]
    global_options_only: bool,
    #[serde(default)]
    safe_values: Option<Spanned<String>>,
    #[serde(default)]
    unless_options: Vec<String>,
    #[serde(default)]
    under_root: bool,
    #[serde(default)]
    pattern_operand: bool,
    #[serde(default)]
    args_regex: Option<Spanned<String>>,
    #[serde(default)]
    pattern: Option<Spanned<String>>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    needs_key: bool,
    #[serde(default)]
    writes: Writes,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExampleFile {
    command: String,
    decision: Verdict,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    read_only: Option<bool>,
}

impl Policy {
    /// Parses and validates policy text; `origin` names it in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| syntax_error(text, origin, e))?;
        let sha256 = hex::encode(Sha256::digest(text.as_bytes()));
        let lines = LineIndex::new(text);
        let mut issues = Vec::new();

        let shell_line = file
            .shell
            .as_ref()
            .map_or(0, |s| lines.line(s.span().start));
        let shell = file.shell.map(Spanned::into_inner).unwrap_or_default();
        for (key, action) in [
            ("program_expansion", shell.program_expansion),
            ("unsupported", shell.unsupported),
            ("evaluation", shell.evaluation),
        ] {
            if action == FeatureAction::Check {
                issues.push(Issue {
                    line: shell_line,
                    key: format!("shell.{key}"),
                    message:
                        "must be \"deny\" or \"require_approval\": the engine cannot look inside it"
                            .into(),
                });
            }
        }
        if shell.max_nesting == 0 || shell.max_nesting > 16 {
            issues.push(Issue {
                line: shell_line,
                key: "shell.max_nesting".into(),
                message: "must be between 1 and 16".into(),
            });
        }
        let secret_names = match SecretNames::compiled(&file.env.secret_pattern) {
            Ok(re) => Some(re),
            Err(e) => {
                issues.push(Issue {
                    line: find_key_line(text, "secret_pattern"),
                    key: "env.secret_pattern".into(),
                    message: format!("invalid regex: {e}"),
                });
                None
            }
        };
        if let Some(message) = crate::project::check_path_entries(&file.env.path) {
            issues.push(Issue {
                line: find_key_line(text, "path"),
                key: "env.path".into(),
                message,
            });
        }
        if file.sandbox.read_only && !file.sandbox.write.is_empty() {
            issues.push(Issue {
                line: find_key_line(text, "write"),
                key: "sandbox.write".into(),
                message: "a read_only sandbox writes nowhere but the run's own HOME/TMPDIR; remove `write` or `read_only`".into(),
            });
        }
        if file.limits.timeout_ms > file.limits.max_timeout_ms {
            issues.push(Issue {
                line: find_key_line(text, "timeout_ms"),
                key: "limits.timeout_ms".into(),
                message: "is larger than limits.max_timeout_ms".into(),
            });
        }

        if file.approvals.ttl_secs == 0 {
            issues.push(Issue {
                line: find_key_line(text, "ttl_secs"),
                key: "approvals.ttl_secs".into(),
                message: "must be at least 1 (seconds an approval holds)".into(),
            });
        }
        let rules = compile_rules(&lines, &file.rules, &mut issues);
        let Some(secret_names) = secret_names.filter(|_| issues.is_empty()) else {
            return Err(PolicyError::Invalid {
                origin: origin.to_string(),
                issues,
            });
        };
        let engine = Engine::build(rules, &file.env, &file.sandbox, &shell, secret_names);

        let mut policy = Policy {
            name: file.name,
            sha256,
            origin: origin.to_string(),
            default: file.default,
            limits: file.limits,
            env: file.env,
            sandbox: file.sandbox,
            budget: file.budget,
            daemon: file.daemon,
            trace: file.trace,
            approvals: file.approvals,
            provenance: file.provenance,
            shell,
            description: file.description,
            default_risk: file.default_risk,
            engine,
            examples: std::sync::Arc::new(
                file.examples
                    .iter()
                    .map(|e| (lines.line(e.span().start), e.get_ref().clone()))
                    .collect(),
            ),
            layers: Vec::new(),
        };
        policy.engine.example_count = file.examples.len();
        compile_all(policy.engine.rules.all()).map_err(|issues| PolicyError::Invalid {
            origin: origin.to_string(),
            issues,
        })?;
        check_examples(&policy, origin, &policy.examples)?;
        Ok(policy)
    }
}

pub(crate) fn syntax_error(text: &str, origin: &str, e: toml::de::Error) -> PolicyError {
    let (line, column) = e.span().map_or((0, 0), |s| line_col(text, s.start));
    let mut message = e.message().trim().to_string();
    if let Some(span) = e.span() {
        let snippet = text.get(span.clone()).unwrap_or("").trim();
        let looks_like_key = !snippet.is_empty()
            && snippet.len() < 64
            && snippet
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if looks_like_key && !message.contains(snippet) {
            message = format!("key `{snippet}`: {message}");
        }
    }
    PolicyError::Syntax {
        origin: origin.to_string(),
        line,
        column,
        message,
        source_line: if line > 0 {
            line_text(text, line)
        } else {
            String::new()
        },
        source: Some(Box::new(e)),
    }
}

/// Builds every regex now, so a full load refuses a pattern that parses but
/// cannot be compiled (over the size limit) instead of failing closed later.
pub(crate) fn compile_all(rules: &[Rule]) -> Result<(), Vec<Issue>> {
    let mut issues = Vec::new();
    for rule in rules {
        for (key, re) in [
            ("pattern", &rule.pattern),
            ("args_regex", &rule.args_regex),
            ("safe_values", &rule.safe_values),
        ] {
            if let Some(Err(e)) = re.as_ref().map(LazyRegex::compile) {
                issues.push(Issue {
                    line: rule.line,
                    key: format!("rule {}: {key}", rule.id),
                    message: format!("invalid regex: {e}"),
                });
            }
        }
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}

/// The file's text and how to name it in messages.
pub(crate) fn read(path: &Path) -> Result<(String, String), PolicyError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            PolicyError::NotFound {
                path: shown.clone(),
            }
        } else {
            PolicyError::Io {
                path: shown.clone(),
                source,
            }
        }
    })?;
    let text = String::from_utf8(bytes).map_err(|e| PolicyError::Syntax {
        origin: shown.clone(),
        line: line_col(
            &String::from_utf8_lossy(e.as_bytes()),
            e.utf8_error().valid_up_to(),
        )
        .0,
        column: 0,
        message: "the file is not valid UTF-8".into(),
        source_line: String::new(),
        source: Some(Box::new(e.utf8_error())),
    })?;
    Ok((text, shown))
}

fn find_key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| l.trim_start().starts_with(key) && l.contains('='))
        .map_or(0, |i| i + 1)
}

pub(crate) fn compile_rules(
    lines: &LineIndex,
    files: &[Spanned<RuleFile>],
    issues: &mut Vec<Issue>,
) -> Vec<Rule> {
    let mut rules = Vec::with_capacity(files.len());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for spanned in files {
        let id = &spanned.get_ref().id;
        let first = seen.insert(id.get_ref().as_str(), lines.line(id.span().start));
        rules.push(compile_rule(lines, spanned, first, issues));
    }
    check_contradictions(&rules, issues);
    rules
}

/// The problems of one rule, named by its id.
struct Problems<'a> {
    issues: &'a mut Vec<Issue>,
    id: &'a str,
    /// Where the rule (its id) is.
    line: usize,
}

impl Problems<'_> {
    fn bad(&mut self, key: &str, message: String) {
        self.at(self.line, key, message);
    }

    fn at(&mut self, line: usize, key: &str, message: String) {
        self.issues.push(Issue {
            line,
            key: format!("rule {}: {key}", self.id),
            message,
        });
    }
}

/// One rule. `duplicate_of` is the line of an earlier rule with the same
/// id.
fn compile_rule(
    lines: &LineIndex,
    spanned: &Spanned<RuleFile>,
    duplicate_of: Option<usize>,
    issues: &mut Vec<Issue>,
) -> Rule {
    let line = lines.line(spanned.span().start);
    let r = spanned.get_ref();
    let id = r.id.get_ref().as_str();
    let mut p = Problems {
        issues,
        id,
        line: lines.line(r.id.span().start).max(line),
    };
    if id.is_empty() || id == "default" || id.starts_with("builtin:") {
        p.bad("id", "must be non-empty and not `default` or start with `builtin:` (reserved for the engine)".into());
    }
    if let Some(first) = duplicate_of {
        p.bad(
            "id",
            format!("duplicate rule id (first defined at line {first})"),
        );
    }
    if r.reason.trim().is_empty() {
        p.bad(
            "reason",
            "must explain the decision to the model; it is shown when the rule decides".into(),
        );
    }
    let mut programs: Vec<String> = r.programs.clone();
    if let Some(program) = &r.program {
        programs.push(program.clone());
    }
    if programs
        .iter()
        .any(|p| p.is_empty() || p.contains(char::is_whitespace))
    {
        p.bad(
            "programs",
            "program names must be non-empty single words".into(),
        );
    }
    let mut regex = |field: &Option<Spanned<String>>, key: &str| {
        let source = field.as_ref()?;
        LazyRegex::checked(source.get_ref())
            .map_err(|e| {
                p.at(
                    lines.line(source.span().start),
                    key,
                    format!("invalid regex: {e}"),
                )
            })
            .ok()
    };
    let pattern = regex(&r.pattern, "pattern");
    let args_regex = regex(&r.args_regex, "args_regex");
    let safe_values = regex(&r.safe_values, "safe_values");
    check_shape(r, &programs, &mut p);
    let mut option_specs = |list: &[String], key: &str| {
        let mut out = Vec::with_capacity(list.len());
        for o in list {
            match OptSpec::parse(o) {
                Some(spec) => out.push(spec),
                None => p.bad(
                    key,
                    format!("`{o}` is not an option (`-x`, `--long`, `-single` or `-prefix*`)"),
                ),
            }
        }
        out
    };
    let options = option_specs(&r.options, "options");
    let unless_options = option_specs(&r.unless_options, "unless_options");
    let subcommands: Vec<Vec<String>> = r
        .subcommands
        .iter()
        .map(|s| s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    if subcommands.iter().any(|s| s.is_empty()) {
        p.bad("subcommands", "entries must be non-empty".into());
    }
    Rule {
        id: id.to_string(),
        action: r.action,
        risk: r.risk,
        reason: r.reason.trim().to_string(),
        suggestion: r
            .suggestion
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        read_only: r.read_only,
        needs_key: r.needs_key,
        writes: r.writes,
        programs,
        subcommands,
        prefix: r.prefix.clone(),
        option_values: r.option_values.clone(),
        options,
        safe_values,
        unless_options,
        under_root: r.under_root,
        global_options_only: r.global_options_only,
        pattern_operand: r.pattern_operand,
        args_regex,
        pattern,
        line,
        amendment: false,
    }
}

/// Keys that only make sense together, or only for some actions.
fn check_shape(r: &RuleFile, programs: &[String], p: &mut Problems) {
    let has_matcher = !r.subcommands.is_empty()
        || !r.prefix.is_empty()
        || !r.options.is_empty()
        || !r.unless_options.is_empty()
        || r.args_regex.is_some();
    if r.safe_values.is_some() && r.options.is_empty() {
        p.bad(
            "safe_values",
            "only means something together with `options`".into(),
        );
    }
    if r.under_root && (r.pattern.is_some() || !programs.is_empty()) {
        p.bad(
            "under_root",
            "an under_root rule matches every program run by a path inside the root; it cannot also name programs or a pattern".into(),
        );
    }
    if r.pattern.is_some() {
        if !programs.is_empty() || has_matcher {
            p.bad("pattern", "a pattern rule matches the raw request; it cannot also name programs, subcommands, options or args_regex".into());
        }
        if r.action == Verdict::Allow {
            p.bad(
                "action",
                "a raw pattern can only deny or require approval; allow commands by program".into(),
            );
        }
    } else if programs.is_empty() && !r.under_root {
        p.bad(
            "programs",
            "a rule needs `program`/`programs` or a raw `pattern`".into(),
        );
    }
    if !r.subcommands.is_empty() && !r.prefix.is_empty() {
        p.bad(
            "prefix",
            "use either `subcommands` or `prefix`, not both".into(),
        );
    }
    if r.global_options_only && r.options.is_empty() {
        p.bad(
            "global_options_only",
            "only means something together with `options`".into(),
        );
    }
    if r.action == Verdict::Allow && r.suggestion.is_some() {
        p.bad(
            "suggestion",
            "is offered when the rule refuses; an allow rule never does".into(),
        );
    }
    if r.read_only && r.writes != Writes::None {
        p.bad(
            "read_only",
            "a rule that writes its operands cannot be read-only".into(),
        );
    }
    if r.action != Verdict::Allow && (r.read_only || r.writes != Writes::None) {
        p.bad(
            "read_only",
            "`read_only` and `writes` only apply to allow rules".into(),
        );
    }
}

/// Two rules with the very same matcher and different actions leave the
/// reader guessing which was meant; the engine would let deny win silently.
pub(crate) fn check_contradictions(rules: &[Rule], issues: &mut Vec<Issue>) {
    for (i, a) in rules.iter().enumerate() {
        for b in &rules[i + 1..] {
            if a.action == b.action || a.pattern.is_some() || b.pattern.is_some() {
                continue;
            }
            let Some(program) = a.programs.iter().find(|p| b.programs.contains(p)) else {
                continue;
            };
            let same_conditions = a.prefix == b.prefix
                && a.options == b.options
                && a.unless_options == b.unless_options
                && a.safe_values.as_ref().map(LazyRegex::as_str)
                    == b.safe_values.as_ref().map(LazyRegex::as_str)
                && a.global_options_only == b.global_options_only
                && a.args_regex.as_ref().map(LazyRegex::as_str)
                    == b.args_regex.as_ref().map(LazyRegex::as_str);
            if !same_conditions {
                continue;
            }
            let overlap = if a.subcommands.is_empty() || b.subcommands.is_empty() {
                (a.subcommands.is_empty() && b.subcommands.is_empty()).then(String::new)
            } else {
                a.subcommands
                    .iter()
                    .find(|s| b.subcommands.contains(s))
                    .map(|s| format!(" {}", s.join(" ")))
            };
            if let Some(sub) = overlap {
                issues.push(Issue {
                    line: b.line,
                    key: format!("rule {}", b.id),
                    message: format!(
                        "contradicts rule `{}` (line {}): `{program}{sub}` is both {} and {} with no condition telling them apart; remove one or add options/args_regex",
                        a.id, a.line, a.action, b.action
                    ),
                });
            }
        }
    }
}

/// `examples` are `(line, example)` as the policy file has them.
pub(crate) fn check_examples(
    policy: &Policy,
    origin: &str,
    examples: &[(usize, ExampleFile)],
) -> Result<(), PolicyError> {
    let root = Path::new(EXAMPLE_ROOT);
    let mut failures = Vec::new();
    for (line, ex) in examples {
        let line = *line;
        let cwd = match &ex.cwd {
            Some(c) => normalize_lexically(root, Path::new(c)),
            None => root.to_path_buf(),
        };
        let ctx = Context { root, cwd: &cwd };
        let mut expected = ex.decision.to_string();
        if let Some(rule) = &ex.rule {
            expected.push_str(&format!(" by rule `{rule}`"));
        }
        if let Some(ro) = ex.read_only {
            expected.push_str(if ro { ", read-only" } else { ", mutating" });
        }
        let got = match policy.decide(&CommandSpec::Shell(ex.command.clone()), &ctx) {
            Ok(d) => {
                let ok = d.verdict == ex.decision
                    && ex.rule.as_ref().is_none_or(|r| *r == d.rule)
                    && ex.read_only.is_none_or(|ro| ro == d.read_only);
                if ok {
                    continue;
                }
                format!(
                    "{} by rule `{}`{} ({})",
                    d.verdict,
                    d.rule,
                    if d.read_only {
                        ", read-only"
                    } else {
                        ", mutating"
                    },
                    d.reason
                )
            }
            Err(e) => format!("a parse error: {e}"),
        };
        failures.push(ExampleFailure {
            line,
            command: ex.command.clone(),
            expected,
            got,
        });
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(PolicyError::Examples {
            origin: origin.to_string(),
            failures,
        })
    }
}
