//! Shell builtins and the engine's own checks on them: `cd` (tracked, and
//! kept inside the root), builtins that only change the shell's state
//! (allowed once their variable names and paths pass), builtins that run
//! or load code the policy cannot see (refused), assignments to loader and
//! shell variables, and the places bash evaluates a value as code.

use std::path::{Path, PathBuf};

use agent_exec_lexer::Word;

use crate::hidden;
use crate::paths::path_like;
use crate::resolve::resolve_path;
use crate::state::{Access, Cwd, Walk, feature_verdict, has_expansion};
use crate::{FeatureAction, RiskLevel, Verdict};

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
pub(crate) fn is_shell_only(name: &str) -> bool {
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

/// `NAME=value` or `NAME+=value` with a valid name.
pub(crate) fn is_assignment(v: &str) -> bool {
    let Some(eq) = v.find('=') else { return false };
    let name = v[..eq].strip_suffix('+').unwrap_or(&v[..eq]);
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Walk<'_> {
    /// A shell builtin in program position (`prog` is a bare name): true
    /// when it was one and has been decided.
    pub(crate) fn shell_builtin(
        &mut self,
        prog: &str,
        args: &[Word],
        cwd: &mut Cwd,
        persistent: bool,
    ) -> bool {
        match prog {
            "cd" | "pushd" => self.cd(prog, args, cwd, persistent),
            "popd" => self.builtin(
                Verdict::Deny,
                RiskLevel::Medium,
                "builtin:cd",
                "`popd` cannot be followed; `cd` to an explicit directory inside the root".into(),
                prog,
            ),
            "source" | "." if self.policy.shell.source_files == FeatureAction::Check => {
                self.source_file(prog, args, cwd);
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
            }
            "hash" if args.iter().any(|a| a.value.starts_with("-p")) => self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:unsafe-builtin",
                "`hash -p` makes a name run another file; call the program by its name".into(),
                prog,
            ),
            _ if UNSAFE_BUILTINS.contains(&prog) => self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:unsafe-builtin",
                format!("`{prog}` defines or loads code that runs later, which cannot be checked"),
                prog,
            ),
            _ if STATE_BUILTINS.contains(&prog) => self.state_builtin(prog, args, cwd),
            _ => return false,
        }
        true
    }

    /// `source FILE` where the policy lets a project's own shell files be
    /// sourced (`source .venv/bin/activate`): the file must be a literal
    /// path inside the root. What it runs and defines is not seen, like a
    /// script run by `bash FILE`; the kernel sandbox bounds it.
    fn source_file(&mut self, prog: &str, args: &[Word], cwd: &Cwd) {
        self.read_only = false;
        let file = args
            .iter()
            .find(|a| !a.value.starts_with('-') || a.value == "-");
        let Some(file) = file.filter(|f| !has_expansion(&f.features) && !f.features.glob) else {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:unsafe-builtin",
                format!("`{prog}` needs a literal file inside the project root"),
                prog,
            );
            return;
        };
        let inside = self.bases(cwd).all(|b| {
            resolve_path(b, Path::new(&file.value)).is_some_and(|p| p.starts_with(self.ctx.root))
        });
        if !inside {
            self.builtin(
                Verdict::Deny,
                RiskLevel::High,
                "builtin:path-escape",
                format!(
                    "`{prog} {}`: only the project's own files may be sourced",
                    file.raw
                ),
                &file.raw,
            );
            return;
        }
        self.offer_weak(|| {
            (
                "builtin:source".into(),
                "sources a shell file of the project (its commands are not seen; the kernel sandbox bounds them)".into(),
                Some(file.raw.clone()),
            )
        });
    }

    /// Bash would evaluate a value as code here (see `hidden`).
    pub(crate) fn evaluation(&mut self, what: &str, token: &str) {
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
    pub(crate) fn scan_word(&mut self, w: &Word) {
        if (w.features.arithmetic || w.features.parameter_expansion)
            && let Some(found) = hidden::evaluated(&w.raw)
        {
            self.evaluation(found.describe(), &w.raw);
        }
    }

    /// A variable name a builtin assigns, tests or removes (`read NAME`,
    /// `printf -v NAME`, `declare NAME=..`, `test -v NAME`).
    pub(crate) fn check_name(&mut self, name: &str, shown: &str) {
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

    fn check_var_name(&mut self, name: &str) {
        if self.engine.denied_name(name) {
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
    pub(crate) fn assignment(&mut self, w: &Word, text: &str, cwd: &Cwd) {
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

    /// Variable names a program's arguments assign or test: `printf -v
    /// NAME` (and `-vNAME`), `test -v NAME`.
    pub(crate) fn argument_names(&mut self, prog: &str, args: &[Word]) {
        let base = crate::resolve::basename(prog);
        if base == "printf" {
            // Options end at the format.
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
        } else if base == "test" || base == "[" {
            // `test -v NAME` evaluates NAME's subscript (and assigns nothing).
            for pair in args.windows(2) {
                if pair[0].value == "-v" && hidden::plain_name(&pair[1].value).is_none() {
                    self.evaluation(COMPUTED_NAME, &pair[1].raw);
                }
            }
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
                skip_next = self.state_option(prog, args, k, declares, names);
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

    /// The option `args[k]` of a state builtin; true when the next
    /// argument is its value (and was checked here if it is a name).
    fn state_option(
        &mut self,
        prog: &str,
        args: &[Word],
        k: usize,
        declares: bool,
        names: bool,
    ) -> bool {
        let a = &args[k];
        let v = a.value.as_str();
        let flags = &v[1..];
        let mut skip_next = false;
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
                "-p" | "-d" | "-t" | "-n" | "-N" | "-u" | "-a" | "-i" | "-C" | "-c" | "-O" | "-s"
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
        skip_next
    }
}
