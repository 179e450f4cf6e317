//! The programs whose arguments are not read like `getopt_long`'s:
//! `xxd` (two-letter prefixes, an output operand), `find` (primaries
//! anywhere) and `git` (global options, then a subcommand's).

use agent_exec_lexer::Word;

use super::specs::WRITES_OUTPUT;
use super::{Refused, expanded, may_become_option, refused, unknown, value_of};

/// xxd reads options by their first two letters (`-revert` is `-r`) and
/// stops at the first operand; its second operand is a file it writes.
pub(super) fn xxd(args: &[Word]) -> Result<(), Refused> {
    let looks_numeric = |s: &str| {
        let s = s.trim_start_matches(['+', '-']);
        s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars()
                .all(|c| c.is_ascii_hexdigit() || c == 'x' || c == 'X')
    };
    let mut operands = 0;
    let mut options = true;
    let mut k = 0;
    while k < args.len() {
        let w = &args[k];
        let v = w.value.as_str();
        k += 1;
        if options {
            if may_become_option(w) {
                return Err(expanded("xxd", w));
            }
            if v == "--" {
                options = false;
                continue;
            }
            if v.len() > 1 && v.starts_with('-') {
                let o = if v.starts_with("--") && v.len() > 2 {
                    &v[1..]
                } else {
                    v
                };
                let rest = o.get(2..).unwrap_or("");
                match o.as_bytes()[1] {
                    b'r' => {
                        return Err(refused(
                            "xxd",
                            &w.raw,
                            "turns a dump back into binary, which xxd writes into (patches) its output file",
                        ));
                    }
                    b'a' | b'b' | b'C' | b'E' | b'e' | b'h' | b'i' | b'p' | b'd' | b'u' | b'v' => {}
                    c @ (b'c' | b'g' | b'l' | b'n' | b'o' | b's' | b'R') => {
                        if rest.is_empty() || rest.chars().all(|c| c.is_ascii_alphabetic()) {
                            let value = args.get(k).map(|n| (value_of("xxd", n), n));
                            k += 1;
                            if let Some((value, n)) = value {
                                let value = value?;
                                if !matches!(c, b'n' | b'R') && !looks_numeric(&value) {
                                    return Err(unknown("xxd", &format!("{v} {}", n.raw)));
                                }
                            }
                        }
                    }
                    _ => return Err(unknown("xxd", &w.raw)),
                }
                continue;
            }
            options = false;
        }
        operands += 1;
        if operands > 1 {
            return Err(Refused {
                token: w.raw.clone(),
                reason: format!(
                    "the second operand of `xxd` (`{}`) is a file it writes; a read-only command may not write files, so let xxd print",
                    w.raw
                ),
            });
        }
    }
    Ok(())
}

/// `find`'s primaries: the ones that run programs or write files are
/// refused, unknown ones too, and so is any word the shell expands into
/// something that could be read as a primary, wherever it is.
pub(super) fn find(args: &[Word]) -> Result<(), Refused> {
    // Separated by blanks.
    const ONE_VALUE: &str = "name iname path ipath wholename iwholename regex iregex lname ilname \
        type xtype size mtime mmin atime amin ctime cmin used newer anewer \
        cnewer perm user group uid gid links inum samefile fstype maxdepth \
        mindepth regextype printf context files0-from D";
    const NO_VALUE: &str = "empty executable readable writable nouser nogroup true false depth d \
        mount xdev noleaf ignore_readdir_race noignore_readdir_race follow \
        warn nowarn daystart print print0 ls prune quit not and or a o H L P \
        help -help version -version";
    const RUNS: &str = "runs a program for every file found";
    const REFUSED: &[(&str, &str)] = &[
        ("exec", RUNS),
        ("execdir", RUNS),
        ("ok", RUNS),
        ("okdir", RUNS),
        ("delete", "removes the files found"),
        ("fprint", "writes to a file"),
        ("fprint0", "writes to a file"),
        ("fprintf", "writes to a file"),
        ("fls", "writes to a file"),
    ];
    let mut k = 0;
    while k < args.len() {
        let w = &args[k];
        k += 1;
        if may_become_option(w) {
            return Err(expanded("find", w));
        }
        let Some(primary) = w.value.strip_prefix('-').filter(|p| !p.is_empty()) else {
            continue;
        };
        if let Some((_, what)) = REFUSED.iter().find(|(p, _)| *p == primary) {
            return Err(refused("find", &w.raw, what));
        }
        let newer_xy = primary.len() == 7
            && primary.starts_with("newer")
            && primary[5..].chars().all(|c| "aBcmt".contains(c));
        let listed = |list: &str| list.split_ascii_whitespace().any(|p| p == primary);
        if listed(ONE_VALUE) || newer_xy {
            if let Some(next) = args.get(k) {
                value_of("find", next)?;
            }
            k += 1;
        } else if !listed(NO_VALUE) && !optimisation_level(primary) {
            return Err(unknown("find", &w.raw));
        }
    }
    Ok(())
}

/// `-O3`: find's optimisation level.
fn optimisation_level(primary: &str) -> bool {
    primary
        .strip_prefix('O')
        .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
}

/// git: its global options may name programs (`-c`, `--config-env`,
/// `--exec-path`), and some subcommand options write files or run
/// external tools; a word the shell expands may become any of them.
pub(super) fn git(args: &[Word]) -> Result<(), Refused> {
    const CONFIG: &str = "sets configuration, which can name programs for git to run";
    const GLOBAL_VALUES: &[&str] = &["-C", "--git-dir", "--work-tree", "--namespace"];
    const SUB_REFUSED: &[(&str, &str)] = &[
        ("--output", WRITES_OUTPUT),
        ("--ext-diff", "runs an external diff program"),
        ("--textconv", "runs text conversion programs"),
        (
            "--open-files-in-pager",
            "opens the matches in a pager program",
        ),
    ];
    let mut k = 0;
    let mut subcommand: Option<&str> = None;
    let mut options_end = false;
    while k < args.len() {
        let w = &args[k];
        let v = w.value.as_str();
        k += 1;
        if options_end {
            continue;
        }
        if may_become_option(w) {
            return Err(expanded("git", w));
        }
        if v == "--" {
            options_end = subcommand.is_some();
            continue;
        }
        let long = v.split('=').next().unwrap_or(v);
        let abbreviates = |opt: &str| long == opt || (long.len() >= 4 && opt.starts_with(long));
        match subcommand {
            None if v == "-c" || abbreviates("--config-env") || abbreviates("--exec-path") => {
                return Err(refused("git", &w.raw, CONFIG));
            }
            None if GLOBAL_VALUES.contains(&v) => {
                if let Some(next) = args.get(k) {
                    value_of("git", next)?;
                }
                k += 1;
            }
            None if !v.starts_with('-') => subcommand = Some(v),
            None => {}
            Some(sub) => {
                if let Some((_, what)) = SUB_REFUSED
                    .iter()
                    .find(|(o, _)| v.starts_with("--") && abbreviates(o))
                {
                    return Err(refused("git", &w.raw, what));
                }
                if sub == "grep" && v.starts_with('-') && !v.starts_with("--") && v.contains('O') {
                    return Err(refused(
                        "git",
                        &w.raw,
                        "opens the matches in a pager program",
                    ));
                }
            }
        }
    }
    Ok(())
}
