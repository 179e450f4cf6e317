//! Programs a policy may class read-only that have a way to do more: run
//! programs (`sort --compress-program`, `rg --pre`, `find -exec`, awk's
//! `system`), or write files (`sort -o`, `tree -o`, `xxd -r`, `uniq IN
//! OUT`). For each, the options it is known to run read-only with (an
//! allow-list: anything else is refused, so an option added by a later
//! version is not missed), the ones that are refused with what they do,
//! and its safe mode when it has one (`sed --sandbox`, `gawk --sandbox`),
//! which the policy injects so the program itself refuses at run time
//! what the policy cannot see in a script.
//!
//! Options are found the way each program's own parser finds them (GNU
//! `getopt_long` with clusters, glued values and abbreviations; `find`'s
//! primaries; `xxd`'s two-letter prefixes), and a word the shell may turn
//! into an option (a glob, a variable, a substitution) is refused where an
//! option could be: `rg TODO *` in a directory holding a file named
//! `--pre=sh` would otherwise run `sh`.

use agent_exec_lexer::Word;

mod special;
mod specs;

use crate::awk;
use crate::paths::expand_braces;
use specs::{AWK, AWK_PROGRAM_FILE, FILE, LESS, MAN, RG, SED, SORT, Spec, TREE, UNIQ};

/// Why a read-only program's arguments are refused.
#[derive(Debug)]
pub(crate) struct Refused {
    /// The argument that decided.
    pub(crate) token: String,
    pub(crate) reason: String,
}

/// The flag that puts a program in its safe mode.
pub(crate) const SANDBOX_FLAG: &str = "--sandbox";

/// Checks `name args` as a read-only run. `Ok(Some(flag))`: run it with
/// `flag` injected after the program word. `is_gawk` tells whether an
/// `awk`/`nawk` resolves to GNU awk (asked only for those names).
pub(crate) fn check(
    name: &str,
    args: &[Word],
    is_gawk: impl FnOnce() -> bool,
) -> Result<Option<&'static str>, Refused> {
    let Some(tool) = profile(name) else {
        return Ok(None);
    };
    match tool {
        Tool::Gnu(spec) => {
            let parsed = parse(name, spec, args)?;
            if name == "uniq"
                && let Some(out) = parsed.operands.get(1)
            {
                return Err(Refused {
                    token: out.raw.clone(),
                    reason: format!(
                        "the second operand of `uniq` (`{}`) is a file it writes; a read-only command may not write files, so give uniq one input and let it print",
                        out.raw
                    ),
                });
            }
            Ok((name == "sed").then_some(SANDBOX_FLAG))
        }
        Tool::Awk => {
            let parsed = parse(name, &AWK, args)?;
            check_awk(name, &parsed)?;
            let gawk = name == "gawk" || (matches!(name, "awk" | "nawk") && is_gawk());
            Ok(gawk.then_some(SANDBOX_FLAG))
        }
        Tool::Xxd => special::xxd(args).map(|()| None),
        Tool::Find => special::find(args).map(|()| None),
        Tool::Git => special::git(args).map(|()| None),
    }
}

enum Tool {
    Gnu(&'static Spec),
    Awk,
    Xxd,
    Find,
    Git,
}

fn profile(name: &str) -> Option<Tool> {
    Some(match name {
        "sed" => Tool::Gnu(&SED),
        "sort" => Tool::Gnu(&SORT),
        "tree" => Tool::Gnu(&TREE),
        "rg" => Tool::Gnu(&RG),
        "uniq" => Tool::Gnu(&UNIQ),
        "file" => Tool::Gnu(&FILE),
        "less" => Tool::Gnu(&LESS),
        "man" => Tool::Gnu(&MAN),
        "awk" | "gawk" | "mawk" | "nawk" => Tool::Awk,
        "xxd" => Tool::Xxd,
        "find" => Tool::Find,
        "git" => Tool::Git,
        _ => return None,
    })
}

/// An option that took a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Short(char),
    Long(&'static str),
}

#[derive(Default)]
struct Parsed<'w> {
    operands: Vec<&'w Word>,
    /// `(option, value, the word the value is in)`.
    values: Vec<(Name, String, &'w Word)>,
}

/// How a long option takes its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    None,
    Required,
    GluedOnly,
}

fn parse<'w>(tool: &str, spec: &Spec, args: &'w [Word]) -> Result<Parsed<'w>, Refused> {
    let mut p = Parsed::default();
    let mut k = 0;
    let mut options_end = false;
    while k < args.len() {
        let w = &args[k];
        let v = w.value.as_str();
        k += 1;
        if options_end {
            p.operands.push(w);
            continue;
        }
        if may_become_option(w) {
            return Err(expanded(tool, w));
        }
        if v == "--" {
            options_end = true;
        } else if let Some(long) = v.strip_prefix("--") {
            let (name, glued) = match long.split_once('=') {
                Some((n, g)) => (n, Some(g)),
                None => (long, None),
            };
            let (canonical, arity) = long_option(tool, spec, w, name)?;
            match (arity, glued) {
                (Arity::Required, None) => {
                    if let Some(next) = args.get(k) {
                        k += 1;
                        p.values.push((canonical, value_of(tool, next)?, next));
                    }
                }
                (Arity::Required | Arity::GluedOnly, Some(g)) => {
                    p.values.push((canonical, g.to_string(), w));
                }
                _ => {}
            }
        } else if v.len() > 1 && v.starts_with('-') {
            if let Some((c, rest)) = short_cluster(tool, spec, w)? {
                if rest.is_empty() {
                    if let Some(next) = args.get(k) {
                        k += 1;
                        p.values.push((Name::Short(c), value_of(tool, next)?, next));
                    }
                } else {
                    p.values.push((Name::Short(c), rest.to_string(), w));
                }
            }
        } else if v.starts_with('+')
            && let Some((_, what)) = spec.refused.iter().find(|(o, _)| *o == "+")
        {
            return Err(refused(tool, &w.raw, what));
        } else {
            p.operands.push(w);
            options_end = !spec.permute;
        }
    }
    Ok(p)
}

/// A word that was consumed as an option's value.
pub(super) fn value_of(tool: &str, w: &Word) -> Result<String, Refused> {
    if may_become_option(w) {
        return Err(expanded(tool, w));
    }
    Ok(w.value.clone())
}

/// The short options of `-abc`; `Some((option, rest))` when one of them
/// takes a value (`rest` is the glued part, empty when the value is the
/// next word).
fn short_cluster<'w>(
    tool: &str,
    spec: &Spec,
    w: &'w Word,
) -> Result<Option<(char, &'w str)>, Refused> {
    let v = w.value.as_str();
    for (at, c) in v[1..].char_indices() {
        let rest = &v[1 + at + c.len_utf8()..];
        let mut buf = [0u8; 4];
        let flag = format!("-{}", c.encode_utf8(&mut buf));
        if let Some((_, what)) = spec.refused.iter().find(|(o, _)| **o == flag) {
            return Err(refused(tool, &flag, what));
        }
        if spec.flags.contains(c) {
            continue;
        }
        if spec.valued.contains(c) {
            return Ok(Some((c, rest)));
        }
        if spec.glued.contains(c) {
            return Ok(None);
        }
        return Err(unknown(tool, &flag));
    }
    Ok(None)
}

/// A long option by (a prefix of) its name.
fn long_option(tool: &str, spec: &Spec, w: &Word, name: &str) -> Result<(Name, Arity), Refused> {
    for (opt, what) in spec.refused {
        let Some(r) = opt.strip_prefix("--") else {
            continue;
        };
        // Any prefix of a refused option is refused: getopt would take
        // it for that option, or refuse it as ambiguous.
        if name == r || (spec.abbreviations && !name.is_empty() && r.starts_with(name)) {
            return Err(refused(tool, &w.raw, what));
        }
    }
    let entry = |l: &'static str| l.trim_end_matches("=?").trim_end_matches('=');
    let long = || spec.long.split_ascii_whitespace();
    let arity = |l: &str| {
        if l.ends_with("=?") {
            Arity::GluedOnly
        } else if l.ends_with('=') {
            Arity::Required
        } else {
            Arity::None
        }
    };
    let found = long().find(|l| entry(l) == name).or_else(|| {
        (spec.abbreviations && !name.is_empty())
            .then(|| long().find(|l| entry(l).starts_with(name)))
            .flatten()
    });
    if let Some(l) = found {
        return Ok((Name::Long(entry(l)), arity(l)));
    }
    if (spec.negations && name.starts_with("no-")) || spec.any_long {
        return Ok((Name::Long(""), Arity::GluedOnly));
    }
    Err(unknown(tool, &w.raw))
}

/// Whether the shell may turn `w` into a word starting with `-`, or into
/// several words: a variable or substitution not inside one plain pair of
/// double quotes (word splitting), one that starts the word, a glob that
/// starts with a pattern, a brace alternative that does.
pub(crate) fn may_become_option(w: &Word) -> bool {
    let f = &w.features;
    let v = w.value.as_str();
    let leading_expansion = |s: &str| s.starts_with(['$', '`']);
    if f.parameter_expansion || f.command_substitution || f.arithmetic {
        let raw = w.raw.as_str();
        let one_quoted = raw.len() >= 2
            && raw.starts_with('"')
            && raw.ends_with('"')
            && !raw[1..raw.len() - 1].contains(['"', '\\']);
        if !one_quoted || leading_expansion(v) {
            return true;
        }
    }
    let leading_pattern = |s: &str| f.glob && s.starts_with(['*', '?', '[']);
    if f.brace {
        return match expand_braces(v, 64) {
            Some(alts) => alts
                .iter()
                .any(|a| a.starts_with('-') || leading_pattern(a) || leading_expansion(a)),
            None => true,
        };
    }
    leading_pattern(v)
}

pub(super) fn refused(tool: &str, token: &str, what: &str) -> Refused {
    Refused {
        token: token.to_string(),
        reason: format!(
            "`{tool} {token}` {what}; the policy runs `{tool}` here only as a read-only command, so leave that option out"
        ),
    }
}

pub(super) fn unknown(tool: &str, token: &str) -> Refused {
    Refused {
        token: token.to_string(),
        reason: format!(
            "`{token}` is not among the options `{tool}` is known to run read-only with (those that run programs or write files are refused, and unknown ones too); leave it out"
        ),
    }
}

pub(super) fn expanded(tool: &str, w: &Word) -> Refused {
    Refused {
        token: w.raw.clone(),
        reason: format!(
            "`{}` is expanded by the shell and may become an option of `{tool}` (a name or value starting with `-`, such as `--pre=sh`, or several words); write it literally (`./*` rather than `*`), quote it after a literal start (`\"./$f\"`), or put `--` before the operands",
            w.raw
        ),
    }
}

/// The awk program texts (`-e`/`--source` values, or the first operand)
/// and `-W` options.
fn check_awk(tool: &str, p: &Parsed<'_>) -> Result<(), Refused> {
    let mut programs: Vec<(&str, &Word)> = Vec::new();
    for (name, value, w) in &p.values {
        match name {
            Name::Short('e') | Name::Long("source") => programs.push((value, w)),
            Name::Short('W') => mawk_option(tool, value, w)?,
            _ => {}
        }
    }
    if programs.is_empty()
        && let Some(w) = p.operands.first()
    {
        programs.push((&w.value, w));
    }
    for (text, w) in programs {
        let f = &w.features;
        if f.parameter_expansion || f.command_substitution || f.arithmetic {
            return Err(Refused {
                token: w.raw.clone(),
                reason: format!(
                    "the {tool} program `{}` is computed by the shell, so it cannot be checked; write it literally",
                    w.raw
                ),
            });
        }
        if let Some((token, what)) = awk::refused(text) {
            return Err(Refused {
                reason: format!(
                    "this {tool} program {what} (at `{token}`); a read-only command only filters and prints: keep awk to that, and redirect its output with the shell if the policy allows"
                ),
                token,
            });
        }
    }
    Ok(())
}

/// mawk's `-W NAME[=VALUE][,...]`, names abbreviated at will.
fn mawk_option(tool: &str, value: &str, w: &Word) -> Result<(), Refused> {
    const KNOWN: &[&str] = &[
        "version",
        "dump",
        "help",
        "usage",
        "interactive",
        "posix_space",
        "random",
        "sprintf",
        "repetitions",
        "traditional",
        "posix",
    ];
    for item in value.split(',') {
        let key = item.split('=').next().unwrap_or_default().trim();
        if key.is_empty() || "exec".starts_with(key) {
            return Err(refused(tool, &w.raw, AWK_PROGRAM_FILE));
        }
        if !KNOWN.iter().any(|k| k.starts_with(key)) {
            return Err(unknown(tool, &w.raw));
        }
    }
    Ok(())
}
