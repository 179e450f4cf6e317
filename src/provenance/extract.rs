//! What a result showed: path-like tokens and identifiers, read from the
//! output of the command that produced it.
//!
//! Listings are read by the program that made them (the first command of
//! the request's last pipeline): `ls` (short and long format, several
//! directories, `-R`), `find`, `fd`, `git ls-files`, `rg --files`,
//! `tree`, and git's status, diff headers, commit hashes and branch names.
//! Diagnostics are read from any output, whatever printed them: search
//! hits (`path:line:`), Python tracebacks (`File "x.py", line N`) and
//! compiler messages (`--> src/lib.rs:3:5`, `file.c:3:5: error`).
//!
//! Paths come out as written, with the directory they are relative to;
//! `ledger` normalizes them.

use crate::lexer::{self, Operator, SimpleCommand};

/// What one result showed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// `(directory, path)`: a path as printed, relative to `directory`
    /// (itself relative to the run's working directory).
    pub paths: Vec<(String, String)>,
    /// Directories whose whole contents were listed.
    pub listed: Vec<String>,
    /// Commit hashes (as printed, 7 to 40 hex digits).
    pub hashes: Vec<String>,
    /// Branch (and tag) names.
    pub refs: Vec<String>,
}

/// The command that produced the output, as far as extraction needs it.
#[derive(Debug, Clone, Default)]
pub struct Producer {
    /// Base name of the program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The directory it ran in, relative to the request's cwd (`cd x &&`).
    pub dir: String,
    /// Nothing filtered its output (it was alone in its pipeline).
    pub alone: bool,
}

impl Producer {
    /// The producer of a shell string or argv.
    pub fn of(command: &crate::request::CommandSpec) -> Option<Producer> {
        match command {
            crate::request::CommandSpec::Argv(argv) => {
                let (prog, args) = argv.split_first()?;
                Some(Producer {
                    program: basename(prog).to_string(),
                    args: args.to_vec(),
                    dir: ".".into(),
                    alone: true,
                })
            }
            crate::request::CommandSpec::Shell(text) => {
                let script = lexer::lex(text).ok()?;
                producer_of_script(&script.commands)
            }
        }
    }

    fn options(&self) -> impl Iterator<Item = &str> {
        self.args
            .iter()
            .map(String::as_str)
            .take_while(|a| *a != "--")
            .filter(|a| a.starts_with('-') && a.len() > 1)
    }

    fn operands(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut dashdash = false;
        for a in &self.args {
            if !dashdash && a == "--" {
                dashdash = true;
            } else if dashdash || !a.starts_with('-') || a == "-" {
                out.push(a.as_str());
            }
        }
        out
    }

    fn has_short(&self, c: char) -> bool {
        self.options()
            .any(|o| !o.starts_with("--") && o[1..].contains(c))
    }

    fn has_long(&self, name: &str) -> bool {
        self.options().any(|o| o == name)
    }
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The first command of the last pipeline, after the `cd`s of an `&&`
/// chain before it.
fn producer_of_script(commands: &[SimpleCommand]) -> Option<Producer> {
    let start = commands
        .iter()
        .rposition(|c| !matches!(c.joined_by, Some(Operator::Pipe)))?;
    let mut dir = String::from(".");
    for c in &commands[..start] {
        let words: Vec<&str> = c.words.iter().map(|w| w.value.as_str()).collect();
        match words.as_slice() {
            ["cd", d] if !matches!(c.joined_by, Some(Operator::Or | Operator::Background)) => {
                dir = if d.starts_with('/') {
                    (*d).to_string()
                } else {
                    format!("{dir}/{d}")
                };
            }
            _ => {}
        }
    }
    let first = &commands[start];
    if first.words.iter().any(|w| {
        let f = &w.features;
        f.parameter_expansion || f.command_substitution
    }) {
        return None;
    }
    let (prog, args) = first.words.split_first()?;
    let alone = commands.len() == start + 1;
    Some(Producer {
        program: basename(&prog.value).to_string(),
        args: args.iter().map(|w| w.value.clone()).collect(),
        dir,
        alone,
    })
}

/// What `stdout` and `stderr` of a run of `producer` showed. `ok`: the run
/// succeeded; a failed run's listing or usage text is not trusted, only
/// its diagnostics (tracebacks, compiler messages, search hits).
/// `is_dir` tells whether a path (relative to the run's directory) is a
/// directory now.
pub fn extract(
    producer: Option<&Producer>,
    stdout: &str,
    stderr: &str,
    ok: bool,
    is_dir: &dyn Fn(&str) -> bool,
) -> Extracted {
    let mut out = Extracted::default();
    let dir = producer.map_or(".", |p| p.dir.as_str()).to_string();
    if ok && let Some(p) = producer {
        match p.program.as_str() {
            "ls" => ls(p, stdout, is_dir, &mut out),
            "find" | "fd" | "fdfind" => lines(
                p,
                stdout,
                &mut out,
                !p.args
                    .iter()
                    .any(|a| a.starts_with('-') && a != "-maxdepth" && a != "-mindepth"),
            ),
            "rg" if p.has_long("--files") => lines(p, stdout, &mut out, p.alone),
            // `-l`: the names of matching files, one per line.
            "grep" | "egrep" | "fgrep" | "rg"
                if p.has_short('l')
                    || p.has_short('L')
                    || p.has_long("--files-with-matches")
                    || p.has_long("--files-without-match") =>
            {
                lines(p, stdout, &mut out, false)
            }
            "tree" => tree(p, stdout, &mut out),
            "git" => git(p, stdout, &mut out),
            _ => {}
        }
    }
    let grep_like =
        producer.is_some_and(|p| matches!(p.program.as_str(), "grep" | "rg" | "egrep" | "fgrep"));
    for text in [stdout, stderr] {
        for line in text.lines() {
            diagnostic(line, &dir, grep_like, &mut out);
        }
    }
    out
}

/// One path per line, relative to the producer's directory.
fn lines(p: &Producer, stdout: &str, out: &mut Extracted, complete: bool) {
    for line in stdout.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        out.paths.push((p.dir.clone(), line.to_string()));
        if complete && p.alone {
            let parent = match line.rsplit_once('/') {
                Some((d, _)) if !d.is_empty() => d.to_string(),
                Some(_) => "/".to_string(),
                None => ".".to_string(),
            };
            if !out
                .listed
                .iter()
                .any(|l| *l == format!("{}/{parent}", p.dir))
            {
                out.listed.push(format!("{}/{parent}", p.dir));
            }
        }
    }
}

/// `ls`: one name per line (its format when not writing to a terminal),
/// or the long format; `DIR:` headers before each directory when it lists
/// several or recurses.
fn ls(p: &Producer, stdout: &str, is_dir: &dyn Fn(&str) -> bool, out: &mut Extracted) {
    let long = p.has_short('l') || p.has_short('n') || p.has_short('g') || p.has_short('o');
    let dirs_as_files = p.has_short('d');
    let operands = p.operands();
    let join = |d: &str, name: &str| -> String {
        if d == "." {
            name.to_string()
        } else {
            format!("{}/{name}", d.trim_end_matches('/'))
        }
    };
    let listed_dirs: Vec<&str> = operands
        .iter()
        .copied()
        .filter(|o| !dirs_as_files && is_dir(&join(&p.dir, o)))
        .collect();
    // Before any header, names belong to the one directory listed, or are
    // file operands printed as given.
    let mut current: Option<String> = match (operands.is_empty(), listed_dirs.as_slice()) {
        (true, _) if !dirs_as_files => Some(".".to_string()),
        (false, [only]) if operands.len() == 1 => Some((*only).to_string()),
        _ => None,
    };
    if let Some(c) = &current {
        out.listed.push(join(&p.dir, c));
    }
    let headers = operands.len() > 1 || p.has_short('R');
    for line in stdout.lines() {
        if line.is_empty() {
            continue;
        }
        if headers && let Some(h) = line.strip_suffix(':') {
            let h = h.to_string();
            out.listed.push(join(&p.dir, &h));
            current = Some(h);
            continue;
        }
        let name = if long {
            match long_name(line) {
                Some(n) => n,
                None => continue,
            }
        } else {
            line
        };
        if name == "." || name == ".." {
            continue;
        }
        let path = match &current {
            Some(c) if c != "." => join(c, name),
            _ => name.to_string(),
        };
        out.paths.push((p.dir.clone(), path));
    }
}

/// The name in a long-format line (`-rw-r--r-- 1 u g 12 Dec  1 10:00
/// name`, a symlink's ` -> target` dropped); `None` for `total N` and
/// anything that is not an entry.
fn long_name(line: &str) -> Option<&str> {
    let mode = line.split_ascii_whitespace().next()?;
    if mode.len() < 10
        || !matches!(
            mode.as_bytes()[0],
            b'-' | b'd' | b'l' | b'c' | b'b' | b'p' | b's'
        )
    {
        return None;
    }
    // Eight fields before the name: mode, links, owner, group, size,
    // month, day, time or year.
    let mut rest = line;
    for _ in 0..8 {
        rest = rest.trim_start_matches([' ', '\t']);
        let end = rest.find([' ', '\t'])?;
        rest = &rest[end..];
    }
    let name = rest.trim_start_matches([' ', '\t']);
    let name = if mode.starts_with('l') {
        name.split_once(" -> ").map_or(name, |(n, _)| n)
    } else {
        name
    };
    (!name.is_empty()).then_some(name)
}

/// `tree`: the first line is the directory, then one entry per line under
/// drawing characters four columns per level; the count line ends it.
fn tree(p: &Producer, stdout: &str, out: &mut Extracted) {
    let mut stack: Vec<String> = Vec::new();
    let mut top: Option<String> = None;
    for line in stdout.lines() {
        // UTF-8 drawing (`├── `) or, in the C locale, ASCII (`|-- `).
        let marker = line.find("── ").map(|at| (at, "── ".len())).or_else(|| {
            line.find("-- ")
                .filter(|&at| at > 0 && matches!(line.as_bytes()[at - 1], b'|' | b'`'))
                .map(|at| (at - 1, 4))
        });
        let Some((at, marker_len)) = marker else {
            if top.is_none() && !line.trim().is_empty() {
                let t = line.trim().to_string();
                out.listed.push(format!("{}/{t}", p.dir));
                top = Some(t);
            }
            continue;
        };
        let depth = line[..at].chars().count() / 4;
        let name = &line[at + marker_len..];
        let name = name.split_once(" -> ").map_or(name, |(n, _)| n);
        stack.truncate(depth);
        let base = top.clone().unwrap_or_else(|| ".".into());
        let mut path = base.clone();
        for s in &stack {
            path = format!("{path}/{s}");
        }
        let full = format!("{path}/{name}");
        if !out.listed.contains(&format!("{}/{path}", p.dir)) {
            out.listed.push(format!("{}/{path}", p.dir));
        }
        out.paths.push((p.dir.clone(), full));
        stack.push(name.to_string());
    }
}

fn is_hash(s: &str) -> bool {
    (7..=40).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// git: files (`ls-files`, `status`, diff headers), commit hashes and
/// branch names.
fn git(p: &Producer, stdout: &str, out: &mut Extracted) {
    let sub = p.operands().first().copied().unwrap_or("");
    for line in stdout.lines() {
        match sub {
            "ls-files" | "ls-tree" if p.has_long("--name-only") || sub == "ls-files" => {
                if !line.is_empty() {
                    out.paths.push((p.dir.clone(), line.to_string()));
                }
                continue;
            }
            "branch" => {
                let name = line.trim_start_matches(['*', '+']).trim();
                let name = name.split_ascii_whitespace().next().unwrap_or("");
                if !name.is_empty() && !name.starts_with('(') {
                    out.refs
                        .push(name.strip_prefix("remotes/").unwrap_or(name).to_string());
                }
                continue;
            }
            "status" => git_status_line(p, line, out),
            _ => {}
        }
        if let Some(rest) = line.strip_prefix("commit ")
            && let Some(h) = rest.split_ascii_whitespace().next()
            && is_hash(h)
        {
            out.hashes.push(h.to_string());
        } else if let Some(h) = line.split_ascii_whitespace().next()
            && is_hash(h)
        {
            out.hashes.push(h.to_string());
        }
        if let Some(b) = line.strip_prefix("On branch ") {
            out.refs.push(b.trim().to_string());
        }
        // `(HEAD -> main, origin/main, tag: v1)` decorations.
        if let (Some(open), Some(close)) = (line.find('('), line.find(')'))
            && open < close
            && line[..open]
                .split_ascii_whitespace()
                .next()
                .is_some_and(is_hash)
        {
            for part in line[open + 1..close].split(", ") {
                let name = part
                    .trim_start_matches("HEAD -> ")
                    .trim_start_matches("tag: ");
                if name != "HEAD" && !name.is_empty() {
                    out.refs.push(name.to_string());
                }
            }
        }
        for prefix in ["+++ b/", "--- a/"] {
            if let Some(path) = line.strip_prefix(prefix) {
                out.paths.push((p.dir.clone(), path.to_string()));
            }
        }
    }
}

/// `git status` in its short (` M a.py`, `?? b.py`) and long
/// (`\tmodified:   a.py`, untracked `\tb.py`) forms.
fn git_status_line(p: &Producer, line: &str, out: &mut Extracted) {
    let path = if let Some(rest) = line.strip_prefix('\t') {
        Some(
            rest.split_once(":   ")
                .map_or(rest, |(_, path)| path)
                .trim(),
        )
    } else if line.len() > 3
        && line.as_bytes()[2] == b' '
        && line[..2].bytes().all(|b| b" MADRCU?!".contains(&b))
    {
        Some(line[3..].trim())
    } else {
        None
    };
    if let Some(path) = path {
        let path = path.split_once(" -> ").map_or(path, |(_, to)| to);
        if !path.is_empty() {
            out.paths.push((p.dir.clone(), path.to_string()));
        }
    }
}

/// A path that could be a file name: no spaces, no URL, not an option.
fn plausible_path(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && !s.contains("://")
        && !s.contains(char::is_whitespace)
        && !s.starts_with('<')
        && s.chars().any(|c| c.is_alphanumeric())
}

/// Search hits, tracebacks and compiler messages in one line of any
/// output.
fn diagnostic(line: &str, dir: &str, grep_like: bool, out: &mut Extracted) {
    let trimmed = line.trim_start();
    // Python: `  File "pkg/mod.py", line 12, in f`
    if let Some(rest) = trimmed.strip_prefix("File \"")
        && let Some((path, tail)) = rest.split_once('"')
        && tail.starts_with(", line ")
        && plausible_path(path)
    {
        out.paths.push((dir.to_string(), path.to_string()));
        return;
    }
    // rustc: `  --> src/lib.rs:3:5`
    if let Some(rest) = trimmed.strip_prefix("--> ")
        && let Some(path) = path_before_line_number(rest)
    {
        out.paths.push((dir.to_string(), path.to_string()));
        return;
    }
    // pytest: `FAILED tests/test_a.py::test_x - ...`
    for prefix in ["FAILED ", "ERROR ", "PASSED "] {
        if let Some(rest) = trimmed.strip_prefix(prefix)
            && let Some((path, _)) = rest.split_once("::")
            && plausible_path(path)
        {
            out.paths.push((dir.to_string(), path.to_string()));
            return;
        }
    }
    // `path:12:` (grep -n, rg, gcc, tsc, pytest's `path:12: Error`) at the
    // start of a line; a bare `path:` too for grep's own hits.
    if let Some(path) = path_before_line_number(line) {
        out.paths.push((dir.to_string(), path.to_string()));
    } else if grep_like
        && let Some((path, _)) = line.split_once(':')
        && plausible_path(path)
        && (path.contains('/') || path.contains('.'))
    {
        out.paths.push((dir.to_string(), path.to_string()));
    }
}

/// `path` of `path:LINE:...` or `path:LINE` (a number after the colon).
fn path_before_line_number(s: &str) -> Option<&str> {
    let (path, rest) = s.split_once(':')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !(rest.len() == digits || rest.as_bytes()[digits] == b':') {
        return None;
    }
    // A file name has an extension or a directory (`12:00:01` is a time).
    (plausible_path(path) && (path.contains('.') || path.contains('/'))).then_some(path)
}

/// Output kept as head and tail (`[... N bytes omitted ...]` between)
/// without the two lines the cut went through, which are pieces of names.
pub fn whole_lines(text: &str) -> std::borrow::Cow<'_, str> {
    let Some(at) = text.find("\n[... ") else {
        return text.into();
    };
    let Some(end) = text[at..].find(" bytes omitted ...]\n").map(|e| at + e) else {
        return text.into();
    };
    let head = text[..at].rsplit_once('\n').map_or("", |(h, _)| h);
    let rest = &text[end + " bytes omitted ...]\n".len()..];
    let tail = rest.split_once('\n').map_or("", |(_, t)| t);
    format!("{head}\n{tail}").into()
}
