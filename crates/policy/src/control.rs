//! Shell control flow whose every command is checked: subshells, groups,
//! `if`, `for`, `while`, `until`, `case`, `!` and functions. The lexer
//! lists their commands like any others; what is left here is what the
//! constructs themselves do: a loop header assigns a variable, a case
//! matches patterns, a function call runs a body already checked, and a
//! subshell's or a loop's `cd` makes the working directory uncertain.

use std::path::Path;

use agent_exec_lexer::{Role, Script, SimpleCommand, Word};

use crate::resolve::resolve_program;
use crate::rules::Writes;
use crate::state::{Access, Cwd, Walk, feature_verdict};
use crate::{FeatureAction, RiskLevel};

impl Walk<'_> {
    /// The control-flow constructs of `script`: refused unless the policy
    /// checks them (`[shell] control_flow = "check"`), and then every
    /// command inside is decided as usual.
    pub(crate) fn control_flow(&mut self, script: &Script, cwd: &mut Cwd) {
        if script.control.is_empty() {
            return;
        }
        let action = self.policy.shell.control_flow;
        if action != FeatureAction::Check {
            for (construct, _) in &script.control {
                self.builtin(
                    feature_verdict(action),
                    RiskLevel::Medium,
                    "builtin:unsupported",
                    format!(
                        "`{construct}` (grouping, control flow or a function) is not allowed by this policy; send the plain commands joined by `&&`, `;` or `|` instead"
                    ),
                    construct,
                );
            }
            return;
        }
        // Commands are walked in the order written, not the order run: a
        // subshell's `cd` does not outlast it and a loop's body repeats.
        // Every directory any `cd` names is then a possible start.
        cwd.uncertain = true;
    }

    /// Functions of `script` defined before `at` (a byte of the text its
    /// spans index) become callable by name.
    pub(crate) fn define_functions(&mut self, script: &Script, at: usize) {
        for (name, span) in &script.functions {
            if span.start <= at && !self.functions.contains(name) {
                self.functions.push(name.clone());
            }
        }
    }

    /// A loop header or case patterns: nothing runs but the substitutions
    /// in them; a loop variable is an assignment, and the words it takes
    /// are arguments like any other.
    pub(crate) fn header(&mut self, sc: &SimpleCommand, text: &str, cwd: &Cwd, depth: usize) {
        let outer = self.enter_command(text, (sc.span.start, sc.span.end), depth);
        for w in sc.assignments.iter().chain(&sc.words) {
            self.scan_word(w);
            self.substitutions(w, text, cwd, depth);
        }
        if self.redirects(sc, text, cwd, depth) {
            self.read_only = false;
        }
        if sc.role == Role::LoopHeader
            && let Some((var, rest)) = sc.words.split_first()
        {
            self.check_name(&var.value, &var.raw);
            let list = match rest.split_first() {
                Some((kw, list)) if kw.value == "in" => list,
                _ => rest,
            };
            for w in list {
                self.check_word(w, Access::Read, cwd);
            }
        }
        let token = sc.words.first().map(|w| w.raw.clone());
        self.offer_weak(|| {
            (
                "builtin:control-flow".into(),
                "a loop header or case patterns: only matched, never run".into(),
                token,
            )
        });
        self.leave_command(outer);
    }

    /// A call of a function the request defined: true when `prog` is one
    /// and no program of that name could run instead (it resolves to
    /// nothing on a PATH the child cannot write to). The body was checked
    /// where it was defined; the arguments become its positional
    /// parameters, which it may read or write, so they must name places
    /// the policy lets commands write.
    pub(crate) fn function_call(&mut self, prog: &str, args: &[Word], cwd: &Cwd) -> bool {
        if !self.functions.iter().any(|f| f == prog) {
            return false;
        }
        let root = self.ctx.root;
        let agent_writable =
            |p: &Path| p.starts_with(root) || self.engine.writable.iter().any(|w| p.starts_with(w));
        if self.engine.path_entries.iter().any(|e| agent_writable(e))
            || resolve_program(prog, &self.policy.env.path).is_some()
        {
            return false;
        }
        self.offer_weak(|| {
            (
                "builtin:function-call".into(),
                "calls a function this request defined; its body was checked".into(),
                Some(prog.to_string()),
            )
        });
        self.check_args(args, Writes::Operands, 0, cwd);
        self.read_only = false;
        true
    }
}
