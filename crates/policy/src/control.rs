//! Shell control flow whose every command is checked: subshells, groups,
//! `if`, `for`, `while`, `until`, `case`, `!` and functions. The lexer
//! lists their commands like any others; what is left here is what the
//! constructs themselves do: a loop header assigns a variable, a case
//! matches patterns, a function call runs a body already checked, and a
//! subshell's or a loop's `cd` makes the working directory uncertain.

use std::path::Path;

use agent_exec_lexer::{Role, Script, SimpleCommand, Word};

use crate::builtins::is_shell_only;
use crate::resolve::resolve_program;
use crate::rules::Writes;
use crate::state::{Access, Cwd, Walk, feature_verdict};
use crate::wrappers::is_wrapper;
use crate::{FeatureAction, RiskLevel, Verdict};

/// `find` primaries that run a command given by the words up to `;` or `+`.
const FIND_EXEC: &[&str] = &["-exec", "-execdir", "-ok", "-okdir"];

/// `find` primaries that choose which files match by name or path: with
/// none, `-delete` (or `-exec rm`) from the root takes everything.
const FIND_NAME_TESTS: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-lname",
    "-ilname",
];

/// The start points of a read-only `find` that are the filesystem root
/// (`find / -name x`), as a mask of argument positions: a search that
/// only lists names, whose reach the kernel sandbox bounds, so `/` is
/// not refused as an escape there (it still is everywhere else).
pub(crate) fn find_from_fs_root(args: &[Word]) -> u64 {
    let mut mask = 0;
    for (k, a) in args.iter().enumerate().take(63) {
        let v = a.value.as_str();
        if v.starts_with('-') || matches!(v, "(" | "!") {
            break;
        }
        if v == "/" && !a.features.expands() {
            mask |= 1 << k;
        }
    }
    mask
}

impl Walk<'_> {
    /// Whether `prog`, a path, is a file inside the root from every
    /// directory the command may start in: the project's own script or
    /// binary.
    pub(crate) fn runs_from_root(&self, prog: &str, cwd: &Cwd) -> bool {
        let root = self.ctx.root;
        self.bases(cwd).all(|base| {
            self.resolve(base, Path::new(prog))
                .is_some_and(|p| p.starts_with(root) && p != root)
        })
    }

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
        // A function named like a builtin or a wrapper the engine reads
        // replaces it for the rest of the request, so the engine's reading
        // of each later use (`cd`, `export`, `env`, `:`) would be wrong.
        for (name, _) in &script.functions {
            if is_shell_only(name) || is_wrapper(name) {
                self.builtin(
                    Verdict::Deny,
                    RiskLevel::High,
                    "builtin:function-name",
                    format!(
                        "a function named `{name}` would replace the shell's own `{name}`, which the policy reads by its meaning; give the function another name"
                    ),
                    name,
                );
            }
        }
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

impl Walk<'_> {
    /// The commands `find -exec`/`-execdir`/`-ok`/`-okdir` run, each
    /// decided like any other command (`{}` stands for a path found under
    /// the start points, which the find rule checked), and what
    /// `-delete` removes. Deleting from the project root with no test on
    /// names or paths, or any test naming `.git`, would take what cannot
    /// be restored.
    pub(crate) fn find_actions(&mut self, args: &[Word], cwd: &Cwd, depth: usize) {
        let starts = args
            .iter()
            .take_while(|a| !a.value.starts_with('-') && !matches!(a.value.as_str(), "(" | "!"))
            .count();
        let mut deletes = false;
        let mut k = starts;
        while k < args.len() {
            let v = args[k].value.as_str();
            if v == "-delete" {
                deletes = true;
            }
            if !FIND_EXEC.contains(&v) {
                k += 1;
                continue;
            }
            let inner = &args[k + 1..];
            let end = inner
                .iter()
                .position(|a| a.value == ";" || a.value == "+")
                .unwrap_or(inner.len());
            if end > 0 {
                let removes = inner[0].value == "rm";
                deletes |= removes;
                let mut inner_cwd = cwd.clone();
                inner_cwd.uncertain = true;
                self.command(&inner[..end], &mut inner_cwd, depth, false);
            }
            k += end + 2;
        }
        if !deletes {
            return;
        }
        for w in &args[..starts] {
            self.check_word(w, Access::Write, cwd);
        }
        let names_git = args[starts..].iter().any(|a| {
            a.value
                .split('/')
                .any(|part| part == ".git" || part.starts_with(".git*"))
        });
        let filtered = args[starts..]
            .iter()
            .any(|a| FIND_NAME_TESTS.contains(&a.value.as_str()));
        let from_root = starts == 0
            || args[..starts].iter().any(|w| {
                let base = cwd.exact.as_deref().unwrap_or(self.ctx.cwd);
                crate::resolve::normalize_lexically(base, Path::new(&w.value)) == self.ctx.root
            });
        if names_git || (from_root && !filtered) {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:protected-path",
                "this find deletes from the whole project (or from `.git`), which cannot be restored; add `-name`/`-path` tests for what to remove, or start it in the directory concerned".into(),
                "-delete",
            );
        }
    }
}
