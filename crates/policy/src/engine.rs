//! The decision engine: a lexed request in, one `Decision` out.
//!
//! Every simple command is unwrapped (`env`, `nice`, `timeout`, ...),
//! nested scripts (`bash -c`, substitutions) are decided
//! recursively, every path-looking word is resolved against the working
//! directory (tracked through `cd`), and the strictest part decides.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex_automata::meta::Regex;
use serde::Deserialize;

use super::hidden;
use super::paths::{basename, is_symlink, normalize_lexically, resolve_path};
use super::{Context, Decision, FeatureAction, Policy, RiskLevel, Verdict};
use crate::CommandSpec;
use agent_exec_lexer::{
    self, Features, Operator, ParseError, RedirectKind, Script, SimpleCommand, Span, Word,
};

/// How an allowed program uses its operands (decides which paths must be
/// inside the root rather than merely readable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Writes {
    /// Operands are only read.
    #[default]
    None,
    /// Every operand is written or removed (`rm`, `touch`, `mkdir`, `tee`,
    /// `sed -i`); the root itself may not be one.
    Operands,
    /// The last operand (or `-t DIR`) is written (`cp`, `mv`, `install`).
    Last,
    /// Like `last`, and with `-s` every other operand is a symlink target,
    /// which must be inside the root too (`ln`).
    Link,
}

/// One entry of a rule's `options` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OptSpec {
    /// `--name`: also `--name=value` and unambiguous-looking abbreviations
    /// (`--to-com` for `--to-command`), which GNU getopt accepts.
    Long(String),
    /// `-x`: also inside a cluster (`-ax`) or with a glued value (`-xVAL`).
    Short(char),
    /// `-name` (find style): exactly, or `-name=...`.
    Single(String),
    /// `-name*`: any argument starting with `-name`.
    SinglePrefix(String),
}

impl OptSpec {
    pub(crate) fn parse(s: &str) -> Option<OptSpec> {
        if let Some(name) = s.strip_prefix("--") {
            return (!name.is_empty() && !name.contains('=')).then(|| OptSpec::Long(s.to_string()));
        }
        let name = s.strip_prefix('-')?;
        if let Some(prefix) = name.strip_suffix('*') {
            return (!prefix.is_empty()).then(|| OptSpec::SinglePrefix(format!("-{prefix}")));
        }
        let mut chars = name.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c != '-' => Some(OptSpec::Short(c)),
            (Some(_), Some(_)) => Some(OptSpec::Single(s.to_string())),
            _ => None,
        }
    }

    fn matches(&self, arg: &str) -> bool {
        match self {
            OptSpec::Long(opt) => {
                if !arg.starts_with("--") {
                    return false;
                }
                let name = arg.split('=').next().unwrap_or(arg);
                name == opt || (name.len() >= 4 && opt.starts_with(name))
            }
            OptSpec::Short(c) => {
                arg.len() > 1
                    && arg.starts_with('-')
                    && !arg.starts_with("--")
                    && arg[1..].contains(*c)
            }
            OptSpec::Single(opt) => arg
                .strip_prefix(opt.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('=')),
            OptSpec::SinglePrefix(p) => arg.starts_with(p.as_str()),
        }
    }
}

/// A compiled `[[rule]]`.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub id: String,
    pub action: Verdict,
    pub risk: RiskLevel,
    pub reason: String,
    pub read_only: bool,
    pub writes: Writes,
    pub programs: Vec<String>,
    pub subcommands: Vec<Vec<String>>,
    pub prefix: Vec<String>,
    pub option_values: Vec<String>,
    pub options: Vec<OptSpec>,
    pub global_options_only: bool,
    /// The first operand is a pattern or script, not a path (`grep`,
    /// `sed`, `awk`), unless `-e`/`-f` supplied it.
    pub pattern_operand: bool,
    pub args_regex: Option<LazyRegex>,
    pub pattern: Option<LazyRegex>,
    pub line: usize,
}

/// A policy regex, syntax-checked at load and compiled on first use: a CLI
/// run decides one command, which needs few of the policy's regexes, and
/// compiling all of them was most of its start-up. A full load
/// (`Policy::load`) compiles every one up front.
#[derive(Debug, Clone)]
pub(crate) struct LazyRegex {
    source: String,
    compiled: OnceLock<Option<Regex>>,
}

impl LazyRegex {
    pub(crate) fn new(source: String) -> LazyRegex {
        LazyRegex {
            source,
            compiled: OnceLock::new(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.source
    }

    /// Compiles now (a full load does this for every regex).
    pub(crate) fn compile(&self) -> Result<(), Box<regex_automata::meta::BuildError>> {
        let re = super::load::policy_regex(&self.source)?;
        let _ = self.compiled.set(Some(re));
        Ok(())
    }

    /// `None` only when compiling failed (a size limit; the syntax was
    /// checked at load): callers then fail closed.
    pub(crate) fn get(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| super::load::policy_regex(&self.source).ok())
            .as_ref()
    }
}

/// What matched, for choosing among rules and reporting.
struct Match<'w> {
    specificity: usize,
    /// Argument positions the rule consumed (subcommand words): they are
    /// names, not paths, so they are not looked up on disk.
    consumed: u64,
    token: Option<&'w str>,
}

impl Rule {
    pub(crate) fn has_conditions(&self) -> bool {
        !self.options.is_empty() || self.args_regex.is_some()
    }

    /// Index of the first argument that is not an option or an option's
    /// value: where a subcommand sits (`git -C dir status`).
    fn subcommand_pos(&self, args: &[Word]) -> usize {
        let mut i = 0;
        while i < args.len() {
            let v = args[i].value.as_str();
            if !v.starts_with('-') || v == "-" || v == "--" {
                return i;
            }
            i += if self.option_values.iter().any(|o| o == v) {
                2
            } else {
                1
            };
        }
        args.len()
    }

    fn matches<'w>(&self, args: &'w [Word]) -> Option<Match<'w>> {
        let mut m = Match {
            specificity: 0,
            consumed: 0,
            token: None,
        };
        if !self.prefix.is_empty() {
            if args.len() < self.prefix.len()
                || !args.iter().zip(&self.prefix).all(|(a, p)| a.value == *p)
            {
                return None;
            }
            m.specificity += self.prefix.len();
            m.consumed = (1u64 << self.prefix.len().min(63)) - 1;
        }
        let sub = if self.subcommands.is_empty() && !self.global_options_only {
            0
        } else {
            self.subcommand_pos(args)
        };
        if !self.subcommands.is_empty() {
            let rest = &args[sub..];
            let seq = self.subcommands.iter().find(|seq| {
                rest.len() >= seq.len() && rest.iter().zip(seq.iter()).all(|(a, s)| a.value == *s)
            })?;
            m.specificity += seq.len();
            for k in sub..(sub + seq.len()).min(63) {
                m.consumed |= 1 << k;
            }
            m.token = Some(args[sub].value.as_str());
        }
        if !self.options.is_empty() {
            let scope = if self.global_options_only {
                &args[..sub]
            } else {
                args
            };
            let hit = scope
                .iter()
                .find(|a| self.options.iter().any(|o| o.matches(&a.value)))?;
            m.specificity += 1;
            m.token = Some(hit.value.as_str());
        }
        if let Some(lazy) = &self.args_regex {
            // A regex that cannot be compiled matches for a refusing rule
            // and never for an allowing one.
            let hit = match lazy.get() {
                Some(re) => args.iter().find(|a| re.is_match(a.value.as_bytes()))?,
                None if self.action != Verdict::Allow => args.first()?,
                None => return None,
            };
            m.specificity += 1;
            m.token = Some(hit.value.as_str());
        }
        Some(m)
    }
}

/// Everything precomputed at load for `decide`.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    pub rules: Vec<Rule>,
    pub by_program: HashMap<String, Vec<usize>>,
    /// Rules with a raw `pattern`, tried one by one: a combined set would
    /// compile every pattern a second time at each start for a per-decision
    /// gain the benchmarks cannot see.
    pub raw_rules: Vec<usize>,
    /// Areas arguments may name for reading, besides the root.
    pub readable: Vec<PathBuf>,
    /// Areas (besides the root) that may be written.
    pub writable: Vec<PathBuf>,
    /// Every PATH entry is a system directory, so a bare name needs no
    /// lookup to be trusted (the common case, and the fast one).
    pub path_trusted: bool,
    pub path_entries: Vec<PathBuf>,
    /// What `~` means (`[env.set] HOME`), if anything.
    pub home: Option<PathBuf>,
    /// `(name, is_prefix)` from `[shell] deny_assignments`.
    pub deny_assign: Vec<(String, bool)>,
    /// `[env] secret_pattern`, case-insensitive: names of variables whose
    /// values never reach the child or a trace.
    pub secret_names: regex_lite::Regex,
    pub example_count: usize,
}

/// Never refused as redirection targets or arguments.
const DEV_READ: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdin",
    "/dev/fd/0",
];

/// Programs that run another command in a way that cannot be followed
/// (argument lists built at run time, other users, other namespaces,
/// tracing) or shells whose syntax is not POSIX.
const REFUSED: &[&str] = &[
    "xargs",
    "sudo",
    "su",
    "doas",
    "setsid",
    "chroot",
    "unshare",
    "nsenter",
    "flock",
    "watch",
    "parallel",
    "runuser",
    "pkexec",
    "setpriv",
    "capsh",
    "firejail",
    "bwrap",
    "strace",
    "ltrace",
    "gdb",
    "script",
    "expect",
    "busybox",
    "ionice",
    "taskset",
    "chrt",
    "systemd-run",
    "at",
    "batch",
    "csh",
    "tcsh",
    "fish",
];

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "lksh", "rbash",
];

/// Shell builtins that only change the shell's own state; allowed once
/// their arguments (variable names, paths) pass.
const STATE_BUILTINS: &[&str] = &[
    "export",
    "readonly",
    "local",
    "declare",
    "typeset",
    "unset",
    "set",
    "shift",
    "exit",
    "return",
    "break",
    "continue",
    "wait",
    "umask",
    "ulimit",
    "shopt",
    "read",
    "getopts",
    "mapfile",
    "readarray",
    "unalias",
    "jobs",
    "let",
    ":",
];

/// What a refused variable name is, in reasons.
const COMPUTED_NAME: &str =
    "a variable name that is computed or has a subscript other than a plain number";

/// Variables whose assigned value bash evaluates as arithmetic even
/// without `declare -i` (`RANDOM='a[$(id)]'` runs `id`).
const ARITHMETIC_SPECIALS: &[&str] = &["RANDOM", "SRANDOM", "OPTIND", "HISTCMD"];

/// Builtins that define code run later or load code into the shell.
const UNSAFE_BUILTINS: &[&str] = &[
    "trap", "alias", "enable", "fc", "bind", "complete", "coproc",
];

/// Names that exist only inside a shell, so the request cannot be exec'd
/// directly even when it is one plain command.
fn is_shell_only(name: &str) -> bool {
    STATE_BUILTINS.contains(&name)
        || matches!(
            name,
            "cd" | "pushd"
                | "popd"
                | "eval"
                | "exec"
                | "command"
                | "builtin"
                | "time"
                | "source"
                | "."
                | "hash"
        )
        || UNSAFE_BUILTINS.contains(&name)
}

/// A `set` or `shopt` option that makes the shell read later commands
/// differently from how they were checked: `set -k` (keyword) turns
/// `NAME=value` arguments anywhere into environment variables
/// (`set -k; cargo test RUSTC_WRAPPER=./x`), `cdable_vars` lets `cd NAME`
/// go to a variable's value, `expand_aliases` makes names run other text.
fn unsafe_shell_option<'w>(prog: &str, args: &'w [Word]) -> Option<&'w str> {
    const NAMED: &[&str] = &["keyword", "cdable_vars", "expand_aliases"];
    let mut enabling = false;
    let mut expect_name = false;
    for a in args {
        let v = a.value.as_str();
        if prog == "set" && expect_name {
            expect_name = false;
            if enabling && NAMED.contains(&v) {
                return Some(v);
            }
            continue;
        }
        if v == "--" || v == "-" {
            break;
        }
        match (v.as_bytes().first(), v.get(1..)) {
            (Some(b'-' | b'+'), Some(flags)) if !flags.is_empty() => {
                enabling = v.starts_with('-');
                if prog == "set" {
                    if enabling && flags.contains('k') {
                        return Some(v);
                    }
                    expect_name = flags.contains('o');
                } else {
                    // `shopt -s NAME...` (`-o` picks `set` names).
                    enabling = flags.contains('s');
                }
            }
            _ if prog == "shopt" => {
                if enabling && NAMED.contains(&v) {
                    return Some(v);
                }
            }
            // `set` positional parameters start at the first operand.
            _ => break,
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    /// Written or removed; the root itself is refused (`rm -rf .`).
    WriteNotRoot,
}

/// The strictest part seen so far, materialized only when it wins.
struct Part {
    verdict: Verdict,
    /// Engine-level allows give way to a rule's allow of the same risk.
    weak: bool,
    risk: RiskLevel,
    rule: String,
    reason: String,
    token: Option<String>,
}

/// The possible working directories at a point in a script. While every
/// command so far was joined by `&&`, each `cd` certainly ran, so there is
/// one exact directory; after `;`, `||`, `|` or `&` any directory a `cd`
/// named (or the start) is possible, and paths must pass against each.
#[derive(Clone, Default)]
struct Cwd {
    exact: Option<PathBuf>,
    uncertain: bool,
    seen: Vec<PathBuf>,
}

struct Walk<'p> {
    policy: &'p Policy,
    engine: &'p Engine,
    ctx: &'p Context<'p>,
    best: Option<Part>,
    read_only: bool,
    shell_only: bool,
}

fn has_expansion(f: &Features) -> bool {
    f.parameter_expansion || f.command_substitution || f.arithmetic || f.process_substitution
}

fn is_assignment(v: &str) -> bool {
    let Some(eq) = v.find('=') else { return false };
    let name = v[..eq].strip_suffix('+').unwrap_or(&v[..eq]);
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn path_like(v: &str) -> bool {
    v.contains('/') || v == "." || v == ".."
}

fn literal_word(value: &str) -> Word {
    Word {
        value: value.to_string(),
        raw: value.to_string(),
        span: Span { start: 0, end: 0 },
        features: Features::default(),
        substitutions: Vec::new(),
    }
}

/// Expands `{a,b}` groups (nested, at most `limit` results); `None` when
/// there would be more.
fn expand_braces(v: &str, limit: usize) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut work = vec![v.to_string()];
    while let Some(s) = work.pop() {
        let Some((open, close)) = find_brace_group(&s) else {
            out.push(s);
            if out.len() > limit {
                return None;
            }
            continue;
        };
        let inner = &s[open + 1..close];
        let mut depth = 0usize;
        let mut start = 0;
        let mut alts = Vec::new();
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    alts.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        alts.push(&inner[start..]);
        for alt in alts {
            work.push(format!("{}{}{}", &s[..open], alt, &s[close + 1..]));
            if work.len() + out.len() > limit {
                return None;
            }
        }
    }
    Some(out)
}

/// A `{...}` group with a top-level comma (ranges and lone braces are not
/// paths-bearing alternatives).
fn find_brace_group(s: &str) -> Option<(usize, usize)> {
    let bytes = s.as_bytes();
    let mut search = 0;
    while let Some(rel) = s[search..].find('{') {
        let open = search + rel;
        let mut depth = 0usize;
        let mut comma = false;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        if comma {
                            return Some((open, i));
                        }
                        break;
                    }
                }
                b',' if depth == 1 => comma = true,
                _ => {}
            }
        }
        search = open + 1;
    }
    None
}

fn strictness(a: FeatureAction) -> u8 {
    match a {
        FeatureAction::Check => 0,
        FeatureAction::RequireApproval => 1,
        FeatureAction::Deny => 2,
    }
}

fn feature_verdict(a: FeatureAction) -> Verdict {
    match a {
        FeatureAction::Deny => Verdict::Deny,
        _ => Verdict::RequireApproval,
    }
}

impl Policy {
    /// Whether an environment variable's name marks its value as secret
    /// (`[env] secret_pattern`, case-insensitive).
    pub fn is_secret_name(&self, name: &str) -> bool {
        self.engine.secret_names.is_match(name)
    }

    /// Decides a request. Pure apart from resolving paths that exist (and,
    /// when the policy's PATH has non-system entries, program lookups).
    pub fn decide(&self, cmd: &CommandSpec, ctx: &Context) -> Result<Decision, ParseError> {
        let mut walk = Walk {
            policy: self,
            engine: &self.engine,
            ctx,
            best: None,
            read_only: true,
            shell_only: false,
        };
        let mut cwd = Cwd::default();
        let needs_shell = match cmd {
            CommandSpec::Shell(text) => {
                let script = agent_exec_lexer::lex(text)?;
                walk.raw(text);
                walk.script(&script, &mut cwd, 0);
                script.needs_shell || walk.shell_only
            }
            CommandSpec::Argv(argv) => {
                if argv.is_empty() || argv[0].is_empty() {
                    return Err(ParseError::Empty);
                }
                walk.raw(&argv.join(" "));
                let words: Vec<Word> = argv.iter().map(|a| literal_word(a)).collect();
                let sc = SimpleCommand {
                    assignments: Vec::new(),
                    words,
                    redirects: Vec::new(),
                    joined_by: None,
                    span: Span { start: 0, end: 0 },
                };
                walk.simple(&sc, &mut cwd, 0, true);
                false
            }
        };
        let part = walk.best.unwrap_or(Part {
            verdict: Verdict::Allow,
            risk: RiskLevel::Low,
            weak: true,
            rule: "builtin:empty".into(),
            reason: "nothing to run".into(),
            token: None,
        });
        Ok(Decision {
            verdict: part.verdict,
            rule: part.rule,
            risk: part.risk,
            reason: part.reason,
            token: part.token,
            read_only: walk.read_only,
            needs_shell,
        })
    }

    /// How many `[[example]]`s the policy was checked against at load.
    pub fn example_count(&self) -> usize {
        self.engine.example_count
    }
}

impl<'p> Walk<'p> {
    fn offer(
        &mut self,
        verdict: Verdict,
        risk: RiskLevel,
        make: impl FnOnce() -> (String, String, Option<String>),
    ) {
        self.offer_part(verdict, risk, false, make);
    }

    /// An engine-level allow (`cd`, assignments, `command -v`): reported
    /// only when no rule decided anything, as the rule says more.
    fn offer_weak(&mut self, make: impl FnOnce() -> (String, String, Option<String>)) {
        self.offer_part(Verdict::Allow, RiskLevel::Low, true, make);
    }

    fn offer_part(
        &mut self,
        verdict: Verdict,
        risk: RiskLevel,
        weak: bool,
        make: impl FnOnce() -> (String, String, Option<String>),
    ) {
        let stricter = match &self.best {
            None => true,
            Some(b) => {
                (verdict, risk) > (b.verdict, b.risk)
                    || ((verdict, risk) == (b.verdict, b.risk) && b.weak && !weak)
            }
        };
        if stricter {
            let (rule, reason, token) = make();
            self.best = Some(Part {
                verdict,
                risk,
                weak,
                rule,
                reason,
                token,
            });
        }
    }

    fn builtin(
        &mut self,
        verdict: Verdict,
        risk: RiskLevel,
        rule: &'static str,
        reason: String,
        token: &str,
    ) {
        self.offer(verdict, risk, || {
            (rule.to_string(), reason, Some(token.to_string()))
        });
    }

    fn raw(&mut self, text: &str) {
        if self.engine.raw_rules.is_empty() {
            return;
        }
        for &i in &self.engine.raw_rules {
            let rule = &self.engine.rules[i];
            let Some(lazy) = &rule.pattern else { continue };
            // Pattern rules only refuse, so one that cannot be compiled
            // refuses everything.
            let token = match lazy.get() {
                Some(re) => match re.find(text.as_bytes()) {
                    Some(hit) => {
                        Some(String::from_utf8_lossy(&text.as_bytes()[hit.range()]).into_owned())
                    }
                    None => continue,
                },
                None => None,
            };
            self.offer(rule.action, rule.risk, || {
                (rule.id.clone(), rule.reason.clone(), token)
            });
        }
    }

    fn script(&mut self, script: &Script, cwd: &mut Cwd, depth: usize) {
        let action = self.policy.shell.unsupported;
        for (construct, _) in &script.unsupported {
            self.builtin(
                feature_verdict(action),
                RiskLevel::Medium,
                "builtin:unsupported",
                format!(
                    "`{construct}` (grouping, control flow or a function) cannot be checked command by command; send the plain commands joined by `&&`, `;` or `|` instead"
                ),
                construct,
            );
        }
        for (j, command) in script.commands.iter().enumerate() {
            if matches!(command.joined_by, Some(op) if op != Operator::And) {
                cwd.uncertain = true;
            }
            let next = script.commands.get(j + 1).and_then(|c| c.joined_by);
            // A `cd` in a pipeline or in the background runs in a subshell.
            let persistent = command.joined_by != Some(Operator::Pipe)
                && !matches!(next, Some(Operator::Pipe | Operator::Background));
            self.simple(command, cwd, depth, persistent);
        }
    }

    fn bases<'c>(&'c self, cwd: &'c Cwd) -> impl Iterator<Item = &'c Path> + 'c {
        let start = self.ctx.cwd;
        let (first, rest): (&Path, &[PathBuf]) = if cwd.uncertain {
            (start, &cwd.seen)
        } else {
            (cwd.exact.as_deref().unwrap_or(start), &[])
        };
        std::iter::once(first).chain(rest.iter().map(PathBuf::as_path))
    }

    fn simple(&mut self, sc: &SimpleCommand, cwd: &mut Cwd, depth: usize, persistent: bool) {
        for a in &sc.assignments {
            self.scan_word(a);
            self.substitutions(a, cwd, depth);
            self.assignment(a, &a.value, cwd);
        }
        let mut mutating = false;
        for r in &sc.redirects {
            self.scan_word(&r.target);
            if let Some(body) = &r.heredoc {
                // An unquoted delimiter expands the body; the lexer put the
                // body's features on the target.
                let f = &r.target.features;
                if !f.quoted
                    && (f.arithmetic || f.parameter_expansion)
                    && let Some(found) = hidden::evaluated(body)
                {
                    self.evaluation(found.describe(), &r.target.raw);
                }
            }
            self.substitutions(&r.target, cwd, depth);
            match r.kind {
                RedirectKind::Input => self.check_word(&r.target, Access::Read, cwd),
                RedirectKind::Output
                | RedirectKind::Append
                | RedirectKind::ReadWrite
                | RedirectKind::OutputBoth
                | RedirectKind::AppendBoth => {
                    if r.target.value != "/dev/null" || has_expansion(&r.target.features) {
                        mutating = true;
                        match self.policy.shell.output_redirection {
                            FeatureAction::Check => self.check_word(&r.target, Access::Write, cwd),
                            action => self.builtin(
                                feature_verdict(action),
                                RiskLevel::Medium,
                                "builtin:output-redirection",
                                "this policy does not let commands write files; drop the redirection (or redirect to /dev/null)".into(),
                                &r.target.raw,
                            ),
                        }
                    }
                }
                // Here-document substitutions arrive as the target's
                // substitutions and were decided above.
                RedirectKind::Duplicate | RedirectKind::HereString | RedirectKind::HereDoc => {}
            }
        }
        if mutating {
            self.read_only = false;
        }
        for w in &sc.words {
            self.scan_word(w);
            self.substitutions(w, cwd, depth);
        }
        if !sc.redirects.is_empty() {
            // `{NAME}>file` stores the new descriptor in NAME (the lexer
            // sees an ordinary word), evaluating a subscript in NAME.
            for w in &sc.words {
                if !w.features.quoted
                    && let Some(name) = hidden::fd_variable(&w.raw)
                {
                    self.check_name(name, &w.raw);
                }
            }
        }
        if sc.words.is_empty() {
            let token = sc
                .assignments
                .first()
                .map(|a| &a.raw)
                .or_else(|| sc.redirects.first().map(|r| &r.target.raw));
            self.offer_weak(|| {
                (
                    "builtin:shell-state".into(),
                    "only assignments or redirections".into(),
                    token.cloned(),
                )
            });
            return;
        }
        self.command(&sc.words, cwd, depth, persistent);
    }

    /// Commands inside `$(...)`, backticks and `<(...)`.
    fn substitutions(&mut self, w: &Word, cwd: &Cwd, depth: usize) {
        if w.substitutions.is_empty() {
            return;
        }
        let shell = &self.policy.shell;
        let mut action = FeatureAction::Check;
        let mut what = "command substitution";
        if w.features.command_substitution || !w.features.process_substitution {
            action = shell.command_substitution;
        }
        if w.features.process_substitution
            && strictness(shell.process_substitution) > strictness(action)
        {
            action = shell.process_substitution;
            what = "process substitution";
        }
        if action != FeatureAction::Check {
            self.builtin(
                feature_verdict(action),
                RiskLevel::Medium,
                "builtin:substitution",
                format!("{what} is not allowed by this policy; run the inner command on its own and use its output"),
                &w.raw,
            );
            return;
        }
        if depth + 1 > shell.max_nesting {
            self.too_deep(&w.raw);
            return;
        }
        for inner in &w.substitutions {
            let mut inner_cwd = cwd.clone();
            self.script(inner, &mut inner_cwd, depth + 1);
        }
    }

    fn too_deep(&mut self, token: &str) {
        let limit = self.policy.shell.max_nesting;
        self.builtin(
            Verdict::Deny,
            RiskLevel::Medium,
            "builtin:nesting-depth",
            format!(
                "shells and substitutions nest deeper than {limit} levels; flatten the command"
            ),
            token,
        );
    }

    /// Bash would evaluate a value as code here (see `hidden`).
    fn evaluation(&mut self, what: &str, token: &str) {
        self.builtin(
            feature_verdict(self.policy.shell.evaluation),
            RiskLevel::High,
            "builtin:evaluation",
            format!(
                "bash evaluates {what} as an expression, so a value such as `a[$(cmd)]` stored earlier would run `cmd` unchecked; write numbers and variable names literally (`${{a[0]}}`, `$((2+3))`, `read -r line`) or compute the value with a separate command"
            ),
            token,
        );
        self.read_only = false;
    }

    /// A word the lexer saw expanding: refused when the expansion makes
    /// bash evaluate a value as code. Plain words cost one flag test.
    fn scan_word(&mut self, w: &Word) {
        if (w.features.arithmetic || w.features.parameter_expansion)
            && let Some(found) = hidden::evaluated(&w.raw)
        {
            self.evaluation(found.describe(), &w.raw);
        }
    }

    /// A variable name a builtin assigns, tests or removes (`read NAME`,
    /// `printf -v NAME`, `declare NAME=..`, `test -v NAME`).
    fn check_name(&mut self, name: &str, shown: &str) {
        match hidden::plain_name(name) {
            Some(base) => {
                self.check_var_name(base);
                if ARITHMETIC_SPECIALS.contains(&base) {
                    self.evaluation(&format!("any value given to `{base}`"), shown);
                }
            }
            None => self.evaluation(COMPUTED_NAME, shown),
        }
    }

    fn denied_name(&self, name: &str) -> bool {
        self.engine.deny_assign.iter().any(|(n, prefix)| {
            if *prefix {
                name.starts_with(n.as_str())
            } else {
                name == n
            }
        })
    }

    fn check_var_name(&mut self, name: &str) {
        if self.denied_name(name) {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:assignment",
                format!(
                    "setting `{name}` changes which programs, libraries or code run; remove the assignment"
                ),
                name,
            );
        }
    }

    /// `NAME=value` (prefix assignments, `export`, `env`): the name must not
    /// be a loader/shell variable, and a path-like value is checked.
    fn assignment(&mut self, w: &Word, text: &str, cwd: &Cwd) {
        let Some(eq) = text.find('=') else {
            self.check_name(text, &w.raw);
            return;
        };
        let name = text[..eq].strip_suffix('+').unwrap_or(&text[..eq]);
        let value = &text[eq + 1..];
        match hidden::plain_name(name) {
            Some(base) => {
                self.check_var_name(base);
                let number = !value.is_empty()
                    && value.bytes().all(|c| c.is_ascii_digit())
                    && !has_expansion(&w.features);
                if ARITHMETIC_SPECIALS.contains(&base) && !number {
                    self.evaluation(&format!("any value given to `{base}`"), &w.raw);
                }
            }
            None => self.evaluation(COMPUTED_NAME, &w.raw),
        }
        if value.is_empty() {
            return;
        }
        if has_expansion(&w.features) {
            self.check_expanded(&w.raw, value, Access::Read, cwd);
        } else if let Some(rest) = value.strip_prefix('~') {
            self.check_tilde(&w.raw, rest, Access::Read, cwd);
        } else {
            for part in value.split(':') {
                if path_like(part) {
                    self.check_path(&w.raw, part, Access::Read, cwd);
                }
            }
        }
    }

    /// The program word and what follows it.
    fn command(&mut self, words: &[Word], cwd: &mut Cwd, depth: usize, persistent: bool) {
        let mut i = 0;
        loop {
            let w = &words[i];
            let f = &w.features;
            if has_expansion(f) || f.glob || f.brace {
                let action = self.policy.shell.program_expansion;
                self.builtin(
                    feature_verdict(action),
                    RiskLevel::High,
                    "builtin:program-expansion",
                    format!(
                        "the program `{}` is computed at run time, so it cannot be checked; name the program literally",
                        w.raw
                    ),
                    &w.raw,
                );
                self.read_only = false;
                return;
            }
            let prog = w.value.as_str();
            let args = &words[i + 1..];
            let bare = !prog.contains('/');
            let base = basename(prog);
            if REFUSED.contains(&base) {
                let reason = if matches!(base, "sudo" | "su" | "doas" | "runuser" | "pkexec") {
                    format!(
                        "`{base}` runs commands as another user; privilege changes are never allowed"
                    )
                } else {
                    format!(
                        "`{base}` runs other commands in a way the policy cannot check; run the inner command directly if it is allowed"
                    )
                };
                self.builtin(
                    Verdict::Deny,
                    RiskLevel::High,
                    "builtin:unsafe-wrapper",
                    reason,
                    prog,
                );
                self.read_only = false;
                return;
            }
            if !bare {
                // Running a file is reading it: a program outside the root
                // and the system directories is an escape like any other.
                self.check_word(w, Access::Read, cwd);
            }
            if bare && is_shell_only(prog) {
                self.shell_only = true;
            }
            let trusted = self.trusted_name(prog);
            if bare {
                match prog {
                    "cd" | "pushd" => return self.cd(prog, args, cwd, persistent),
                    "popd" => {
                        self.builtin(
                            Verdict::Deny,
                            RiskLevel::Medium,
                            "builtin:cd",
                            "`popd` cannot be followed; `cd` to an explicit directory inside the root".into(),
                            prog,
                        );
                        return;
                    }
                    "eval" | "source" | "." | "compgen" => {
                        let reason = match prog {
                            "eval" => {
                                "`eval` runs a string as a new command line, re-expanding what was checked; send the command itself without `eval`"
                            }
                            "compgen" => {
                                "`compgen` expands word lists and runs completion commands (`-W`, `-C`, `-F`); list names with `ls` or `grep` instead"
                            }
                            _ => {
                                "sourcing runs a file's commands in this shell without checking them; send the commands themselves, or run the script as a program if the policy allows that"
                            }
                        };
                        self.builtin(
                            Verdict::Deny,
                            RiskLevel::High,
                            "builtin:unsafe-builtin",
                            reason.into(),
                            prog,
                        );
                        self.read_only = false;
                        return;
                    }
                    "hash" if args.iter().any(|a| a.value.starts_with("-p")) => {
                        self.builtin(
                            Verdict::Deny,
                            RiskLevel::High,
                            "builtin:unsafe-builtin",
                            "`hash -p` makes a name run another file; call the program by its name"
                                .into(),
                            prog,
                        );
                        return;
                    }
                    _ if UNSAFE_BUILTINS.contains(&prog) => {
                        self.builtin(
                            Verdict::Deny,
                            RiskLevel::High,
                            "builtin:unsafe-builtin",
                            format!("`{prog}` defines or loads code that runs later, which cannot be checked"),
                            prog,
                        );
                        return;
                    }
                    _ if STATE_BUILTINS.contains(&prog) => {
                        return self.state_builtin(prog, args, cwd);
                    }
                    _ => {}
                }
            }
            let wrapper_ok = (bare && matches!(prog, "exec" | "command" | "builtin" | "time"))
                || trusted.is_some();
            if wrapper_ok {
                match self.unwrap(base, args, cwd) {
                    Ok(Unwrapped::Inner(k)) => {
                        i += 1 + k;
                        continue;
                    }
                    Ok(Unwrapped::Lookup) => {
                        self.offer_weak(|| {
                            (
                                "builtin:lookup".into(),
                                "only looks up a command name".into(),
                                Some(prog.to_string()),
                            )
                        });
                        return;
                    }
                    Ok(Unwrapped::Nothing)
                        if matches!(base, "exec" | "command" | "builtin" | "time") =>
                    {
                        self.offer_weak(|| {
                            (
                                "builtin:shell-state".into(),
                                "no command to run".into(),
                                Some(prog.to_string()),
                            )
                        });
                        return;
                    }
                    Ok(Unwrapped::Nothing | Unwrapped::NotAWrapper) => {}
                    Err(reason) => {
                        self.builtin(
                            Verdict::Deny,
                            RiskLevel::High,
                            "builtin:unsafe-wrapper",
                            reason,
                            prog,
                        );
                        self.read_only = false;
                        return;
                    }
                }
            }
            if trusted.is_some()
                && SHELLS.contains(&base)
                && self.nested_shell(prog, args, cwd, depth)
            {
                return;
            }
            self.program(prog, trusted, args, cwd);
            return;
        }
    }

    /// The name under which `prog` may match allow rules: a bare name that
    /// resolves to a system binary (or not at all), or a path that is
    /// exactly where the bare name resolves.
    fn trusted_name<'w>(&self, prog: &'w str) -> Option<&'w str> {
        let path = &self.policy.env.path;
        if !prog.contains('/') {
            if self.engine.path_trusted
                && !self
                    .engine
                    .path_entries
                    .iter()
                    .any(|e| e.starts_with(self.ctx.root))
            {
                return Some(prog);
            }
            let agent_writable = |p: &Path| {
                p.starts_with(self.ctx.root)
                    || self.engine.writable.iter().any(|w| p.starts_with(w))
            };
            // An entry the child can write to may hold a fake `git` by the
            // time this runs, ahead of the real one: no name is trusted.
            if self.engine.path_entries.iter().any(|e| agent_writable(e)) {
                return None;
            }
            return match super::resolve_program(prog, path) {
                // Not installed: the name is only a name (running it fails),
                // unless an earlier command could create it on the PATH.
                None => {
                    (!self.engine.path_entries.iter().any(|e| agent_writable(e))).then_some(prog)
                }
                Some(found) => {
                    let canon = resolve_path(Path::new("/"), &found).unwrap_or(found);
                    let system = !agent_writable(&canon)
                        && self.engine.readable.iter().any(|r| canon.starts_with(r));
                    system.then_some(prog)
                }
            };
        }
        let base = basename(prog);
        let found = super::resolve_program(base, path)?;
        (normalize_lexically(self.ctx.cwd, Path::new(prog)) == found).then_some(base)
    }

    fn program(&mut self, prog: &str, trusted: Option<&str>, args: &[Word], cwd: &Cwd) {
        let engine = self.engine;
        let mut best: Option<(usize, Match)> = None;
        let mut consider = |list: Option<&Vec<usize>>, allow_ok: bool| {
            for &ri in list.map(Vec::as_slice).unwrap_or(&[]) {
                let rule = &engine.rules[ri];
                if !allow_ok && rule.action == Verdict::Allow {
                    continue;
                }
                if let Some(m) = rule.matches(args) {
                    let better = match &best {
                        None => true,
                        Some((bi, bm)) => {
                            (rule.action, m.specificity)
                                > (engine.rules[*bi].action, bm.specificity)
                        }
                    };
                    if better {
                        best = Some((ri, m));
                    }
                }
            }
        };
        if prog.contains('/') {
            consider(engine.by_program.get(prog), true);
        }
        match trusted {
            Some(name) => consider(engine.by_program.get(name), true),
            None => consider(engine.by_program.get(basename(prog)), false),
        }
        let (writes, consumed) = match best {
            Some((ri, m)) => {
                let rule = &engine.rules[ri];
                let token = m.token.unwrap_or(prog);
                self.offer(rule.action, rule.risk, || {
                    (
                        rule.id.clone(),
                        rule.reason.clone(),
                        Some(token.to_string()),
                    )
                });
                if rule.action != Verdict::Allow || !rule.read_only {
                    self.read_only = false;
                }
                if rule.action == Verdict::Deny {
                    return;
                }
                let mut consumed = m.consumed;
                if rule.pattern_operand
                    && let Some(k) = pattern_position(args)
                    && k < 64
                {
                    consumed |= 1 << k;
                }
                (rule.writes, consumed)
            }
            None => {
                let policy = self.policy;
                self.offer(policy.default, policy.default_risk, || {
                    (
                        "default".into(),
                        format!(
                            "no rule covers `{prog}`{}; this policy's default for such commands is {}",
                            if trusted.is_none() && !prog.contains('/') {
                                " as it resolves to a program outside the system directories"
                            } else if trusted.is_none() {
                                " run by path (rules match programs by name)"
                            } else {
                                ""
                            },
                            policy.default
                        ),
                        Some(prog.to_string()),
                    )
                });
                self.read_only = false;
                (Writes::None, 0)
            }
        };
        if base_is(prog, "printf") {
            // `printf -v NAME` and `-vNAME` assign; options end at the format.
            for (k, a) in args.iter().enumerate() {
                let v = a.value.as_str();
                if v == "--" || !v.starts_with('-') {
                    break;
                }
                if let Some(rest) = v.strip_prefix("-v") {
                    match (rest.is_empty(), args.get(k + 1)) {
                        (false, _) => self.check_name(rest, &a.raw),
                        (true, Some(n)) => self.check_name(&n.value, &n.raw),
                        (true, None) => {}
                    }
                    break;
                }
            }
        } else if base_is(prog, "test") || base_is(prog, "[") {
            // `test -v NAME` evaluates NAME's subscript (and assigns nothing).
            for pair in args.windows(2) {
                if pair[0].value == "-v" && hidden::plain_name(&pair[1].value).is_none() {
                    self.evaluation(COMPUTED_NAME, &pair[1].raw);
                }
            }
        }
        self.check_args(args, writes, consumed, cwd);
    }

    /// Checks every argument that names a path, with the access the
    /// program's rule gives it.
    fn check_args(&mut self, args: &[Word], writes: Writes, consumed: u64, cwd: &Cwd) {
        let mut target_dir: Option<usize> = None;
        let mut last_operand: Option<usize> = None;
        let mut symbolic = false;
        if matches!(writes, Writes::Last | Writes::Link) {
            let mut after_dashdash = false;
            let mut k = 0;
            while k < args.len() {
                let v = args[k].value.as_str();
                if !after_dashdash && v == "--" {
                    after_dashdash = true;
                } else if !after_dashdash && (v == "-t" || v == "--target-directory") {
                    target_dir = Some(k + 1);
                    k += 1;
                } else if !after_dashdash && v.starts_with('-') && v.len() > 1 {
                    if (v.starts_with("-t") && !v.starts_with("--"))
                        || v.starts_with("--target-directory=")
                    {
                        target_dir = Some(k);
                    }
                    if v == "--symbolic" || (!v.starts_with("--") && v[1..].contains('s')) {
                        symbolic = true;
                    }
                } else {
                    last_operand = Some(k);
                }
                k += 1;
            }
        }
        let mut after_dashdash = false;
        for (k, w) in args.iter().enumerate() {
            if k < 64 && consumed & (1 << k) != 0 {
                continue;
            }
            let v = w.value.as_str();
            let is_option = !after_dashdash && v.starts_with('-') && v.len() > 1;
            if !after_dashdash && v == "--" {
                after_dashdash = true;
                continue;
            }
            let access = match writes {
                Writes::None => Access::Read,
                Writes::Operands if !is_option => Access::WriteNotRoot,
                Writes::Operands => Access::Read,
                Writes::Last | Writes::Link => {
                    if Some(k) == target_dir || (target_dir.is_none() && Some(k) == last_operand) {
                        Access::Write
                    } else if writes == Writes::Link && symbolic && !is_option {
                        // A symlink's target is resolved from the link's
                        // directory and later reads through it must stay in
                        // the root, so it is held to the write rule.
                        let link_dir = match target_dir {
                            Some(t) => args.get(t).map_or(".", |a| {
                                let v = a.value.as_str();
                                v.strip_prefix("--target-directory=")
                                    .or_else(|| v.strip_prefix("-t").filter(|_| v.starts_with('-')))
                                    .unwrap_or(v)
                            }),
                            None => last_operand
                                .and_then(|l| args.get(l))
                                .and_then(|a| a.value.rsplit_once('/'))
                                .map_or(".", |(dir, _)| if dir.is_empty() { "/" } else { dir }),
                        };
                        self.check_link_target(w, link_dir, cwd);
                        continue;
                    } else {
                        Access::Read
                    }
                }
            };
            if Some(k) == target_dir && v.starts_with('-') {
                let dir = v
                    .strip_prefix("--target-directory=")
                    .or_else(|| v.strip_prefix("-t"))
                    .unwrap_or(v);
                self.check_path(&w.raw, dir, Access::Write, cwd);
                continue;
            }
            self.check_word(w, access, cwd);
        }
    }

    fn check_link_target(&mut self, w: &Word, link_dir: &str, cwd: &Cwd) {
        let v = w.value.as_str();
        let mut bad: Option<PathBuf> = None;
        for base in self.bases(cwd) {
            let dir = normalize_lexically(base, Path::new(link_dir));
            let target = resolve_path(&dir, Path::new(v));
            match target {
                Some(t) if t.starts_with(self.ctx.root) => {}
                Some(t) => {
                    bad = Some(t);
                    break;
                }
                None => {
                    bad = Some(PathBuf::from(v));
                    break;
                }
            }
        }
        if let Some(t) = bad {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:path-escape",
                format!(
                    "the symlink target `{v}` resolves to {}, outside the project root; links may only point inside the root",
                    t.display()
                ),
                v,
            );
        }
    }

    /// One word as a path (or a word that may carry one).
    fn check_word(&mut self, w: &Word, access: Access, cwd: &Cwd) {
        let f = &w.features;
        let v = w.value.as_str();
        if f.process_substitution && !f.parameter_expansion && !f.command_substitution {
            return;
        }
        if has_expansion(f) {
            match self.policy.shell.argument_expansion {
                FeatureAction::Check => self.check_expanded(&w.raw, v, access, cwd),
                action => self.builtin(
                    feature_verdict(action),
                    RiskLevel::Medium,
                    "builtin:argument-expansion",
                    "variables and substitutions in arguments are not allowed by this policy; write the value literally".into(),
                    &w.raw,
                ),
            }
            return;
        }
        if f.glob || f.brace {
            match self.policy.shell.globs {
                FeatureAction::Check => {
                    let alternatives = if f.brace { expand_braces(v, 64) } else { Some(vec![v.to_string()]) };
                    match alternatives {
                        Some(alts) => {
                            for alt in &alts {
                                self.check_value(&w.raw, alt, access, cwd, f.glob, f.tilde);
                            }
                        }
                        None => self.builtin(
                            Verdict::Deny,
                            RiskLevel::Medium,
                            "builtin:glob",
                            "this brace expansion produces too many words to check; list the paths".into(),
                            &w.raw,
                        ),
                    }
                }
                action => self.builtin(
                    feature_verdict(action),
                    RiskLevel::Medium,
                    "builtin:glob",
                    "globs and brace expansion are not allowed by this policy; list the files explicitly".into(),
                    &w.raw,
                ),
            }
            return;
        }
        self.check_value(&w.raw, v, access, cwd, false, f.tilde);
    }

    /// A plain (or glob) value: options, `--opt=path`, `-Xpath`, operands.
    fn check_value(
        &mut self,
        shown: &str,
        v: &str,
        access: Access,
        cwd: &Cwd,
        glob: bool,
        tilde: bool,
    ) {
        if let Some(rest) = v.strip_prefix("--") {
            if let Some((_, value)) = rest.split_once('=') {
                self.check_operand(
                    shown,
                    value,
                    Access::Read,
                    cwd,
                    glob,
                    value.starts_with('~'),
                );
            }
            return;
        }
        if v.len() > 1 && v.starts_with('-') {
            // `-o/etc/x`, `-I../..`: a glued value that is clearly a path.
            // One-character values (`-F/`, `-d/`) are delimiters.
            if let Some(value) = v.get(2..)
                && value.len() > 1
                && (value.starts_with('/') || value.starts_with('~') || value.starts_with(".."))
            {
                self.check_operand(
                    shown,
                    value,
                    Access::Read,
                    cwd,
                    glob,
                    value.starts_with('~'),
                );
            }
            return;
        }
        self.check_operand(shown, v, access, cwd, glob, tilde);
    }

    fn check_operand(
        &mut self,
        shown: &str,
        v: &str,
        access: Access,
        cwd: &Cwd,
        glob: bool,
        tilde: bool,
    ) {
        if tilde && let Some(rest) = v.strip_prefix('~') {
            return self.check_tilde(shown, rest, access, cwd);
        }
        if glob {
            // The part before the first pattern resolves on disk, the rest
            // lexically (a pattern component names nothing that exists). A
            // component like `.*` matches `..` in some shells, so it counts
            // as `..`.
            let is_dot_pattern = |c: &str| c.starts_with('.') && c.contains(['*', '?', '[']);
            if v.split('/').any(is_dot_pattern) {
                let dotted: Vec<&str> = v
                    .split('/')
                    .map(|c| if is_dot_pattern(c) { ".." } else { c })
                    .collect();
                self.check_path(shown, &dotted.join("/"), access, cwd);
            } else if path_like(v) {
                self.check_path(shown, v, access, cwd);
            }
            return;
        }
        // `if=/etc/passwd`, `DESTDIR=/usr`: a value glued to a key.
        if let Some((_, value)) = v.split_once('=')
            && (value.starts_with('/') || value.starts_with("..") || value.starts_with('~'))
        {
            self.check_operand(shown, value, access, cwd, false, value.starts_with('~'));
        }
        if path_like(v) {
            self.check_path(shown, v, access, cwd);
        } else if !v.is_empty() && access == Access::Read {
            // A bare name costs one lstat, and only a symlink can lead out.
            let linked = self.bases(cwd).any(|b| is_symlink(b, v));
            if linked {
                self.check_path(shown, v, access, cwd);
            }
        } else if !v.is_empty() {
            self.check_path(shown, v, access, cwd);
        }
    }

    fn check_tilde(&mut self, shown: &str, rest: &str, access: Access, cwd: &Cwd) {
        match (&self.engine.home, rest.is_empty() || rest.starts_with('/')) {
            (Some(home), true) => {
                let full = format!("{}{}", home.display(), rest);
                self.check_path(shown, &full, access, cwd);
            }
            _ => self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:path-escape",
                format!("`{shown}` is in a home directory, outside the project root; use a path inside the root"),
                shown,
            ),
        }
    }

    /// A word with `$VAR`/`$(...)`: only its literal prefix can be checked.
    fn check_expanded(&mut self, shown: &str, v: &str, access: Access, cwd: &Cwd) {
        let v = match v.strip_prefix("--").and_then(|r| r.split_once('=')) {
            Some((_, value)) => value,
            None => v,
        };
        let pos = v.find(['$', '`']).unwrap_or(v.len());
        let prefix = &v[..pos];
        if prefix.is_empty() {
            if v[pos..].contains('/') {
                self.builtin(
                    Verdict::Deny,
                    RiskLevel::High,
                    "builtin:expansion-path",
                    format!(
                        "`{shown}` builds a path from a variable or substitution, which may point anywhere; write the path literally (relative to the project root)"
                    ),
                    shown,
                );
            }
            return;
        }
        if prefix.starts_with('~') {
            // `~/$X`: whatever follows, it is under the home directory.
            return self.check_tilde(shown, "", access, cwd);
        }
        if let Some(slash) = prefix.rfind('/') {
            self.check_path(shown, &prefix[..slash.max(1)], access, cwd);
        } else if prefix == ".." {
            self.check_path(shown, prefix, access, cwd);
        }
    }

    /// Resolves `v` against every possible working directory and refuses
    /// it when it lands outside what `access` permits.
    fn check_path(&mut self, shown: &str, v: &str, access: Access, cwd: &Cwd) {
        if access == Access::Read && DEV_READ.contains(&v) {
            return;
        }
        if v == "/dev/null" {
            return;
        }
        let root = self.ctx.root;
        let mut escape: Option<(PathBuf, &'static str)> = None;
        for base in self.bases(cwd) {
            let Some(resolved) = resolve_path(base, Path::new(v)) else {
                escape = Some((PathBuf::from(v), "a symlink loop"));
                break;
            };
            let inside = resolved.starts_with(root);
            let ok = match access {
                Access::Read => {
                    inside
                        || self.engine.readable.iter().any(|r| resolved.starts_with(r))
                        || resolved == Path::new("/dev/null")
                }
                Access::Write => {
                    inside
                        || self.engine.writable.iter().any(|r| resolved.starts_with(r))
                        || resolved == Path::new("/dev/null")
                }
                Access::WriteNotRoot => {
                    if resolved == root {
                        escape = Some((resolved, "the project root itself"));
                        break;
                    }
                    inside || self.engine.writable.iter().any(|r| resolved.starts_with(r))
                }
            };
            if !ok {
                escape = Some((resolved, ""));
                break;
            }
        }
        if let Some((resolved, why)) = escape {
            let reason = match (access, why) {
                (_, "") if access == Access::Read => format!(
                    "`{shown}` resolves to {}, outside the project root and the readable system directories; only files inside the root may be read",
                    resolved.display()
                ),
                (_, "") => format!(
                    "`{shown}` resolves to {}, outside the project root; writes must stay inside the root",
                    resolved.display()
                ),
                (_, why) => format!("`{shown}` is {why}; it may not be written or removed"),
            };
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:path-escape",
                reason,
                shown,
            );
        }
    }

    fn cd(&mut self, prog: &str, args: &[Word], cwd: &mut Cwd, persistent: bool) {
        let target = args
            .iter()
            .find(|a| a.value == "-" || !a.value.starts_with('-') || a.value.len() == 1);
        let Some(t) = target else {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:cd",
                format!("`{prog}` without a directory goes to the home directory, outside the project root"),
                prog,
            );
            return;
        };
        if t.value == "-"
            || has_expansion(&t.features)
            || t.features.glob
            || t.features.brace
            || t.features.tilde
        {
            self.builtin(
                Verdict::Deny,
                RiskLevel::Medium,
                "builtin:cd",
                format!(
                    "`{prog} {}` cannot be followed; `cd` to a literal directory inside the root",
                    t.raw
                ),
                &t.raw,
            );
            return;
        }
        let mut next = Vec::new();
        let mut bad = None;
        for base in self.bases(cwd) {
            match resolve_path(base, Path::new(&t.value)) {
                Some(p) if p.starts_with(self.ctx.root) => next.push(p),
                Some(p) => {
                    bad = Some(p);
                    break;
                }
                None => {
                    bad = Some(PathBuf::from(&t.value));
                    break;
                }
            }
        }
        if let Some(p) = bad {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:path-escape",
                format!(
                    "`{prog} {}` leaves the project root (to {}); later commands would run outside it",
                    t.raw,
                    p.display()
                ),
                &t.raw,
            );
            return;
        }
        if !persistent {
            cwd.uncertain = true;
        }
        if !cwd.uncertain && next.len() == 1 {
            cwd.exact = next.first().cloned();
        }
        cwd.seen.extend(next);
        self.offer_weak(|| {
            (
                "builtin:cd".into(),
                "changes directory inside the project root".into(),
                Some(t.raw.clone()),
            )
        });
    }

    fn nested_text(&mut self, text: &str, shown: &str, cwd: &Cwd, depth: usize) {
        if depth + 1 > self.policy.shell.max_nesting {
            self.too_deep(shown);
            return;
        }
        match agent_exec_lexer::lex(text) {
            Ok(script) => {
                let mut inner = cwd.clone();
                self.script(&script, &mut inner, depth + 1);
            }
            Err(ParseError::Empty) => {
                self.offer_weak(|| {
                    (
                        "builtin:shell-state".into(),
                        "an empty script".into(),
                        Some(shown.to_string()),
                    )
                });
            }
            Err(e) => self.builtin(
                Verdict::Deny,
                RiskLevel::Medium,
                "builtin:nested-parse",
                format!("the script passed to `{shown}` is not valid shell ({e}); fix its quoting"),
                shown,
            ),
        }
    }

    /// `bash -c '...'` and friends: true when handled (a `-c` script).
    fn nested_shell(&mut self, prog: &str, args: &[Word], cwd: &Cwd, depth: usize) -> bool {
        let mut has_c = false;
        let mut k = 0;
        while k < args.len() {
            let v = args[k].value.as_str();
            if v == "--" || v == "-" {
                k += 1;
                break;
            }
            if let Some(long) = v.strip_prefix("--") {
                k += if matches!(long, "rcfile" | "init-file") {
                    2
                } else {
                    1
                };
                continue;
            }
            if (v.starts_with('-') || v.starts_with('+')) && v.len() > 1 {
                if v[1..].contains('c') {
                    has_c = true;
                }
                k += if v.ends_with('o') || v.ends_with('O') {
                    2
                } else {
                    1
                };
                continue;
            }
            break;
        }
        if !has_c {
            return false;
        }
        // Deny or approval rules about the shell itself still apply.
        let engine = self.engine;
        let strict: Option<&Rule> = engine
            .by_program
            .get(basename(prog))
            .into_iter()
            .flatten()
            .map(|&ri| &engine.rules[ri])
            .filter(|r| r.action != Verdict::Allow && r.matches(args).is_some())
            .max_by_key(|r| (r.action, r.risk));
        if let Some(rule) = strict {
            self.offer(rule.action, rule.risk, || {
                (rule.id.clone(), rule.reason.clone(), Some(prog.to_string()))
            });
            self.read_only = false;
        }
        let Some(script) = args.get(k) else {
            self.builtin(
                Verdict::Deny,
                RiskLevel::Low,
                "builtin:nested-shell",
                format!("`{prog} -c` needs a script"),
                prog,
            );
            return true;
        };
        if has_expansion(&script.features) {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:nested-shell",
                format!("the script of `{prog} -c` is computed at run time and cannot be checked; pass it literally"),
                &script.raw,
            );
            return true;
        }
        self.nested_text(&script.value, prog, cwd, depth);
        // `sh -c '... "$1"' _ PATH`: the positional parameters become the
        // script's arguments, which it may read or write, so they must
        // name places inside the root.
        if let Some(positional) = args.get(k + 1..) {
            self.check_args(positional, Writes::Operands, 0, cwd);
        }
        true
    }

    fn state_builtin(&mut self, prog: &str, args: &[Word], cwd: &Cwd) {
        let declares = matches!(
            prog,
            "export" | "readonly" | "local" | "declare" | "typeset"
        );
        let names = matches!(prog, "read" | "mapfile" | "readarray");
        if matches!(prog, "set" | "shopt")
            && let Some(option) = unsafe_shell_option(prog, args)
        {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:unsafe-builtin",
                format!(
                    "`{prog}` with `{option}` changes what later words mean (arguments become environment variables, names become directories or aliases), so the checked command is not what runs; leave the option off"
                ),
                option,
            );
            return;
        }
        let mut skip_next = false;
        for (k, a) in args.iter().enumerate() {
            let v = a.value.as_str();
            if skip_next {
                skip_next = false;
                continue;
            }
            if prog == "let" {
                // Every argument is an arithmetic expression.
                if has_expansion(&a.features) || !hidden::inert_arithmetic(v.as_bytes()) {
                    self.evaluation("the expressions of `let`", &a.raw);
                }
                continue;
            }
            if v.starts_with('-') && v.len() > 1 {
                let flags = &v[1..];
                if declares && flags.contains('n') {
                    self.builtin(
                        Verdict::Deny,
                        RiskLevel::High,
                        "builtin:assignment",
                        format!("`{prog} {v}` makes a name refer to another variable, which hides assignments; drop -n"),
                        v,
                    );
                }
                if declares && flags.contains('i') {
                    self.evaluation(
                        &format!("every value assigned to a `{prog} -i` variable"),
                        v,
                    );
                }
                let runs = match prog {
                    "mapfile" | "readarray" => flags.contains('C'),
                    "jobs" => flags.contains('x'),
                    _ => false,
                };
                if runs {
                    self.builtin(
                        Verdict::Deny,
                        RiskLevel::High,
                        "builtin:unsafe-builtin",
                        format!("`{prog} {v}` runs a command given as text, which cannot be checked; run the command directly"),
                        v,
                    );
                }
                if prog == "wait"
                    && let Some(at) = flags.find('p')
                {
                    // `wait -p NAME` (or `-pNAME`) assigns the job's id.
                    match (&flags[at + 1..], args.get(k + 1)) {
                        ("", Some(n)) => {
                            self.check_name(&n.value, &n.raw);
                            skip_next = true;
                        }
                        ("", None) => {}
                        (rest, _) => self.check_name(rest, &a.raw),
                    }
                }
                // Options of read/mapfile that take a value.
                if names
                    && matches!(
                        v,
                        "-p" | "-d"
                            | "-t"
                            | "-n"
                            | "-N"
                            | "-u"
                            | "-a"
                            | "-i"
                            | "-C"
                            | "-c"
                            | "-O"
                            | "-s"
                    )
                {
                    skip_next = v != "-a" && !(prog != "read" && v == "-t");
                    if v == "-a" {
                        if let Some(n) = args.get(k + 1) {
                            self.check_name(&n.value, &n.raw);
                        }
                        skip_next = true;
                    }
                }
                continue;
            }
            if declares {
                if let Some((_, value)) = v.split_once('=')
                    && value.starts_with('(')
                {
                    // `declare -a a='([$(id)]=1)'` is a compound assignment
                    // parsed (and its subscripts evaluated) from a string.
                    self.evaluation("an array assignment given as a string", &a.raw);
                }
                self.assignment(a, v, cwd);
            } else if names || (prog == "getopts" && k >= 1) {
                self.check_name(v, &a.raw);
            } else if prog == "unset" && hidden::plain_name(v).is_none() {
                // Removing a loader variable is harmless; only a subscript
                // that bash evaluates matters here.
                self.evaluation(COMPUTED_NAME, &a.raw);
            }
        }
        self.offer_weak(|| {
            (
                "builtin:shell-state".into(),
                format!("`{prog}` only changes the shell's own state"),
                Some(prog.to_string()),
            )
        });
    }

    /// Skips a wrapper's own options; the index of the wrapped program.
    fn unwrap(&mut self, base: &str, args: &[Word], cwd: &Cwd) -> Result<Unwrapped, String> {
        let refuse = |v: &str| {
            Err(format!(
                "`{base} {v}` cannot be unwrapped safely; run the inner command directly (or without that option)"
            ))
        };
        let mut k = 0;
        let done = |k: usize| {
            if k < args.len() {
                Ok(Unwrapped::Inner(k))
            } else {
                Ok(Unwrapped::Nothing)
            }
        };
        match base {
            "env" => {
                while k < args.len() {
                    let v = args[k].value.as_str();
                    match v {
                        "--" => {
                            k += 1;
                            break;
                        }
                        "-"
                        | "-i"
                        | "--ignore-environment"
                        | "-0"
                        | "--null"
                        | "-v"
                        | "--debug" => k += 1,
                        "-u" | "--unset" => k += 2,
                        _ if v.starts_with("--unset=") || (v.starts_with("-u") && v.len() > 2) => {
                            k += 1
                        }
                        _ if v.starts_with("--block-signal")
                            || v.starts_with("--default-signal")
                            || v.starts_with("--ignore-signal") =>
                        {
                            k += 1
                        }
                        _ if v.starts_with('-') => return refuse(v),
                        _ => break,
                    }
                }
                while k < args.len() && is_assignment(&args[k].value) {
                    self.assignment(&args[k], &args[k].value, cwd);
                    k += 1;
                }
                done(k)
            }
            "nice" => {
                while k < args.len() {
                    let v = args[k].value.as_str();
                    if v == "--" {
                        k += 1;
                        break;
                    }
                    if v == "-n" || v == "--adjustment" {
                        k += 2;
                    } else if v.starts_with("--adjustment=")
                        || (v.starts_with('-')
                            && v.len() > 1
                            && v[1..]
                                .trim_start_matches('n')
                                .trim_start_matches(['-', '+'])
                                .chars()
                                .all(|c| c.is_ascii_digit()))
                    {
                        k += 1;
                    } else if v.starts_with('-') {
                        return refuse(v);
                    } else {
                        break;
                    }
                }
                done(k)
            }
            "nohup" => {
                if args.first().is_some_and(|a| a.value == "--") {
                    k = 1;
                }
                if args.get(k).is_some_and(|a| a.value.starts_with('-')) {
                    return Ok(Unwrapped::Nothing);
                }
                done(k)
            }
            "timeout" => {
                while k < args.len() {
                    let v = args[k].value.as_str();
                    if v == "--" {
                        k += 1;
                        break;
                    }
                    match v {
                        "-k" | "-s" | "--kill-after" | "--signal" => k += 2,
                        "--preserve-status" | "--foreground" | "-v" | "--verbose" => k += 1,
                        _ if v.starts_with("--kill-after=")
                            || v.starts_with("--signal=")
                            || (v.starts_with("-k") && v.len() > 2)
                            || (v.starts_with("-s") && v.len() > 2) =>
                        {
                            k += 1
                        }
                        _ if v.starts_with('-') => return refuse(v),
                        _ => break,
                    }
                }
                // The duration.
                if k < args.len() {
                    k += 1;
                }
                done(k)
            }
            "stdbuf" => {
                while k < args.len() {
                    let v = args[k].value.as_str();
                    if v == "--" {
                        k += 1;
                        break;
                    }
                    match v {
                        "-i" | "-o" | "-e" => k += 2,
                        _ if v.starts_with("--input=")
                            || v.starts_with("--output=")
                            || v.starts_with("--error=") =>
                        {
                            k += 1
                        }
                        _ if v.len() > 2
                            && (v.starts_with("-i")
                                || v.starts_with("-o")
                                || v.starts_with("-e")) =>
                        {
                            k += 1
                        }
                        _ if v.starts_with('-') => return refuse(v),
                        _ => break,
                    }
                }
                done(k)
            }
            "time" => {
                while k < args.len() {
                    let v = args[k].value.as_str();
                    if v == "--" {
                        k += 1;
                        break;
                    }
                    match v {
                        "-p" | "-a" | "--append" | "-v" | "--verbose" | "-q" | "--quiet"
                        | "--portability" => k += 1,
                        "-f" | "--format" => k += 2,
                        "-o" | "--output" => {
                            if let Some(file) = args.get(k + 1) {
                                self.read_only = false;
                                self.check_word(file, Access::Write, cwd);
                            }
                            k += 2;
                        }
                        _ if v.starts_with("--format=") => k += 1,
                        _ if v.starts_with("--output=") => {
                            self.read_only = false;
                            self.check_path(v, &v["--output=".len()..], Access::Write, cwd);
                            k += 1;
                        }
                        _ if v.starts_with('-') => return refuse(v),
                        _ => break,
                    }
                }
                done(k)
            }
            "exec" => {
                while k < args.len() {
                    let v = args[k].value.as_str();
                    match v {
                        "--" => {
                            k += 1;
                            break;
                        }
                        "-c" | "-l" | "-cl" | "-lc" => k += 1,
                        "-a" => k += 2,
                        _ if v.starts_with('-') => return refuse(v),
                        _ => break,
                    }
                }
                done(k)
            }
            "command" => {
                while k < args.len() {
                    match args[k].value.as_str() {
                        "--" => {
                            k += 1;
                            break;
                        }
                        "-p" => k += 1,
                        "-v" | "-V" | "-pv" | "-pV" => return Ok(Unwrapped::Lookup),
                        v if v.starts_with('-') => return refuse(v),
                        _ => break,
                    }
                }
                done(k)
            }
            "builtin" => done(0),
            _ => Ok(Unwrapped::NotAWrapper),
        }
    }
}

enum Unwrapped {
    /// The wrapped program is at this argument index.
    Inner(usize),
    /// The wrapper runs nothing (`env` alone prints the environment).
    Nothing,
    /// `command -v`: a name lookup.
    Lookup,
    NotAWrapper,
}

/// Where the pattern or script of `grep`/`sed`/`awk` sits: the first
/// operand, unless it was given with `-e`/`-f` (then every operand is a
/// file).
fn pattern_position(args: &[Word]) -> Option<usize> {
    let given_by_option = args.iter().any(|a| {
        let v = a.value.as_str();
        if let Some(long) = v.strip_prefix("--") {
            ["regexp", "expression", "file"].iter().any(|o| {
                long.strip_prefix(o)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
            })
        } else if let Some(short) = v.strip_prefix('-') {
            // `-e PAT`, `-ePAT`, or a cluster ending in it (`-ne PAT`).
            short.starts_with(['e', 'f']) || short.ends_with(['e', 'f'])
        } else {
            false
        }
    });
    if given_by_option {
        return None;
    }
    let mut after_dashdash = false;
    for (k, a) in args.iter().enumerate() {
        let v = a.value.as_str();
        if !after_dashdash && v == "--" {
            after_dashdash = true;
            continue;
        }
        if after_dashdash || !v.starts_with('-') || v == "-" {
            return Some(k);
        }
    }
    None
}

fn base_is(prog: &str, name: &str) -> bool {
    basename(prog) == name
}
