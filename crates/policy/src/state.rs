//! The state of one walk over a request: the policy and the context it is
//! judged in, what was found so far, which command is being looked at, and
//! where the shell's working directory may be.

use std::path::{Path, PathBuf};

use agent_exec_lexer::Features;

use crate::engine::Engine;
use crate::rules::Rule;
use crate::verdict::{CommandRef, Evaluation, FindingKind, Findings};
use crate::{Context, FeatureAction, InjectedFlag, Policy, RiskLevel, Verdict};

/// How an argument is used, which decides where it may point.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// Written or removed; the root itself is refused (`rm -rf .`).
    WriteNotRoot,
}

/// The possible working directories at a point in a script. While every
/// command so far was joined by `&&`, each `cd` certainly ran, so there is
/// one exact directory; after `;`, `||`, `|` or `&` any directory a `cd`
/// named (or the start) is possible, and paths must pass against each.
#[derive(Clone, Default)]
pub(crate) struct Cwd {
    pub(crate) exact: Option<PathBuf>,
    pub(crate) uncertain: bool,
    pub(crate) seen: Vec<PathBuf>,
}

/// Where the text being walked sits in the request, so a flag can be
/// inserted after a program word (see [`InjectedFlag`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Origin {
    /// A shell string; the walked text starts at this byte of it.
    Text(usize),
    /// The words of an argv request.
    Argv,
    /// Text that is not a verbatim part of the request (a nested shell's
    /// script with quoting or escapes).
    Unmapped,
}

/// One walk over one request. The checks of `paths`, `builtins`,
/// `wrappers` and `walk` are methods on it; they report through `builtin`
/// and the `offer_*` methods, never to `findings` directly, so every
/// finding names the command it is about.
pub(crate) struct Walk<'p> {
    pub(crate) policy: &'p Policy,
    pub(crate) engine: &'p Engine,
    pub(crate) ctx: &'p Context<'p>,
    findings: Findings,
    /// Every part so far is classed read-only.
    pub(crate) read_only: bool,
    /// A name that exists only inside a shell was used.
    pub(crate) shell_only: bool,
    /// A rule that matched a part asks for an idempotency key.
    pub(crate) needs_key: bool,
    /// Where the text being walked is in the request.
    pub(crate) origin: Origin,
    /// Safe-mode flags for programs run read-only.
    pub(crate) injected: Vec<InjectedFlag>,
    /// The simple command being walked; tracked only for an evaluation.
    command: Option<CommandRef>,
    commands_seen: usize,
    /// Path arguments, collected only for `Policy::path_arguments`.
    pub(crate) paths: Option<Vec<crate::PathArgument>>,
    /// Functions defined so far in the request, by name.
    pub(crate) functions: Vec<String>,
    /// Paths resolved so far, by base and path: a program path is resolved
    /// both as an operand and to see whether it runs from the root, and each
    /// resolution is a `lstat` per component.
    resolved: std::cell::RefCell<Vec<(PathBuf, PathBuf, Option<PathBuf>)>>,
}

/// Expansions whose result is only known at run time (globs and braces
/// are listed separately: their alternatives can be checked).
pub(crate) fn has_expansion(f: &Features) -> bool {
    f.parameter_expansion || f.command_substitution || f.arithmetic || f.process_substitution
}

pub(crate) fn strictness(a: FeatureAction) -> u8 {
    match a {
        FeatureAction::Check => 0,
        FeatureAction::RequireApproval => 1,
        FeatureAction::Deny => 2,
    }
}

/// The verdict of a feature the policy does not let the engine check.
pub(crate) fn feature_verdict(a: FeatureAction) -> Verdict {
    match a {
        FeatureAction::Deny => Verdict::Deny,
        _ => Verdict::RequireApproval,
    }
}

impl<'p> Walk<'p> {
    /// `every`: keep every finding (an evaluation), not only the winner.
    pub(crate) fn new(policy: &'p Policy, ctx: &'p Context<'p>, every: bool) -> Walk<'p> {
        Walk {
            policy,
            engine: &policy.engine,
            ctx,
            findings: Findings::new(every),
            read_only: true,
            shell_only: false,
            needs_key: false,
            origin: Origin::Text(0),
            injected: Vec::new(),
            command: None,
            commands_seen: 0,
            paths: None,
            functions: Vec::new(),
            resolved: std::cell::RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn finish(self, needs_shell: bool) -> Evaluation {
        let policy = self.policy;
        let mut e =
            self.findings
                .finish(self.read_only, needs_shell, self.needs_key, self.injected);
        e.suggest(|f| policy.suggestion_for(f));
        e
    }

    /// Makes `span` of `text` the command findings are about, until
    /// [`leave_command`](Self::leave_command) restores the returned one.
    pub(crate) fn enter_command(
        &mut self,
        text: &str,
        span: (usize, usize),
        depth: usize,
    ) -> Option<CommandRef> {
        if !self.findings.keeps_every() {
            return None;
        }
        let index = self.commands_seen;
        self.commands_seen += 1;
        let entered = CommandRef {
            index,
            text: text.get(span.0..span.1).unwrap_or_default().to_string(),
            depth,
        };
        self.command.replace(entered)
    }

    pub(crate) fn leave_command(&mut self, outer: Option<CommandRef>) {
        if self.findings.keeps_every() {
            self.command = outer;
        }
    }

    /// A rule decided a part of the request.
    pub(crate) fn offer_rule(&mut self, rule: &Rule, token: Option<&str>) {
        // A refused part never runs: only what may run asks for a key.
        if rule.needs_key && rule.action != Verdict::Deny {
            self.needs_key = true;
        }
        self.findings.offer(
            rule.action,
            rule.risk,
            FindingKind::Rule,
            self.command.as_ref(),
            || {
                (
                    rule.id.clone(),
                    rule.reason.clone(),
                    token.map(str::to_string),
                )
            },
        );
    }

    /// A rule that matched and lost to a stricter or more specific one
    /// (kept only by an evaluation).
    pub(crate) fn offer_superseded(&mut self, rule: &Rule, token: &str) {
        self.findings
            .superseded(rule.action, rule.risk, self.command.as_ref(), || {
                (
                    rule.id.clone(),
                    rule.reason.clone(),
                    Some(token.to_string()),
                )
            });
    }

    /// Whether passed-over rules are worth collecting.
    pub(crate) fn keeps_every(&self) -> bool {
        self.findings.keeps_every()
    }

    /// No rule covered a program: the policy's default.
    pub(crate) fn offer_default(&mut self, make: impl FnOnce() -> (String, Option<String>)) {
        let policy = self.policy;
        self.findings.offer(
            policy.default,
            policy.default_risk,
            FindingKind::Default,
            self.command.as_ref(),
            || {
                let (reason, token) = make();
                ("default".into(), reason, token)
            },
        );
    }

    /// An engine check refused (or asked approval for) a part.
    pub(crate) fn builtin(
        &mut self,
        verdict: Verdict,
        risk: RiskLevel,
        rule: &'static str,
        reason: String,
        token: &str,
    ) {
        // An engine allow is weak (see `offer_weak`); one made here would
        // wrongly count as a rule's.
        debug_assert_ne!(
            verdict,
            Verdict::Allow,
            "engine allows go through offer_weak"
        );
        self.findings.offer(
            verdict,
            risk,
            FindingKind::Builtin,
            self.command.as_ref(),
            || (rule.to_string(), reason, Some(token.to_string())),
        );
    }

    /// An engine-level allow (`cd`, assignments, `command -v`): it decides
    /// only when no rule decided anything, as the rule says more.
    pub(crate) fn offer_weak(&mut self, make: impl FnOnce() -> (String, String, Option<String>)) {
        self.findings.offer(
            Verdict::Allow,
            RiskLevel::Low,
            FindingKind::Builtin,
            self.command.as_ref(),
            make,
        );
    }

    /// [`resolve_path`](crate::resolve::resolve_path), asked of the
    /// filesystem once per decision for each base and path.
    pub(crate) fn resolve(&self, base: &Path, p: &Path) -> Option<PathBuf> {
        let mut memo = self.resolved.borrow_mut();
        if let Some((_, _, r)) = memo.iter().find(|(b, q, _)| b == base && q == p) {
            return r.clone();
        }
        let r = crate::resolve::resolve_path(base, p);
        // A long script's operands are mostly distinct: the list stays
        // short rather than growing with every word.
        if memo.len() < 16 {
            memo.push((base.to_path_buf(), p.to_path_buf(), r.clone()));
        }
        r
    }

    /// Every directory a relative path may be resolved against.
    pub(crate) fn bases<'c>(&'c self, cwd: &'c Cwd) -> impl Iterator<Item = &'c Path> + 'c {
        let start = self.ctx.cwd;
        let (first, rest): (&Path, &[PathBuf]) = if cwd.uncertain {
            (start, &cwd.seen)
        } else {
            (cwd.exact.as_deref().unwrap_or(start), &[])
        };
        std::iter::once(first).chain(rest.iter().map(PathBuf::as_path))
    }
}
