//! Path arguments: every word that may name a file is resolved against
//! each possible working directory (following `..` and symlinks as far as
//! they exist) and must land where its use allows: inside the root or a
//! readable system area for reads, inside the root or a writable area for
//! writes. Words the shell expands are checked by what can be known of
//! them (a literal prefix, each brace alternative, a glob's fixed part).

use std::path::{Path, PathBuf};

use agent_exec_lexer::Word;

use crate::resolve::{is_symlink, normalize_lexically, resolve_path};
use crate::rules::Writes;
use crate::state::{Access, Cwd, Walk, feature_verdict, has_expansion};
use crate::{FeatureAction, RiskLevel, Verdict};

/// Never refused as redirection targets or arguments.
const DEV_READ: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdin",
    "/dev/fd/0",
];

pub(crate) fn path_like(v: &str) -> bool {
    v.contains('/') || v == "." || v == ".."
}

/// Expands `{a,b}` groups (nested, at most `limit` results); `None` when
/// there would be more.
pub(crate) fn expand_braces(v: &str, limit: usize) -> Option<Vec<String>> {
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

/// Where a command that writes its last operand (`cp`, `mv`, `ln`) writes,
/// and whether `ln` makes symlinks.
#[derive(Default)]
struct WriteTargets {
    /// `-t DIR`, `-tDIR` or `--target-directory=DIR`: the argument naming
    /// it (the option itself when the value is glued).
    target_dir: Option<usize>,
    last_operand: Option<usize>,
    symbolic: bool,
}

impl WriteTargets {
    fn find(args: &[Word], writes: Writes) -> WriteTargets {
        let mut t = WriteTargets::default();
        if !matches!(writes, Writes::Last | Writes::Link) {
            return t;
        }
        let mut after_dashdash = false;
        let mut k = 0;
        while k < args.len() {
            let v = args[k].value.as_str();
            if !after_dashdash && v == "--" {
                after_dashdash = true;
            } else if !after_dashdash && (v == "-t" || v == "--target-directory") {
                t.target_dir = Some(k + 1);
                k += 1;
            } else if !after_dashdash && v.starts_with('-') && v.len() > 1 {
                if (v.starts_with("-t") && !v.starts_with("--"))
                    || v.starts_with("--target-directory=")
                {
                    t.target_dir = Some(k);
                }
                if v == "--symbolic" || (!v.starts_with("--") && v[1..].contains('s')) {
                    t.symbolic = true;
                }
            } else {
                t.last_operand = Some(k);
            }
            k += 1;
        }
        t
    }

    fn is_target(&self, k: usize) -> bool {
        Some(k) == self.target_dir || (self.target_dir.is_none() && Some(k) == self.last_operand)
    }

    /// The directory the links are made in, as written.
    fn link_dir<'a>(&self, args: &'a [Word]) -> &'a str {
        match self.target_dir {
            Some(t) => args.get(t).map_or(".", |a| {
                let v = a.value.as_str();
                v.strip_prefix("--target-directory=")
                    .or_else(|| v.strip_prefix("-t").filter(|_| v.starts_with('-')))
                    .unwrap_or(v)
            }),
            None => self
                .last_operand
                .and_then(|l| args.get(l))
                .and_then(|a| a.value.rsplit_once('/'))
                .map_or(".", |(dir, _)| if dir.is_empty() { "/" } else { dir }),
        }
    }
}

impl Walk<'_> {
    /// Checks every argument that names a path, with the access the
    /// program's rule gives it. `consumed` marks arguments that are names
    /// (subcommands, patterns), not paths.
    pub(crate) fn check_args(&mut self, args: &[Word], writes: Writes, consumed: u64, cwd: &Cwd) {
        let targets = WriteTargets::find(args, writes);
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
                    if targets.is_target(k) {
                        Access::Write
                    } else if writes == Writes::Link && targets.symbolic && !is_option {
                        // A symlink's target is resolved from the link's
                        // directory and later reads through it must stay in
                        // the root, so it is held to the write rule.
                        self.check_link_target(w, targets.link_dir(args), cwd);
                        continue;
                    } else {
                        Access::Read
                    }
                }
            };
            if Some(k) == targets.target_dir && v.starts_with('-') {
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
    pub(crate) fn check_word(&mut self, w: &Word, access: Access, cwd: &Cwd) {
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

    pub(crate) fn check_tilde(&mut self, shown: &str, rest: &str, access: Access, cwd: &Cwd) {
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
    pub(crate) fn check_expanded(&mut self, shown: &str, v: &str, access: Access, cwd: &Cwd) {
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
    pub(crate) fn check_path(&mut self, shown: &str, v: &str, access: Access, cwd: &Cwd) {
        if access == Access::Read && DEV_READ.contains(&v) {
            return;
        }
        if v == "/dev/null" {
            return;
        }
        let root = self.ctx.root;
        let mut escape: Option<(PathBuf, &'static str)> = None;
        for base in self.bases(cwd) {
            let Some(resolved) = self.resolve(base, Path::new(v)) else {
                escape = Some((PathBuf::from(v), "a symlink loop"));
                break;
            };
            // A scratch directory the root lies beneath stays the host's
            // (the sandbox does not cover it), so it is no run's own.
            let inside = resolved.starts_with(root)
                || self
                    .engine
                    .scratch
                    .iter()
                    .any(|r| resolved.starts_with(r) && !root.starts_with(r));
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
                    // The repository's history: unlike the files it
                    // tracks, nothing can restore it.
                    if resolved.parent() == Some(root)
                        && resolved.file_name() == Some(".git".as_ref())
                    {
                        escape = Some((
                            resolved,
                            "the repository's history (`.git`), which nothing could restore",
                        ));
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
}
