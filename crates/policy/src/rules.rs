//! Rules: the compiled `[[rule]]`s, how one matches a command's arguments,
//! and which of a program's rules decides it.

use std::collections::HashMap;
use std::sync::OnceLock;

use agent_exec_lexer::Word;
use regex_automata::meta::Regex;
use serde::{Deserialize, Serialize};

use crate::resolve::basename;
use crate::{RiskLevel, Verdict};

/// How an allowed program uses its operands (decides which paths must be
/// inside the root rather than merely readable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

    /// The value glued to `arg`, which this option matches: `--opt=VAL`,
    /// `-oVAL`, `-single=VAL`.
    fn value<'a>(&self, arg: &'a str) -> Option<&'a str> {
        match self {
            OptSpec::Long(_) | OptSpec::Single(_) => arg.split_once('=').map(|(_, v)| v),
            OptSpec::Short(c) => arg
                .strip_prefix('-')
                .and_then(|rest| rest.strip_prefix(*c))
                .filter(|v| !v.is_empty()),
            OptSpec::SinglePrefix(_) => None,
        }
    }

    /// Like `matches`, but a short option only on its own or with a glued
    /// value (`-i`, `-i.bak`), never inside a cluster: whether a letter in
    /// `-e1e id` is an option depends on which letters take values, which
    /// is not known here, and an exemption must not be granted by a guess.
    fn matches_alone(&self, arg: &str) -> bool {
        match self {
            OptSpec::Short(c) => arg
                .strip_prefix('-')
                .is_some_and(|rest| rest.starts_with(*c)),
            _ => self.matches(arg),
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

/// A compiled `[[rule]]` (serialized only for the compiled-policy cache).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Rule {
    pub id: String,
    pub action: Verdict,
    pub risk: RiskLevel,
    pub reason: String,
    /// An allowed form to offer when this rule refuses.
    pub suggestion: Option<String>,
    pub read_only: bool,
    /// A command this rule allows changes state beyond the project's
    /// ordinary work (history, tracked files): where keys are required
    /// (the daemon) it must carry an idempotency key.
    pub needs_key: bool,
    pub writes: Writes,
    pub programs: Vec<String>,
    pub subcommands: Vec<Vec<String>>,
    pub prefix: Vec<String>,
    pub option_values: Vec<String>,
    pub options: Vec<OptSpec>,
    /// An occurrence of one of `options` whose value (glued on, or the
    /// next word) matches this does not count (`git -c user.name=x`).
    pub safe_values: Option<LazyRegex>,
    /// The rule does not match when any of these options is present.
    pub unless_options: Vec<OptSpec>,
    /// Matches any program run by a path that resolves inside the root
    /// (the project's own scripts and binaries).
    pub under_root: bool,
    pub global_options_only: bool,
    /// The first operand is a pattern or script, not a path (`grep`,
    /// `sed`, `awk`), unless `-e`/`-f` supplied it.
    pub pattern_operand: bool,
    pub args_regex: Option<LazyRegex>,
    pub pattern: Option<LazyRegex>,
    pub line: usize,
    /// An allow rule a human added by approving a command (see
    /// `amend.rs`): it outranks `require_approval` rules for what it
    /// matches, never `deny`.
    pub amendment: bool,
}

/// A policy regex, syntax-checked at load and compiled on first use: a CLI
/// run decides one command, which needs few of the policy's regexes, and
/// compiling all of them was most of its start-up. A full load
/// (`Policy::load`) compiles every one up front.
///
/// The compiled form is shared by the clones (an `Arc`), so a thread can
/// compile it ahead of the decision that needs it (see
/// [`Policy::precompile_in_background`](crate::Policy::precompile_in_background)).
#[derive(Debug, Clone)]
pub(crate) struct LazyRegex {
    source: String,
    compiled: std::sync::Arc<OnceLock<Option<Regex>>>,
}

/// Cached as its source, compiled again on first use like any other.
impl Serialize for LazyRegex {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for LazyRegex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LazyRegex, D::Error> {
        String::deserialize(d).map(LazyRegex::new)
    }
}

impl LazyRegex {
    pub(crate) fn new(source: String) -> LazyRegex {
        LazyRegex {
            source,
            compiled: std::sync::Arc::new(OnceLock::new()),
        }
    }

    /// The load-time check: the syntax `policy_regex` accepts, without
    /// building the automata.
    pub(crate) fn checked(pattern: &str) -> Result<LazyRegex, String> {
        regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(pattern)
            .map(|_| LazyRegex::new(pattern.to_string()))
            .map_err(|e| e.to_string())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.source
    }

    /// Compiles now (a full load does this for every regex).
    pub(crate) fn compile(&self) -> Result<(), Box<regex_automata::meta::BuildError>> {
        let re = policy_regex(&self.source)?;
        let _ = self.compiled.set(Some(re));
        Ok(())
    }

    /// A handle that compiles this regex when called, from any thread; the
    /// result is this regex's (and its clones').
    pub(crate) fn compiler(&self) -> impl FnOnce() + Send + 'static {
        let source = self.source.clone();
        let cell = std::sync::Arc::clone(&self.compiled);
        move || {
            cell.get_or_init(|| policy_regex(&source).ok());
        }
    }

    /// Whether it is compiled already (without compiling it).
    #[cfg(test)]
    pub(crate) fn is_compiled(&self) -> bool {
        self.compiled.get().is_some()
    }

    /// `None` only when compiling failed (a size limit; the syntax was
    /// checked at load): callers then fail closed.
    pub(crate) fn get(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| policy_regex(&self.source).ok())
            .as_ref()
    }
}

/// Every regex of a policy matches bytes with ASCII classes: `\s`, `\w`,
/// `\b` and `(?i)` mean what the shell means (its blanks and metacharacters
/// are ASCII), and compiling skips the Unicode tables, which were most of
/// the CLI's start-up.
fn policy_regex(pattern: &str) -> Result<Regex, Box<regex_automata::meta::BuildError>> {
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

/// What matched, for choosing among rules and reporting.
pub(crate) struct Match<'w> {
    specificity: usize,
    /// Argument positions the rule consumed (subcommand words): they are
    /// names, not paths, so they are not looked up on disk.
    pub(crate) consumed: u64,
    /// The argument that made the rule match, if one did.
    pub(crate) token: Option<&'w str>,
}

impl Rule {
    pub(crate) fn has_conditions(&self) -> bool {
        !self.options.is_empty() || self.args_regex.is_some() || !self.unless_options.is_empty()
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

    pub(crate) fn matches<'w>(&self, args: &'w [Word]) -> Option<Match<'w>> {
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
            let hit = scope.iter().enumerate().find_map(|(k, a)| {
                let o = self.options.iter().find(|o| o.matches(&a.value))?;
                let safe = self.safe_values.as_ref().is_some_and(|re| {
                    let value = o
                        .value(&a.value)
                        .or_else(|| args.get(k + 1).map(|n| n.value.as_str()));
                    // A regex that cannot be compiled marks nothing safe.
                    value.is_some_and(|v| re.get().is_some_and(|re| re.is_match(v.as_bytes())))
                });
                (!safe).then_some(a)
            })?;
            m.specificity += 1;
            m.token = Some(hit.value.as_str());
        }
        if !self.unless_options.is_empty()
            && args.iter().any(|a| {
                self.unless_options
                    .iter()
                    .any(|o| o.matches_alone(&a.value))
            })
        {
            return None;
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

/// How a rule weighs against the others that match: the strictest wins,
/// except that a human's amendment (an allow rule added by approving a
/// command) outranks the `require_approval` it answers. A deny still wins.
fn rank(rule: &Rule) -> u8 {
    match rule.action {
        Verdict::Allow if rule.amendment => 2,
        Verdict::Allow => 0,
        Verdict::RequireApproval => 1,
        Verdict::Deny => 3,
    }
}

/// The rules, indexed for the walk.
#[derive(Debug, Clone)]
pub(crate) struct RuleSet {
    rules: Vec<Rule>,
    by_program: HashMap<String, Vec<usize>>,
    /// Rules with a raw `pattern`, tried one by one: a combined set would
    /// compile every pattern a second time at each start for a per-decision
    /// gain the benchmarks cannot see.
    raw: Vec<usize>,
    /// Rules for programs run by a path inside the root.
    under_root: Vec<usize>,
}

impl RuleSet {
    pub(crate) fn new(rules: Vec<Rule>) -> RuleSet {
        let mut by_program: HashMap<String, Vec<usize>> = HashMap::new();
        let mut raw = Vec::new();
        let mut under_root = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            for p in &rule.programs {
                by_program.entry(p.clone()).or_default().push(i);
            }
            if rule.pattern.is_some() {
                raw.push(i);
            }
            if rule.under_root {
                under_root.push(i);
            }
        }
        RuleSet {
            rules,
            by_program,
            raw,
            under_root,
        }
    }

    /// Whether any rule names `program`.
    pub(crate) fn has_program(&self, program: &str) -> bool {
        self.by_program.contains_key(program)
    }

    /// In the policy's order.
    pub(crate) fn all(&self) -> &[Rule] {
        &self.rules
    }

    /// The regexes every decision searches (the raw `pattern` rules'), to
    /// compile ahead of one.
    pub(crate) fn raw_patterns(&self) -> impl Iterator<Item = &LazyRegex> {
        self.raw
            .iter()
            .filter_map(|&i| self.rules[i].pattern.as_ref())
    }

    /// Raw `pattern` rules that match the request text, with the text that
    /// matched. Pattern rules only refuse, so one whose regex cannot be
    /// compiled matches everything (with no token).
    pub(crate) fn raw_hits<'a>(
        &'a self,
        text: &'a str,
    ) -> impl Iterator<Item = (&'a Rule, Option<String>)> + 'a {
        self.raw.iter().filter_map(move |&i| {
            let rule = &self.rules[i];
            let lazy = rule.pattern.as_ref()?;
            let token = match lazy.get() {
                Some(re) => {
                    let hit = re.find(text.as_bytes())?;
                    Some(String::from_utf8_lossy(&text.as_bytes()[hit.range()]).into_owned())
                }
                None => None,
            };
            Some((rule, token))
        })
    }

    /// The rule that decides `prog args`: the strictest of those that
    /// match, the most specific among equals. `trusted` is the name under
    /// which `prog` may match allow rules (see the walk); without one only
    /// refusing rules apply. With `passed_over`, every other matching rule
    /// is listed there too, with the argument that made it match.
    pub(crate) fn select<'r, 'w>(
        &'r self,
        prog: &str,
        trusted: Option<&str>,
        args: &'w [Word],
        mut passed_over: Option<&mut Vec<(&'r Rule, Option<&'w str>)>>,
        inside_root: bool,
    ) -> Option<(&'r Rule, Match<'w>)> {
        let mut best: Option<(&Rule, Match)> = None;
        let mut consider = |list: Option<&Vec<usize>>, allow_ok: bool| {
            for &ri in list.map(Vec::as_slice).unwrap_or(&[]) {
                let rule = &self.rules[ri];
                if !allow_ok && rule.action == Verdict::Allow {
                    continue;
                }
                let Some(m) = rule.matches(args) else {
                    continue;
                };
                if let Some(list) = passed_over.as_deref_mut() {
                    // A rule listed under both a path and a name is seen twice.
                    if !list.iter().any(|(r, _)| std::ptr::eq(*r, rule)) {
                        list.push((rule, m.token));
                    }
                }
                let better = match &best {
                    None => true,
                    Some((b, bm)) => (rank(rule), m.specificity) > (rank(b), bm.specificity),
                };
                if better {
                    best = Some((rule, m));
                }
            }
        };
        if prog.contains('/') {
            consider(self.by_program.get(prog), true);
        }
        if inside_root {
            consider(Some(&self.under_root), true);
        }
        match trusted {
            Some(name) => consider(self.by_program.get(name), true),
            None => consider(self.by_program.get(basename(prog)), false),
        }
        let (rule, m) = best?;
        if let Some(list) = passed_over {
            list.retain(|(r, _)| !std::ptr::eq(*r, rule));
        }
        Some((rule, m))
    }

    /// For a shell run with a script (`bash -c`): the strictest refusing
    /// rule about the shell itself, if any (the script is decided on its
    /// own, so allow rules do not apply). With `passed_over`, the other
    /// refusing rules that matched.
    pub(crate) fn shell_refusal<'r>(
        &'r self,
        prog: &str,
        args: &[Word],
        mut passed_over: Option<&mut Vec<(&'r Rule, Option<&str>)>>,
    ) -> Option<&'r Rule> {
        let mut strictest: Option<&Rule> = None;
        for &ri in self.by_program.get(basename(prog)).into_iter().flatten() {
            let r = &self.rules[ri];
            if r.action == Verdict::Allow || r.matches(args).is_none() {
                continue;
            }
            if let Some(list) = passed_over.as_deref_mut() {
                list.push((r, None));
            }
            // `>=`: the last of equals wins.
            if strictest.is_none_or(|s| (r.action, r.risk) >= (s.action, s.risk)) {
                strictest = Some(r);
            }
        }
        let chosen = strictest?;
        if let Some(list) = passed_over {
            list.retain(|(r, _)| !std::ptr::eq(*r, chosen));
        }
        Some(chosen)
    }
}
