//! Argument provenance, as far as the policy knows it: the `[provenance]`
//! table, and which arguments of a request name paths.
//!
//! The walk that decides a request already knows which words a rule
//! consumed (subcommands, a `pattern_operand`), what a rule writes
//! (`writes`) and where each command starts (`cd` chains).
//! [`Policy::path_arguments`] walks the request the same way and collects
//! every operand and redirection target that names a path, leaving out
//! the free-text options and operands listed in `free_text.rs`.

use std::path::PathBuf;

use agent_exec_lexer::Word;
use serde::{Deserialize, Serialize};

use crate::free_text;
use crate::resolve::basename;
use crate::rules::Writes;
use crate::state::{Cwd, Walk, has_expansion};
use crate::{CommandSpec, Context, ParseError, Policy};

/// `[provenance] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvenanceMode {
    /// No ledger, no tags.
    #[default]
    Off,
    /// Every path argument is tagged in the result and the trace; nothing
    /// is held back.
    Tag,
    /// Tagged, and a command that writes with more assumed arguments than
    /// `assumed_budget` does not run.
    Enforce,
}

/// The `[provenance]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProvenancePolicy {
    /// Off, tag or enforce.
    pub mode: ProvenanceMode,
    /// How many assumed arguments (paths no earlier result showed, nor a
    /// listed directory holds) a command that writes may have under
    /// `enforce`.
    pub assumed_budget: u32,
    /// The most entries a session's ledger keeps (least recently used
    /// ones go first).
    pub max_entries: usize,
}

/// The default bound of a session's ledger.
pub const DEFAULT_LEDGER_ENTRIES: usize = 10_000;

impl Default for ProvenancePolicy {
    fn default() -> Self {
        ProvenancePolicy {
            mode: ProvenanceMode::Off,
            assumed_budget: 0,
            max_entries: DEFAULT_LEDGER_ENTRIES,
        }
    }
}

/// One argument of a request that names a path (or a revision, for git).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathArgument {
    /// The word as the request wrote it.
    pub shown: String,
    /// Its value after quote removal.
    pub value: String,
    /// The command writes, creates or removes it.
    pub write: bool,
    /// The directory it is relative to (the request's working directory,
    /// or the one a `cd &&` chain certainly moved to).
    pub base: PathBuf,
    /// The program it is an argument of (by base name); `None` for a
    /// redirection target.
    pub program: Option<String>,
}

impl Policy {
    /// The path arguments of `cmd`, in order: operands the policy treats as
    /// paths and redirection targets. Options, free-text operands
    /// (`git commit -m`, `grep PATTERN`, `python -c CODE`) and words only
    /// known at run time (expansions, globs) are left out.
    pub fn path_arguments(
        &self,
        cmd: &CommandSpec,
        ctx: &Context,
    ) -> Result<Vec<PathArgument>, ParseError> {
        Ok(self.walk_paths(cmd, ctx)?.1)
    }

    /// [`decide`](Policy::decide) and [`path_arguments`](Policy::path_arguments)
    /// from one walk of the request: what a service that tags arguments
    /// calls instead of `decide`.
    pub fn decide_with_paths(
        &self,
        cmd: &CommandSpec,
        ctx: &Context,
    ) -> Result<(crate::Decision, Vec<PathArgument>), ParseError> {
        self.walk_paths(cmd, ctx)
    }
}

impl Walk<'_> {
    /// Collects the operands of one program, when collecting.
    pub(crate) fn collect_args(
        &mut self,
        prog: &str,
        args: &[Word],
        writes: Writes,
        consumed: u64,
        cwd: &Cwd,
    ) {
        let Some(out) = self.paths.as_mut() else {
            return;
        };
        let name = basename(prog);
        let spec = free_text::of(name);
        let base = cwd
            .exact
            .clone()
            .unwrap_or_else(|| self.ctx.cwd.to_path_buf());
        let mut operands: Vec<(usize, &Word)> = Vec::new();
        let mut after_dashdash = false;
        let mut skip_next = false;
        let mut first_text_pending = spec.operands == free_text::Operands::FirstIsText;
        for (k, w) in args.iter().enumerate() {
            if skip_next {
                skip_next = false;
                continue;
            }
            if k < 64 && consumed & (1 << k) != 0 {
                // A rule's pattern operand is the free text of this command.
                first_text_pending = false;
                continue;
            }
            let v = w.value.as_str();
            if !after_dashdash && v == "--" {
                after_dashdash = true;
                if spec.stop_at_dashdash {
                    break;
                }
                continue;
            }
            if !after_dashdash && v.starts_with('-') && v.len() > 1 {
                if spec.stops.contains(&v) {
                    break;
                }
                if spec.options.contains(&v) {
                    skip_next = true;
                }
                if spec.supplies_text(v) {
                    first_text_pending = false;
                }
                continue;
            }
            if first_text_pending {
                first_text_pending = false;
                continue;
            }
            match spec.operands {
                free_text::Operands::AllText => continue,
                free_text::Operands::BareNames if !v.contains('/') => continue,
                _ => {}
            }
            operands.push((k, w));
        }
        let last = operands.last().map(|&(k, _)| k);
        for (k, w) in operands {
            let write = match writes {
                Writes::None => false,
                Writes::Operands => true,
                Writes::Last | Writes::Link => Some(k) == last,
            };
            if let Some(arg) = literal(w, write, &base, Some(name)) {
                out.push(arg);
            }
        }
    }

    /// Collects a redirection target, when collecting.
    pub(crate) fn collect_redirect(&mut self, target: &Word, write: bool, cwd: &Cwd) {
        let Some(out) = self.paths.as_mut() else {
            return;
        };
        let base = cwd
            .exact
            .clone()
            .unwrap_or_else(|| self.ctx.cwd.to_path_buf());
        if let Some(arg) = literal(target, write, &base, None) {
            out.push(arg);
        }
    }
}

/// A word whose value is known before it runs, as a path argument.
fn literal(
    w: &Word,
    write: bool,
    base: &std::path::Path,
    prog: Option<&str>,
) -> Option<PathArgument> {
    let f = &w.features;
    let v = w.value.as_str();
    if v.is_empty() || has_expansion(f) || f.glob || f.brace || f.tilde || v.starts_with("/dev/") {
        return None;
    }
    Some(PathArgument {
        shown: w.raw.clone(),
        value: v.to_string(),
        write,
        base: base.to_path_buf(),
        program: prog.map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const POLICY: &str = r#"
name = "t"
default = "deny"
[[rule]]
id = "read"
programs = ["cat", "ls", "grep", "python3", "echo", "find"]
action = "allow"
risk = "low"
read_only = true
reason = "reads"
[[rule]]
id = "grep"
program = "grep"
pattern_operand = true
action = "allow"
risk = "low"
read_only = true
reason = "searches"
[[rule]]
id = "touch"
programs = ["touch", "rm"]
writes = "operands"
action = "allow"
risk = "low"
reason = "writes"
[[rule]]
id = "cp"
programs = ["cp", "mv"]
writes = "last"
action = "allow"
risk = "low"
reason = "copies"
[[rule]]
id = "git"
program = "git"
action = "allow"
risk = "low"
reason = "git"
"#;

    /// `(value, write, base relative to the root)` of each path argument.
    fn args(cmd: &str) -> Vec<(String, bool, String)> {
        let policy = Policy::parse(POLICY, "t.toml").unwrap();
        let root = Path::new("/nonexistent-root");
        let ctx = Context { root, cwd: root };
        policy
            .path_arguments(&CommandSpec::Shell(cmd.into()), &ctx)
            .unwrap()
            .into_iter()
            .map(|a| {
                let base = a.base.strip_prefix(root).unwrap().display().to_string();
                (a.value, a.write, base)
            })
            .collect()
    }

    fn v(list: &[(&str, bool, &str)]) -> Vec<(String, bool, String)> {
        list.iter()
            .map(|(a, w, b)| (a.to_string(), *w, b.to_string()))
            .collect()
    }

    #[test]
    fn operands_and_redirections_are_paths_with_what_the_rule_writes() {
        assert_eq!(
            args("cat a.py src/b.py"),
            v(&[("a.py", false, ""), ("src/b.py", false, "")])
        );
        assert_eq!(args("touch x y"), v(&[("x", true, ""), ("y", true, "")]));
        assert_eq!(
            args("cp a b dest"),
            v(&[("a", false, ""), ("b", false, ""), ("dest", true, "")])
        );
        assert_eq!(
            args("echo hi > out.txt && cat < in.txt"),
            v(&[("out.txt", true, ""), ("in.txt", false, "")])
        );
        // After `cd &&`, relative to where the command certainly runs.
        assert_eq!(args("cd src && touch n.py"), v(&[("n.py", true, "src")]));
    }

    #[test]
    fn free_text_is_not_a_path() {
        assert_eq!(args("grep -rn 'a/b' src"), v(&[("src", false, "")]));
        assert_eq!(args("grep -e pat -n x.py"), v(&[("x.py", false, "")]));
        // This rule names no subcommands, so `commit` is an operand too.
        assert_eq!(
            args("git commit -m 'fix src/a.py' src/a.py"),
            v(&[("commit", false, ""), ("src/a.py", false, "")])
        );
        assert_eq!(args("python3 -c 'open(\"x\")' arg"), v(&[]));
        assert_eq!(args("python3 tool.py"), v(&[("tool.py", false, "")]));
        assert_eq!(args("echo src/a.py"), v(&[]));
        assert_eq!(
            args("find src -name '*.py' -type f"),
            v(&[("src", false, "")])
        );
        // Words only known at run time are not tagged.
        assert_eq!(args("cat $F *.py"), v(&[]));
    }
}
