//! Loading a policy: strict TOML, compiled rules, semantic checks, and the
//! policy's own examples, in that order. Nothing half-valid comes out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use regex_automata::meta::Regex;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::engine::{Engine, LazyRegex, OptSpec, Rule, Writes};
use super::error::{ExampleFailure, Issue, LineIndex, PolicyError, line_col, line_text};
use super::{
    BudgetPolicy, Context, DaemonPolicy, EnvPolicy, FeatureAction, Limits, Policy, RiskLevel,
    SandboxPolicy, ShellPolicy, TracePolicy, Verdict,
};
use crate::CommandSpec;

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
struct RuleFile {
    id: Spanned<String>,
    action: Verdict,
    risk: RiskLevel,
    reason: String,
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
    pattern_operand: bool,
    #[serde(default)]
    args_regex: Option<Spanned<String>>,
    #[serde(default)]
    pattern: Option<Spanned<String>>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    writes: Writes,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExampleFile {
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
    /// Reads and validates a policy file: every regex compiled, every
    /// example checked.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let (text, shown) = read(path)?;
        Policy::parse(&text, &shown)
    }

    /// `load` for a one-shot CLI: a policy whose exact bytes this exact
    /// binary has fully loaded before (remembered as a marker in
    /// `memo_dir`, a directory only the supervisor's user can write) skips
    /// the example check and compiles its regexes on first use. Anything
    /// else gets the full load, and a success is remembered.
    pub fn load_remembering(path: &Path, memo_dir: Option<&Path>) -> Result<Policy, PolicyError> {
        let (text, shown) = read(path)?;
        Policy::parse_with(&text, &shown, memo_dir)
    }

    /// Parses and validates policy text; `origin` names it in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        Policy::parse_with(text, origin, None)
    }

    fn parse_with(
        text: &str,
        origin: &str,
        memo_dir: Option<&Path>,
    ) -> Result<Policy, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| syntax_error(text, origin, &e))?;
        let sha256 = hex::encode(Sha256::digest(text.as_bytes()));
        let marker = memo_dir.and_then(|dir| memo_marker(dir, &sha256));
        let remembered = marker.as_ref().is_some_and(|m| m.exists());
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
        // regex-lite: this pattern only ever meets a few dozen short variable
        // names, so building it (15x faster than a full regex, measured)
        // is what counts; its case folding is ASCII, like the other
        // policy regexes.
        let secret_names = match regex_lite::RegexBuilder::new(&file.env.secret_pattern)
            .case_insensitive(true)
            .build()
        {
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
        if file.limits.timeout_ms > file.limits.max_timeout_ms {
            issues.push(Issue {
                line: find_key_line(text, "timeout_ms"),
                key: "limits.timeout_ms".into(),
                message: "is larger than limits.max_timeout_ms".into(),
            });
        }

        let rules = compile_rules(&lines, &file.rules, remembered, &mut issues);
        let Some(secret_names) = secret_names.filter(|_| issues.is_empty()) else {
            return Err(PolicyError::Invalid {
                origin: origin.to_string(),
                issues,
            });
        };
        let engine = build_engine(rules, &file.env, &file.sandbox, &shell, secret_names);

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
            shell,
            description: file.description,
            default_risk: file.default_risk,
            engine,
        };
        policy.engine.example_count = file.examples.len();
        if remembered {
            return Ok(policy);
        }
        compile_all(&policy.engine.rules).map_err(|issues| PolicyError::Invalid {
            origin: origin.to_string(),
            issues,
        })?;
        check_examples(&policy, &lines, origin, &file.examples)?;
        if let Some(m) = marker {
            remember(&m);
        }
        Ok(policy)
    }

    /// Warnings that do not stop loading: rules that can never decide,
    /// allowed programs that are not installed, missing sandbox paths.
    pub fn lint(&self) -> Vec<String> {
        let mut out = Vec::new();
        let rules = &self.engine.rules;
        for (i, rule) in rules.iter().enumerate() {
            if rule.action == Verdict::Allow {
                for program in &rule.programs {
                    if !program.contains('/')
                        && super::resolve_program(program, &self.env.path).is_none()
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
            if !dir.starts_with('/') {
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

fn syntax_error(text: &str, origin: &str, e: &toml::de::Error) -> PolicyError {
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
    }
}

/// Builds every regex now, so a full load refuses a pattern that parses but
/// cannot be compiled (over the size limit) instead of failing closed later.
fn compile_all(rules: &[Rule]) -> Result<(), Vec<Issue>> {
    let mut issues = Vec::new();
    for rule in rules {
        for (key, re) in [("pattern", &rule.pattern), ("args_regex", &rule.args_regex)] {
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

/// Where a full load of these policy bytes by this binary is remembered.
/// The binary is named by its version and its file's identity (device,
/// inode, size, mtime), so a rebuilt engine checks the examples again.
fn memo_marker(dir: &Path, policy_sha256: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let exe = std::fs::metadata("/proc/self/exe").ok()?;
    let identity = format!(
        "{}:{}:{}:{}:{}:{}",
        env!("CARGO_PKG_VERSION"),
        exe.dev(),
        exe.ino(),
        exe.size(),
        exe.mtime(),
        exe.mtime_nsec()
    );
    let binary = hex::encode(Sha256::digest(identity.as_bytes()));
    Some(dir.join(format!("{policy_sha256}-{}", &binary[..16])))
}

/// Best effort: without the marker the next run loads in full. Markers of
/// other binaries (earlier builds) are dropped once they pile up.
fn remember(marker: &Path) {
    const KEEP: usize = 32;
    let (Some(dir), Some(name)) = (marker.parent(), marker.file_name()) else {
        return;
    };
    let ours = name
        .to_string_lossy()
        .rsplit_once('-')
        .map(|(_, binary)| format!("-{binary}"));
    if let (Ok(entries), Some(ours)) = (std::fs::read_dir(dir), ours) {
        let names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
        if names.len() >= KEEP {
            for n in names {
                if !n.to_string_lossy().ends_with(&ours) {
                    let _ = std::fs::remove_file(dir.join(n));
                }
            }
        }
    }
    let _ = std::fs::write(marker, b"");
}

/// The file's text and how to name it in messages.
fn read(path: &Path) -> Result<(String, String), PolicyError> {
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
    })?;
    Ok((text, shown))
}

/// Every regex of a policy matches bytes with ASCII classes: `\s`, `\w`,
/// `\b` and `(?i)` mean what the shell means (its blanks and metacharacters
/// are ASCII), and compiling skips the Unicode tables, which were most of
/// the CLI's start-up.
pub(crate) fn policy_regex(pattern: &str) -> Result<Regex, Box<regex_automata::meta::BuildError>> {
    use regex_automata::{meta, nfa::thompson::WhichCaptures, util::syntax};
    // Only "does it match, and where": no capture groups, no eagerly
    // determinized DFA and no literal prefilters (the lazy DFA alone is as
    // fast on command-sized text and costs nothing to build), which cuts
    // the build time to a third.
    meta::Builder::new()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(
            meta::Config::new()
                .dfa(false)
                .auto_prefilter(false)
                .onepass(false)
                .backtrack(false)
                .utf8_empty(false)
                .which_captures(WhichCaptures::Implicit),
        )
        .build(pattern)
        .map_err(Box::new)
}

/// The load-time check of a policy regex: the same syntax `policy_regex`
/// accepts, without building the automata.
fn check_regex(pattern: &str) -> Result<LazyRegex, String> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .map(|_| LazyRegex::new(pattern.to_string()))
        .map_err(|e| e.to_string())
}

fn find_key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| l.trim_start().starts_with(key) && l.contains('='))
        .map_or(0, |i| i + 1)
}

/// `remembered`: these exact bytes passed a full load before, so the
/// regexes' syntax is known good and is not parsed again.
fn compile_rules(
    lines: &LineIndex,
    files: &[Spanned<RuleFile>],
    remembered: bool,
    issues: &mut Vec<Issue>,
) -> Vec<Rule> {
    let check = |p: &str| {
        if remembered {
            Ok(LazyRegex::new(p.to_string()))
        } else {
            check_regex(p)
        }
    };
    let mut rules = Vec::with_capacity(files.len());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for spanned in files {
        let line = lines.line(spanned.span().start);
        let r = spanned.get_ref();
        let id = r.id.get_ref().as_str();
        let id_line = lines.line(r.id.span().start);
        let mut bad = |key: &str, message: String| {
            issues.push(Issue {
                line: id_line.max(line),
                key: format!("rule {id}: {key}"),
                message,
            })
        };
        if id.is_empty() || id == "default" || id.starts_with("builtin:") {
            bad("id", "must be non-empty and not `default` or start with `builtin:` (reserved for the engine)".into());
        }
        if let Some(first) = seen.insert(id, id_line) {
            bad(
                "id",
                format!("duplicate rule id (first defined at line {first})"),
            );
        }
        if r.reason.trim().is_empty() {
            bad(
                "reason",
                "must explain the decision to the model; it is shown when the rule decides".into(),
            );
        }
        let mut programs: Vec<String> = r.programs.clone();
        if let Some(p) = &r.program {
            programs.push(p.clone());
        }
        if programs
            .iter()
            .any(|p| p.is_empty() || p.contains(char::is_whitespace))
        {
            bad(
                "programs",
                "program names must be non-empty single words".into(),
            );
        }
        let pattern = match &r.pattern {
            Some(p) => match check(p.get_ref()) {
                Ok(re) => Some(re),
                Err(e) => {
                    issues.push(Issue {
                        line: lines.line(p.span().start),
                        key: format!("rule {id}: pattern"),
                        message: format!("invalid regex: {e}"),
                    });
                    None
                }
            },
            None => None,
        };
        let args_regex = match &r.args_regex {
            Some(p) => match check(p.get_ref()) {
                Ok(re) => Some(re),
                Err(e) => {
                    issues.push(Issue {
                        line: lines.line(p.span().start),
                        key: format!("rule {id}: args_regex"),
                        message: format!("invalid regex: {e}"),
                    });
                    None
                }
            },
            None => None,
        };
        let has_matcher = !r.subcommands.is_empty()
            || !r.prefix.is_empty()
            || !r.options.is_empty()
            || r.args_regex.is_some();
        let mut bad = |key: &str, message: String| {
            issues.push(Issue {
                line: id_line.max(line),
                key: format!("rule {id}: {key}"),
                message,
            })
        };
        if r.pattern.is_some() {
            if !programs.is_empty() || has_matcher {
                bad("pattern", "a pattern rule matches the raw request; it cannot also name programs, subcommands, options or args_regex".into());
            }
            if r.action == Verdict::Allow {
                bad(
                    "action",
                    "a raw pattern can only deny or require approval; allow commands by program"
                        .into(),
                );
            }
        } else if programs.is_empty() {
            bad(
                "programs",
                "a rule needs `program`/`programs` or a raw `pattern`".into(),
            );
        }
        if !r.subcommands.is_empty() && !r.prefix.is_empty() {
            bad(
                "prefix",
                "use either `subcommands` or `prefix`, not both".into(),
            );
        }
        if r.global_options_only && r.options.is_empty() {
            bad(
                "global_options_only",
                "only means something together with `options`".into(),
            );
        }
        if r.read_only && r.writes != Writes::None {
            bad(
                "read_only",
                "a rule that writes its operands cannot be read-only".into(),
            );
        }
        if r.action != Verdict::Allow && (r.read_only || r.writes != Writes::None) {
            bad(
                "read_only",
                "`read_only` and `writes` only apply to allow rules".into(),
            );
        }
        let mut options = Vec::with_capacity(r.options.len());
        for o in &r.options {
            match OptSpec::parse(o) {
                Some(spec) => options.push(spec),
                None => bad(
                    "options",
                    format!("`{o}` is not an option (`-x`, `--long`, `-single` or `-prefix*`)"),
                ),
            }
        }
        let subcommands: Vec<Vec<String>> = r
            .subcommands
            .iter()
            .map(|s| s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .collect();
        if subcommands.iter().any(|s| s.is_empty()) {
            bad("subcommands", "entries must be non-empty".into());
        }
        rules.push(Rule {
            id: id.to_string(),
            action: r.action,
            risk: r.risk,
            reason: r.reason.trim().to_string(),
            read_only: r.read_only,
            writes: r.writes,
            programs,
            subcommands,
            prefix: r.prefix.clone(),
            option_values: r.option_values.clone(),
            options,
            global_options_only: r.global_options_only,
            pattern_operand: r.pattern_operand,
            args_regex,
            pattern,
            line,
        });
    }
    check_contradictions(&rules, issues);
    rules
}

/// Two rules with the very same matcher and different actions leave the
/// reader guessing which was meant; the engine would let deny win silently.
fn check_contradictions(rules: &[Rule], issues: &mut Vec<Issue>) {
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

fn build_engine(
    rules: Vec<Rule>,
    env: &EnvPolicy,
    sandbox: &SandboxPolicy,
    shell: &ShellPolicy,
    secret_names: regex_lite::Regex,
) -> Engine {
    let mut by_program: HashMap<String, Vec<usize>> = HashMap::new();
    let mut raw_rules = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        for p in &rule.programs {
            by_program.entry(p.clone()).or_default().push(i);
        }
        if rule.pattern.is_some() {
            raw_rules.push(i);
        }
    }

    let mut readable: Vec<PathBuf> = crate::SYSTEM_READ_DIRS.iter().map(PathBuf::from).collect();
    let extra = |list: &[String], out: &mut Vec<PathBuf>| {
        for p in list {
            if !p.starts_with('/') {
                continue;
            }
            let lexical = PathBuf::from(p);
            // Both spellings: arguments are compared after symlinks are
            // followed, and a toolchain dir is often a symlink.
            if let Ok(canon) = std::fs::canonicalize(&lexical)
                && canon != lexical
            {
                out.push(canon);
            }
            out.push(lexical);
        }
    };
    extra(&sandbox.read, &mut readable);
    let mut writable = Vec::new();
    extra(&sandbox.write, &mut writable);

    let path_entries: Vec<PathBuf> = env
        .path
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    // A PATH entry the child may write to could be given a fake `git` by
    // an earlier command, so only read-only system entries are trusted
    // without a lookup.
    let path_trusted = path_entries.iter().all(|d| {
        readable.iter().any(|r| d.starts_with(r))
            && !writable
                .iter()
                .any(|w| d.starts_with(w) || w.starts_with(d))
    });
    readable.extend(writable.iter().cloned());
    let home = env
        .set
        .get("HOME")
        .filter(|h| h.starts_with('/'))
        .map(PathBuf::from);
    let deny_assign = shell
        .deny_assignments
        .iter()
        .map(|n| match n.strip_suffix('*') {
            Some(prefix) => (prefix.to_string(), true),
            None => (n.clone(), false),
        })
        .collect();

    Engine {
        rules,
        by_program,
        raw_rules,
        readable,
        writable,
        path_trusted,
        path_entries,
        home,
        deny_assign,
        secret_names,
        example_count: 0,
    }
}

fn check_examples(
    policy: &Policy,
    lines: &LineIndex,
    origin: &str,
    examples: &[Spanned<ExampleFile>],
) -> Result<(), PolicyError> {
    let root = Path::new(EXAMPLE_ROOT);
    let mut failures = Vec::new();
    for spanned in examples {
        let ex = spanned.get_ref();
        let line = lines.line(spanned.span().start);
        let cwd = match &ex.cwd {
            Some(c) => super::paths::normalize_lexically(root, Path::new(c)),
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
