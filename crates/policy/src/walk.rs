//! The walk: a lexed request in, an evaluation out.
//!
//! Every simple command is visited in order, with its assignments,
//! redirections and words; nested scripts (substitutions, `bash -c`) are
//! walked recursively; wrappers are peeled to the program they run; the
//! program is matched against the rules, and its path arguments checked
//! against every directory a `cd` may have led to.

use std::path::Path;

use agent_exec_lexer::{
    self, Features, Operator, ParseError, RedirectKind, Role, Script, SimpleCommand, Span, Word,
};

use crate::builtins::is_shell_only;
use crate::hidden;
use crate::resolve::{basename, normalize_lexically, resolve_path, resolve_program};
use crate::rules::Writes;
use crate::state::{Access, Cwd, Origin, Walk, feature_verdict, has_expansion, strictness};
use crate::tools;
use crate::verdict::Evaluation;
use crate::wrappers::{Peeled, is_wrapper, may_wrap};
use crate::{
    CommandSpec, Context, Decision, FeatureAction, InjectedFlag, Policy, RiskLevel, Verdict,
};

/// Shells whose `-c` script is lexed and walked like the request.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "lksh", "rbash",
];

impl Policy {
    /// Decides a request. Pure apart from resolving paths that exist (and,
    /// when the policy's PATH has non-system entries, program lookups).
    ///
    /// The same walk as [`evaluate`](Self::evaluate), keeping only the
    /// winning finding: `decide(c, x)` equals `evaluate(c, x)?.decision()`.
    pub fn decide(&self, cmd: &CommandSpec, ctx: &Context) -> Result<Decision, ParseError> {
        Ok(self.walk(cmd, ctx, false)?.into_decision())
    }

    /// Every rule match and engine check that fired for every part of the
    /// request, and which one decides (see [`Evaluation`]).
    pub fn evaluate(&self, cmd: &CommandSpec, ctx: &Context) -> Result<Evaluation, ParseError> {
        self.walk(cmd, ctx, true)
    }

    fn walk(
        &self,
        cmd: &CommandSpec,
        ctx: &Context,
        every: bool,
    ) -> Result<Evaluation, ParseError> {
        let mut walk = Walk::new(self, ctx, every);
        let needs_shell = self.walk_into(&mut walk, cmd)?;
        Ok(walk.finish(needs_shell))
    }

    /// The decision and the path arguments of a request, from one walk
    /// (see [`Policy::decide_with_paths`]).
    pub(crate) fn walk_paths(
        &self,
        cmd: &CommandSpec,
        ctx: &Context,
    ) -> Result<(Decision, Vec<crate::PathArgument>), ParseError> {
        let mut walk = Walk::new(self, ctx, false);
        walk.paths = Some(Vec::new());
        let needs_shell = self.walk_into(&mut walk, cmd)?;
        let paths = walk.paths.take().unwrap_or_default();
        Ok((walk.finish(needs_shell).into_decision(), paths))
    }

    /// Walks `cmd`; whether it needs a shell.
    fn walk_into(&self, walk: &mut Walk<'_>, cmd: &CommandSpec) -> Result<bool, ParseError> {
        let mut cwd = Cwd::default();
        let needs_shell = match cmd {
            CommandSpec::Shell(text) => {
                let script = agent_exec_lexer::lex(text)?;
                walk.raw(text);
                walk.script(&script, text, &mut cwd, 0);
                script.needs_shell || walk.shell_only
            }
            CommandSpec::Argv(argv) => {
                if argv.is_empty() || argv[0].is_empty() {
                    return Err(ParseError::Empty);
                }
                let text = argv.join(" ");
                walk.raw(&text);
                walk.origin = Origin::Argv;
                let sc = SimpleCommand {
                    assignments: Vec::new(),
                    words: argv.iter().map(|a| literal_word(a)).collect(),
                    redirects: Vec::new(),
                    joined_by: None,
                    span: Span {
                        start: 0,
                        end: text.len(),
                    },
                    role: Role::Command,
                };
                walk.simple(&sc, &text, &mut cwd, 0, true);
                false
            }
        };
        Ok(needs_shell)
    }
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

impl Walk<'_> {
    /// Raw `pattern` rules, over the request as sent.
    fn raw(&mut self, text: &str) {
        let engine = self.engine;
        for (rule, token) in engine.rules.raw_hits(text) {
            self.offer_rule(rule, token.as_deref());
        }
    }

    /// `text` is what the spans of `script` index.
    pub(crate) fn script(&mut self, script: &Script, text: &str, cwd: &mut Cwd, depth: usize) {
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
        self.control_flow(script, cwd);
        for (j, command) in script.commands.iter().enumerate() {
            if matches!(command.joined_by, Some(op) if op != Operator::And) {
                cwd.uncertain = true;
            }
            self.define_functions(script, command.span.start);
            if command.role != Role::Command {
                self.header(command, text, cwd, depth);
                continue;
            }
            let next = script.commands.get(j + 1).and_then(|c| c.joined_by);
            // A `cd` in a pipeline or in the background runs in a subshell.
            let persistent = command.joined_by != Some(Operator::Pipe)
                && !matches!(next, Some(Operator::Pipe | Operator::Background));
            self.simple(command, text, cwd, depth, persistent);
        }
    }

    fn simple(
        &mut self,
        sc: &SimpleCommand,
        text: &str,
        cwd: &mut Cwd,
        depth: usize,
        persistent: bool,
    ) {
        let outer = self.enter_command(text, (sc.span.start, sc.span.end), depth);
        self.simple_parts(sc, text, cwd, depth, persistent);
        self.leave_command(outer);
    }

    fn simple_parts(
        &mut self,
        sc: &SimpleCommand,
        text: &str,
        cwd: &mut Cwd,
        depth: usize,
        persistent: bool,
    ) {
        for a in &sc.assignments {
            self.scan_word(a);
            self.substitutions(a, text, cwd, depth);
            self.assignment(a, &a.value, cwd);
        }
        if self.redirects(sc, text, cwd, depth) {
            self.read_only = false;
        }
        for w in &sc.words {
            self.scan_word(w);
            self.substitutions(w, text, cwd, depth);
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

    /// A command's redirections; true when one writes a file.
    pub(crate) fn redirects(
        &mut self,
        sc: &SimpleCommand,
        text: &str,
        cwd: &Cwd,
        depth: usize,
    ) -> bool {
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
            self.substitutions(&r.target, text, cwd, depth);
            match r.kind {
                RedirectKind::Input => {
                    self.collect_redirect(&r.target, false, cwd);
                    self.check_word(&r.target, Access::Read, cwd)
                }
                RedirectKind::Output
                | RedirectKind::Append
                | RedirectKind::ReadWrite
                | RedirectKind::OutputBoth
                | RedirectKind::AppendBoth => {
                    if r.target.value != "/dev/null" || has_expansion(&r.target.features) {
                        mutating = true;
                        self.collect_redirect(&r.target, true, cwd);
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
        mutating
    }

    /// Commands inside `$(...)`, backticks and `<(...)`. Their spans index
    /// the same text as the word's.
    pub(crate) fn substitutions(&mut self, w: &Word, text: &str, cwd: &Cwd, depth: usize) {
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
            self.script(inner, text, &mut inner_cwd, depth + 1);
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

    /// The program word and what follows it, wrappers peeled.
    pub(crate) fn command(
        &mut self,
        words: &[Word],
        cwd: &mut Cwd,
        depth: usize,
        persistent: bool,
    ) {
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
            if self.refused_wrapper(base, prog) {
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
            let trusted = self.trusted_name(prog, cwd);
            // Where a safe-mode flag would go: just past the program word.
            let place = match self.origin {
                Origin::Text(start) => Some(start + w.span.end),
                Origin::Argv => Some(i),
                Origin::Unmapped => None,
            };
            if bare && self.shell_builtin(prog, args, cwd, persistent) {
                return;
            }
            if bare && trusted.is_some() && self.function_call(prog, args, cwd) {
                return;
            }
            if may_wrap(base, bare, trusted.is_some()) {
                // Deny or approval rules about the wrapper itself still
                // apply (a policy may refuse `xargs` as a whole).
                if is_wrapper(base)
                    && let Some(rule) = self.engine.rules.shell_refusal(prog, args, None)
                {
                    self.offer_rule(rule, Some(prog));
                    self.read_only = false;
                    if rule.action == Verdict::Deny {
                        return;
                    }
                }
                match self.peel(base, prog, args, cwd) {
                    Peeled::Inner(k) => {
                        i += 1 + k;
                        continue;
                    }
                    Peeled::Decided => return,
                    Peeled::Program => {}
                }
            }
            if trusted.is_some()
                && SHELLS.contains(&base)
                && self.nested_shell(prog, args, cwd, depth)
            {
                return;
            }
            if self.program(prog, trusted, args, cwd, place) == Some(Verdict::Allow)
                && base == "find"
            {
                self.find_actions(args, cwd, depth);
            }
            return;
        }
    }

    /// The name under which `prog` may match allow rules: a bare name that
    /// resolves to a system binary (or not at all), or a path that is
    /// exactly where the bare name resolves.
    fn trusted_name<'w>(&self, prog: &'w str, cwd: &Cwd) -> Option<&'w str> {
        let path = &self.policy.env.path;
        // One of the project's programs, wherever a `cd` may have led.
        let project = |base: &Path| {
            crate::project::project_program(&self.policy.env, self.ctx.root, base, prog)
        };
        let mut bases = self.bases(cwd);
        if let Some(name) = bases.next().and_then(project)
            && bases.all(|b| project(b).is_some())
        {
            return Some(name);
        }
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
            return match resolve_program(prog, path) {
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
        let found = resolve_program(base, path)?;
        (normalize_lexically(self.ctx.cwd, Path::new(prog)) == found).then_some(base)
    }

    /// A program (wrappers peeled): the rule that decides it, then its
    /// arguments. `place` is where a safe-mode flag would be inserted.
    fn program(
        &mut self,
        prog: &str,
        trusted: Option<&str>,
        args: &[Word],
        cwd: &Cwd,
        place: Option<usize>,
    ) -> Option<Verdict> {
        let engine = self.engine;
        let mut passed_over = self.keeps_every().then(Vec::new);
        let inside_root = prog.contains('/') && self.runs_from_root(prog, cwd);
        let selected = engine
            .rules
            .select(prog, trusted, args, passed_over.as_mut(), inside_root);
        let (writes, consumed, action) = match selected {
            Some((rule, m)) => {
                let token = m.token.unwrap_or(prog);
                self.offer_rule(rule, Some(token));
                for &(other, token) in passed_over.iter().flatten() {
                    self.offer_superseded(other, token.unwrap_or(prog));
                }
                if rule.action != Verdict::Allow || !rule.read_only {
                    self.read_only = false;
                }
                if rule.action == Verdict::Deny {
                    return Some(rule.action);
                }
                if rule.action == Verdict::Allow
                    && rule.read_only
                    && let Some(name) = trusted
                {
                    self.read_only_tool(name, args, place);
                }
                let mut consumed = m.consumed;
                if rule.read_only && basename(prog) == "find" {
                    consumed |= crate::control::find_from_fs_root(args);
                }
                if rule.pattern_operand
                    && let Some(k) = pattern_position(args)
                    && k < 64
                {
                    consumed |= 1 << k;
                }
                (rule.writes, consumed, Some(rule.action))
            }
            None => {
                let default = self.policy.default;
                // With rules for the program, what is missing is the form:
                // name it (`git frobnicate`), not the program.
                let covered = trusted.is_some() && engine.rules.has_program(basename(prog));
                self.offer_default(|| {
                    let sub = args
                        .iter()
                        .find(|a| !a.value.starts_with('-'))
                        .filter(|_| covered);
                    if let Some(sub) = sub {
                        let reason = format!(
                            "no rule covers `{prog} {}`; this policy's rules for `{prog}` cover other forms, and its default for the rest is {default}",
                            sub.raw
                        );
                        return (reason, Some(prog.to_string()));
                    }
                    let why = if trusted.is_none() && !prog.contains('/') {
                        " as it resolves to a program outside the system directories"
                    } else if trusted.is_none() {
                        " run by path (rules match programs by name)"
                    } else {
                        ""
                    };
                    let reason = format!(
                        "no rule covers `{prog}`{why}; this policy's default for such commands is {default}"
                    );
                    (reason, Some(prog.to_string()))
                });
                self.read_only = false;
                (Writes::None, 0, None)
            }
        };
        self.argument_names(prog, args);
        self.collect_args(prog, args, writes, consumed, cwd);
        self.check_args(args, writes, consumed, cwd);
        action
    }

    /// A program an allow rule classes read-only: what its options,
    /// operands and scripts may do (see `tools`), and its safe mode.
    fn read_only_tool(&mut self, name: &str, args: &[Word], place: Option<usize>) {
        let path = &self.policy.env.path;
        let is_gawk = || {
            resolve_program(name, path)
                .and_then(|p| std::fs::canonicalize(p).ok())
                .and_then(|p| {
                    p.file_name()
                        .map(|n| n.to_string_lossy().starts_with("gawk"))
                })
                .unwrap_or(false)
        };
        match tools::check(name, args, is_gawk) {
            Ok(None) => {}
            Ok(Some(flag)) => match place {
                Some(at) => self.injected.push(InjectedFlag {
                    program: name.to_string(),
                    flag: flag.to_string(),
                    at,
                }),
                None => {
                    self.builtin(
                        Verdict::Deny,
                        RiskLevel::High,
                        "builtin:read-only-tool",
                        format!(
                            "`{name}` runs read-only only in its safe mode (`{name} {flag}`), which cannot be added inside this nested script; run `{name}` directly, not in `sh -c` with a quoted or escaped script"
                        ),
                        name,
                    );
                    self.read_only = false;
                }
            },
            Err(refused) => {
                self.builtin(
                    Verdict::Deny,
                    RiskLevel::High,
                    "builtin:read-only-tool",
                    refused.reason,
                    &refused.token,
                );
                self.read_only = false;
            }
        }
    }

    fn nested_text(&mut self, text: &str, shown: &str, cwd: &Cwd, depth: usize) {
        if depth + 1 > self.policy.shell.max_nesting {
            self.too_deep(shown);
            return;
        }
        match agent_exec_lexer::lex(text) {
            Ok(script) => {
                let mut inner = cwd.clone();
                self.script(&script, text, &mut inner, depth + 1);
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
        let Some(k) = script_position(args) else {
            return false;
        };
        // Deny or approval rules about the shell itself still apply.
        let engine = self.engine;
        let mut passed_over = self.keeps_every().then(Vec::new);
        if let Some(rule) = engine.rules.shell_refusal(prog, args, passed_over.as_mut()) {
            self.offer_rule(rule, Some(prog));
            for &(other, _) in passed_over.iter().flatten() {
                self.offer_superseded(other, prog);
            }
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
        let inner = nested_origin(self.origin, script);
        let outer = std::mem::replace(&mut self.origin, inner);
        self.nested_text(&script.value, prog, cwd, depth);
        self.origin = outer;
        // `sh -c '... "$1"' _ PATH`: the positional parameters become the
        // script's arguments, which it may read or write, so they must
        // name places inside the root.
        if let Some(positional) = args.get(k + 1..) {
            self.check_args(positional, Writes::Operands, 0, cwd);
        }
        true
    }
}

/// Where a nested shell's script is in the request: it is when the word
/// is written bare or in one pair of quotes, with nothing escaped.
fn nested_origin(outer: Origin, script: &Word) -> Origin {
    let Origin::Text(start) = outer else {
        return Origin::Unmapped;
    };
    let (raw, value) = (script.raw.as_str(), script.value.as_str());
    let quoted = raw.len() == value.len() + 2
        && ((raw.starts_with('\'') && raw.ends_with('\''))
            || (raw.starts_with('"') && raw.ends_with('"')))
        && &raw[1..raw.len() - 1] == value;
    if raw == value {
        Origin::Text(start + script.span.start)
    } else if quoted {
        Origin::Text(start + script.span.start + 1)
    } else {
        Origin::Unmapped
    }
}

/// For a shell's arguments: where its `-c` script is (possibly past the
/// end, when it is missing), or `None` without `-c`.
fn script_position(args: &[Word]) -> Option<usize> {
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
    has_c.then_some(k)
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
