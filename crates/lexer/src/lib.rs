//! Shell lexing: one request string to a list of simple commands.
//!
//! Pure and allocation-bounded by its input. It does not execute or expand
//! anything; it records where the shell *would* expand (substitutions,
//! parameters, globs, braces, `~`) so the policy can decide what each gets.
//!
//! The grammar followed is bash's, so the script given to the shell must be
//! run by bash for the policy's view and the shell's to agree (`&>`, `|&`,
//! `$'..'` and `<(..)` mean something else, or nothing, to a POSIX `sh`).
//!
//! Known simplifications, all on the refusing side: `$((` always starts
//! arithmetic (bash retries `$( (..) )` without the space), `a=(..)` arrays
//! are a syntax error, and inside `[[ .. ]]` the operators `<`, `>`, `&&`,
//! `(` are lexed as in a command (the construct is unsupported anyway).
//! Array element assignments `a[i]=v` are plain words: bash keeps blanks
//! and operators inside the brackets in the word, this lexer splits there
//! (every part is still seen by the policy).

#![deny(unsafe_code)]

/// Where the shell whose grammar this lexer follows (bash) is looked up, in
/// order. A script this lexer read must run under this shell and no other.
pub const SHELL_PATHS: &[&str] = &["/bin/bash", "/usr/bin/bash"];

use serde::Serialize;

/// Byte offsets into the request string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// The operator that joins a simple command to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Operator {
    /// `;` or a newline
    Seq,
    And,
    Or,
    Pipe,
    /// `&` (background)
    Background,
}

/// Shell features present in one word, outside single quotes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Features {
    /// `$(...)` or backticks.
    pub command_substitution: bool,
    /// `<(...)` or `>(...)`.
    pub process_substitution: bool,
    /// `$VAR`, `${...}`, `$1`, `$$`...
    pub parameter_expansion: bool,
    /// `$((...))`.
    pub arithmetic: bool,
    /// Unquoted `*`, `?` or `[...]`.
    pub glob: bool,
    /// Unquoted `{a,b}` or `{1..3}`.
    pub brace: bool,
    /// Unquoted leading `~`.
    pub tilde: bool,
    /// Any quoting or escaping was used.
    pub quoted: bool,
}

/// One word after quote removal. `value` is exact when no expansion feature
/// is set; with expansions it keeps the literal text of the expansion
/// (`$HOME`, `*.rs`) so paths can still be checked by prefix. The one
/// inexact case: `$'\xff'` escapes that decode to invalid UTF-8 appear as
/// U+FFFD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Word {
    pub value: String,
    /// The word as written in the request.
    pub raw: String,
    pub span: Span,
    pub features: Features,
    /// Commands inside `$(...)`, backticks and `<(...)`, lexed recursively.
    pub substitutions: Vec<Script>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RedirectKind {
    /// `<`
    Input,
    /// `>` and `>|`
    Output,
    /// `>>`
    Append,
    /// `<>`
    ReadWrite,
    /// `&>` / `>&` with a file target
    OutputBoth,
    /// `&>>`
    AppendBoth,
    /// `>&N` / `<&N` (descriptor duplication, no file)
    Duplicate,
    /// `<<` / `<<-`; the target is the delimiter, the body is in `heredoc`
    HereDoc,
    /// `<<<`
    HereString,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redirect {
    /// Explicit descriptor (`2>`), if any.
    pub fd: Option<u32>,
    pub kind: RedirectKind,
    /// The file, descriptor, delimiter or here-string word. For a
    /// here-document with an unquoted delimiter (`target.features.quoted`
    /// false), the shell expands the body: the body's expansion features are
    /// added to `target.features` and its substitutions, lexed, to
    /// `target.substitutions`. For `|&`, a synthetic `2>&1` whose target
    /// span is the `|&` itself.
    pub target: Word,
    /// Here-document body as written (after `<<-` tab stripping, before any
    /// expansion), when `kind` is `HereDoc`.
    pub heredoc: Option<String>,
}

/// A simple command: assignments, words, redirections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SimpleCommand {
    /// `VAR=value` words before the program.
    pub assignments: Vec<Word>,
    /// Program first, then its arguments. May be empty (`> file`, `X=1`).
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// The operator before this command (None for the first).
    pub joined_by: Option<Operator>,
    pub span: Span,
}

/// A whole request. `needs_shell` is false only for exactly one simple
/// command with no shell feature at all, which is exec'd without a shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Script {
    pub commands: Vec<SimpleCommand>,
    /// Grouping (`( )`, `{ }`), control flow keywords (`if`, `for`, `while`,
    /// `case`, functions) that the policy cannot follow. Presence is noted so
    /// the policy can refuse them.
    pub unsupported: Vec<(String, Span)>,
    pub needs_shell: bool,
    /// The operator after the last command when nothing follows it: `;`
    /// (harmless) or `&` (the command runs in the background, so the
    /// script needs a shell and leaves a process behind).
    pub terminator: Option<Operator>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum ParseError {
    #[error("unterminated {what} starting at byte {position}")]
    Unterminated { what: &'static str, position: usize },
    #[error("unexpected `{token}` at byte {position}")]
    Unexpected { token: String, position: usize },
    #[error("nesting deeper than {limit} levels at byte {position}")]
    TooDeep { limit: usize, position: usize },
    #[error("empty command")]
    Empty,
}

impl ParseError {
    pub fn position(&self) -> Option<usize> {
        match self {
            ParseError::Unterminated { position, .. }
            | ParseError::Unexpected { position, .. }
            | ParseError::TooDeep { position, .. } => Some(*position),
            ParseError::Empty => None,
        }
    }
}

/// How deep substitutions and `${...}` expansions may nest before lexing
/// gives up: deeper input is adversarial, and the limit bounds recursion.
pub const MAX_DEPTH: usize = 32;

/// Lexes one request string.
///
/// Bash syntax is the reference: a construct bash accepts either lexes here
/// or is listed in [`Script::unsupported`]; what bash rejects is an error.
pub fn lex(input: &str) -> Result<Script, ParseError> {
    let mut lexer = Lexer {
        root: input,
        src: input.as_bytes(),
        map: None,
        pos: 0,
        end: input.len(),
        depth: 0,
    };
    let script = lexer.script(Term::Eof)?;
    if script.commands.is_empty() && script.unsupported.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(script)
}

/// Whether any feature other than quoting is set: such a word differs from
/// its `value` at run time, so it needs a shell.
pub fn expands(f: &Features) -> bool {
    f.command_substitution
        || f.process_substitution
        || f.parameter_expansion
        || f.arithmetic
        || f.glob
        || f.brace
        || f.tilde
}

/// Where a script being lexed ends.
#[derive(Clone, Copy)]
enum Term {
    /// At the end of the text.
    Eof,
    /// At an unmatched `)`; `what` and `open` name the construct for the
    /// error when the text ends first.
    Paren { what: &'static str, open: usize },
}

/// Cursor over the text being lexed. For backtick substitutions `src` is an
/// unescaped copy and `map` sends its byte offsets back to the request, so
/// every span and error position refers to the request string.
struct Lexer<'a> {
    root: &'a str,
    src: &'a [u8],
    map: Option<&'a [usize]>,
    pos: usize,
    /// Scanning stops here (the start of a here-document's delimiter line
    /// while its body is scanned, otherwise the end of `src`).
    end: usize,
    depth: usize,
}

/// A word under construction.
#[derive(Default)]
struct WordBuf {
    value: Vec<u8>,
    features: Features,
    subs: Vec<Script>,
    /// An unquoted `[` was seen; a later unquoted `]` makes a glob.
    bracket: bool,
    /// An unquoted `{` was seen, and then an unquoted `,` or `..`: a later
    /// unquoted `}` makes a brace expansion. Deliberately looser than bash's
    /// matching (bash keeps looking past a `}` that closes no list, as in
    /// `{a}b,c}`), so an expansion is never missed.
    brace_open: bool,
    brace_sep: bool,
}

#[derive(Default)]
struct Cmd {
    assignments: Vec<Word>,
    words: Vec<Word>,
    redirects: Vec<Redirect>,
    start: Option<usize>,
    end: usize,
}

impl Cmd {
    fn is_empty(&self) -> bool {
        self.assignments.is_empty() && self.words.is_empty() && self.redirects.is_empty()
    }

    fn touch(&mut self, span: Span) {
        if self.start.is_none() {
            self.start = Some(span.start);
        }
        self.end = self.end.max(span.end);
    }
}

/// A here-document whose body starts after the next newline token.
struct PendingDoc {
    command: usize,
    redirect: usize,
    delimiter: Vec<u8>,
    strip_tabs: bool,
    quoted: bool,
    position: usize,
}

/// Open grouping constructs, innermost last.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Paren,
    Brace,
    Case,
}

/// State of one script (the request, or one substitution's contents).
#[derive(Default)]
struct Builder {
    commands: Vec<SimpleCommand>,
    unsupported: Vec<(String, Span)>,
    cur: Cmd,
    /// The operator seen before `cur`.
    pending_op: Option<Operator>,
    /// A `&&`, `||` or `|` still waiting for its right-hand command.
    need: Option<(&'static str, usize)>,
    /// `cur` follows a keyword or closed group, so an operator right after
    /// it is not a dangling one (`fi && ls`, `(ls) | wc`).
    after_keyword: bool,
    /// The last operator when no command followed it (`ls &`, `ls;`).
    last_op: Option<Operator>,
    heredocs: Vec<PendingDoc>,
    open: Vec<(Open, usize)>,
    /// The next word is a function name (after `function`).
    fn_name: bool,
}

impl Builder {
    /// A keyword, group or closing bracket took the place of a command.
    fn keyword_seen(&mut self) {
        self.after_keyword = true;
        self.need = None;
        self.last_op = None;
    }
}

const KEYWORD_OPENERS: &[&str] = &[
    "if", "for", "while", "until", "case", "select", "function", "coproc", "!", "[[",
];
const KEYWORD_OTHERS: &[&str] = &[
    "then", "elif", "else", "fi", "do", "done", "esac", "in", "]]",
];

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `NAME=` or `NAME+=` at the start of the word as written.
fn is_assignment(raw: &[u8]) -> bool {
    if !raw.first().is_some_and(|&b| is_name_start(b)) {
        return false;
    }
    let n = raw.iter().take_while(|&&b| is_name_byte(b)).count();
    matches!(&raw[n..], [b'=', ..] | [b'+', b'=', ..])
}

fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn hex_value(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

impl Lexer<'_> {
    fn at(&self, i: usize) -> Option<u8> {
        if i < self.end {
            self.src.get(i).copied()
        } else {
            None
        }
    }

    fn peek(&self) -> Option<u8> {
        self.at(self.pos)
    }

    /// Request offset of local byte `i`.
    fn orig(&self, i: usize) -> usize {
        match self.map {
            None => i,
            Some(m) => m.get(i).or(m.last()).copied().unwrap_or(0),
        }
    }

    /// Request offset just past local byte `i - 1`.
    fn orig_end(&self, i: usize) -> usize {
        match self.map {
            None => i,
            Some(_) if i == 0 => self.orig(0),
            Some(_) => self.orig(i - 1) + 1,
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        let s = self.orig(start);
        Span {
            start: s,
            end: self.orig_end(end).max(s),
        }
    }

    fn raw(&self, span: Span) -> String {
        self.root
            .get(span.start..span.end)
            .unwrap_or_default()
            .to_string()
    }

    fn unterminated(&self, what: &'static str, at: usize) -> ParseError {
        ParseError::Unterminated {
            what,
            position: self.orig(at),
        }
    }

    fn unexpected(&self, at: usize) -> ParseError {
        let token = match self.peek_token(at) {
            "" => "end of input".to_string(),
            "word" => {
                // Quote the offending word itself (briefly) so the message
                // names what to change.
                let rest = self.src.get(at..self.end).unwrap_or_default();
                let rest = &rest[..rest.len().min(64)];
                String::from_utf8_lossy(rest)
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .take(16)
                    .collect()
            }
            t => t.to_string(),
        };
        ParseError::Unexpected {
            token,
            position: self.orig(at),
        }
    }

    /// The operator (or character) starting at `at`, for messages.
    fn peek_token(&self, at: usize) -> &'static str {
        const OPS: &[&str] = &[
            ";;", "&&", "||", "|&", "&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&",
            ";", "&", "|", "<", ">", "(", ")", "\n",
        ];
        let rest = self.src.get(at..self.end).unwrap_or_default();
        match OPS.iter().find(|op| rest.starts_with(op.as_bytes())) {
            Some(&"\n") => "newline",
            Some(op) => op,
            None if rest.is_empty() => "",
            None => "word",
        }
    }

    fn enter(&mut self, at: usize) -> Result<(), ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::TooDeep {
                limit: MAX_DEPTH,
                position: self.orig(at),
            });
        }
        self.depth += 1;
        Ok(())
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'\\') if self.at(self.pos + 1) == Some(b'\n') => self.pos += 2,
                _ => return,
            }
        }
    }

    /// Lexes commands until `term`. Consumes the closing `)` of a `Paren`.
    fn script(&mut self, term: Term) -> Result<Script, ParseError> {
        let mut b = Builder::default();
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else {
                if let Term::Paren { what, open } = term {
                    return Err(ParseError::Unterminated {
                        what,
                        position: self.orig(open),
                    });
                }
                break;
            };
            let p = self.pos;
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.finish(&mut b);
                    if b.need.is_none() && !b.commands.is_empty() {
                        b.pending_op = Some(Operator::Seq);
                    }
                    self.read_heredocs(&mut b)?;
                }
                b'#' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                b';' => {
                    if self.at(p + 1) == Some(b';') || self.at(p + 1) == Some(b'&') {
                        // `;;`, `;&`, `;;&` end a case branch.
                        if b.open.last().map(|o| o.0) != Some(Open::Case) {
                            return Err(self.unexpected(p));
                        }
                        self.pos += 2;
                        if self.peek() == Some(b'&') {
                            self.pos += 1;
                        }
                        self.finish(&mut b);
                        b.keyword_seen();
                        b.pending_op = Some(Operator::Seq);
                        continue;
                    }
                    self.pos += 1;
                    self.operator(&mut b, Operator::Seq, ";", p)?;
                }
                b'&' => match self.at(p + 1) {
                    Some(b'&') => {
                        self.pos += 2;
                        self.operator(&mut b, Operator::And, "&&", p)?;
                    }
                    Some(b'>') => self.redirect(&mut b, None, p)?,
                    _ => {
                        self.pos += 1;
                        self.operator(&mut b, Operator::Background, "&", p)?;
                    }
                },
                b'|' => match self.at(p + 1) {
                    Some(b'|') => {
                        self.pos += 2;
                        self.operator(&mut b, Operator::Or, "||", p)?;
                    }
                    Some(b'&') => {
                        self.pos += 2;
                        if !b.cur.is_empty() {
                            // `a |& b` is `a 2>&1 | b`: record the implied
                            // duplication so stderr's destination is visible.
                            let span = self.span(p, p + 2);
                            b.cur.redirects.push(Redirect {
                                fd: Some(2),
                                kind: RedirectKind::Duplicate,
                                target: Word {
                                    value: "1".to_string(),
                                    raw: self.raw(span),
                                    span,
                                    features: Features::default(),
                                    substitutions: Vec::new(),
                                },
                                heredoc: None,
                            });
                        }
                        self.operator(&mut b, Operator::Pipe, "|&", p)?;
                    }
                    _ => {
                        self.pos += 1;
                        self.operator(&mut b, Operator::Pipe, "|", p)?;
                    }
                },
                b'<' | b'>' if self.at(p + 1) != Some(b'(') => self.redirect(&mut b, None, p)?,
                b'(' => self.open_paren(&mut b, p)?,
                b')' => match b.open.last().map(|o| o.0) {
                    Some(Open::Paren) => {
                        self.pos += 1;
                        b.open.pop();
                        self.finish(&mut b);
                        b.keyword_seen();
                    }
                    Some(Open::Case) => {
                        // The end of a case pattern; what precedes it stays
                        // a command so its substitutions are still seen.
                        self.pos += 1;
                        self.finish(&mut b);
                        b.keyword_seen();
                        b.pending_op = Some(Operator::Seq);
                    }
                    _ => {
                        if matches!(term, Term::Paren { .. }) && b.open.is_empty() {
                            self.pos += 1;
                            break;
                        }
                        return Err(self.unexpected(p));
                    }
                },
                b'0'..=b'9' => {
                    let mut q = p;
                    while self.at(q).is_some_and(|c| c.is_ascii_digit()) {
                        q += 1;
                    }
                    let fd = std::str::from_utf8(&self.src[p..q])
                        .ok()
                        .and_then(|s| s.parse::<u32>().ok());
                    match (fd, self.at(q), self.at(q + 1)) {
                        (Some(fd), Some(b'<' | b'>'), next) if next != Some(b'(') => {
                            self.pos = q;
                            self.redirect(&mut b, Some(fd), p)?;
                        }
                        _ => self.word(&mut b)?,
                    }
                }
                _ => self.word(&mut b)?,
            }
        }
        self.finish(&mut b);
        if let Some((token, position)) = b.need {
            return Err(ParseError::Unexpected {
                token: token.to_string(),
                position,
            });
        }
        if let Some(&(open, position)) = b.open.last() {
            let what = match open {
                Open::Paren => "group `(`",
                Open::Brace => "group `{`",
                Open::Case => "case",
            };
            return Err(ParseError::Unterminated { what, position });
        }
        if let Some(doc) = b.heredocs.first() {
            return Err(ParseError::Unterminated {
                what: "here-document",
                position: doc.position,
            });
        }
        let terminator = b.last_op;
        let needs_shell = match b.commands.as_slice() {
            [c] => {
                !b.unsupported.is_empty()
                    || terminator == Some(Operator::Background)
                    || !c.assignments.is_empty()
                    || !c.redirects.is_empty()
                    || c.words.is_empty()
                    || c.words
                        .iter()
                        .any(|w| expands(&w.features) || !w.substitutions.is_empty())
            }
            _ => true,
        };
        Ok(Script {
            commands: b.commands,
            unsupported: b.unsupported,
            needs_shell,
            terminator,
        })
    }

    /// Ends the current simple command, if it has anything.
    fn finish(&self, b: &mut Builder) {
        if b.cur.is_empty() {
            b.cur.start = None;
            return;
        }
        let cmd = std::mem::take(&mut b.cur);
        let start = cmd.start.unwrap_or(cmd.end);
        // A command after a keyword or a closed group with no operator of
        // its own (`then ls`, `a) ls`) follows in sequence.
        let joined_by = if b.commands.is_empty() {
            None
        } else {
            Some(b.pending_op.unwrap_or(Operator::Seq))
        };
        b.commands.push(SimpleCommand {
            assignments: cmd.assignments,
            words: cmd.words,
            redirects: cmd.redirects,
            joined_by,
            span: Span {
                start,
                end: cmd.end,
            },
        });
        b.need = None;
        b.after_keyword = false;
        b.last_op = None;
    }

    fn operator(
        &self,
        b: &mut Builder,
        op: Operator,
        token: &'static str,
        p: usize,
    ) -> Result<(), ParseError> {
        if b.cur.is_empty() && !b.after_keyword {
            return Err(ParseError::Unexpected {
                token: token.to_string(),
                position: self.orig(p),
            });
        }
        self.finish(b);
        b.after_keyword = false;
        b.pending_op = Some(op);
        b.last_op = Some(op);
        b.need = match op {
            Operator::And | Operator::Or | Operator::Pipe => Some((token, self.orig(p))),
            Operator::Seq | Operator::Background => None,
        };
        Ok(())
    }

    fn unsupported(&self, b: &mut Builder, what: &str, start: usize, end: usize) {
        let span = self.span(start, end);
        b.unsupported.push((what.to_string(), span));
        b.keyword_seen();
    }

    fn open_paren(&mut self, b: &mut Builder, p: usize) -> Result<(), ParseError> {
        if b.cur.is_empty() {
            if self.at(p + 1) == Some(b'(') {
                return self.arith_command(b, p);
            }
            self.pos += 1;
            self.unsupported(b, "(", p, p + 1);
            b.open.push((Open::Paren, self.orig(p)));
            return Ok(());
        }
        // `name ()` starts a function definition.
        if b.cur.words.len() == 1 && b.cur.assignments.is_empty() && b.cur.redirects.is_empty() {
            let mut q = p + 1;
            while matches!(self.at(q), Some(b' ' | b'\t')) {
                q += 1;
            }
            if self.at(q) == Some(b')') {
                let start = b.cur.words.first().map_or(self.orig(p), |w| w.span.start);
                b.cur = Cmd::default();
                self.pos = q + 1;
                let span = Span {
                    start,
                    end: self.orig_end(q + 1),
                };
                b.unsupported.push(("function".to_string(), span));
                b.keyword_seen();
                return Ok(());
            }
        }
        if !b.unsupported.is_empty() {
            // Already unsupported (`[[ ( a ) ]]`): keep lexing leniently.
            self.pos += 1;
            b.open.push((Open::Paren, self.orig(p)));
            return Ok(());
        }
        Err(self.unexpected(p))
    }

    /// `(( expr ))` in command position: an arithmetic command. Its text is
    /// kept as one word so substitutions inside it remain visible.
    fn arith_command(&mut self, b: &mut Builder, p: usize) -> Result<(), ParseError> {
        self.unsupported(b, "((", p, p + 2);
        let mut w = WordBuf::default();
        self.arithmetic(&mut w, p, p + 2, false)?;
        w.value = self.src[p..self.pos].to_vec();
        let word = self.finish_word(w, p);
        b.cur.touch(word.span);
        b.cur.words.push(word);
        Ok(())
    }

    fn word(&mut self, b: &mut Builder) -> Result<(), ParseError> {
        let start = self.pos;
        let w = self.scan_word()?;
        if b.fn_name {
            // `function name [()]`: the name is not a command.
            b.fn_name = false;
            let mut q = self.pos;
            while matches!(self.at(q), Some(b' ' | b'\t')) {
                q += 1;
            }
            if self.at(q) == Some(b'(') {
                let mut r = q + 1;
                while matches!(self.at(r), Some(b' ' | b'\t')) {
                    r += 1;
                }
                if self.at(r) == Some(b')') {
                    self.pos = r + 1;
                }
            }
            return Ok(());
        }
        let command_position = b.cur.is_empty();
        if command_position && !w.features.quoted && !expands(&w.features) {
            let v = w.value.as_str();
            let end = self.pos;
            match v {
                "{" => {
                    self.unsupported(b, "{", start, end);
                    b.open.push((Open::Brace, self.orig(start)));
                    return Ok(());
                }
                "}" => {
                    if b.open.last().map(|o| o.0) == Some(Open::Brace) {
                        b.open.pop();
                        b.keyword_seen();
                    } else {
                        self.unsupported(b, "}", start, end);
                    }
                    return Ok(());
                }
                "esac" if b.open.last().map(|o| o.0) == Some(Open::Case) => {
                    b.open.pop();
                    b.keyword_seen();
                    return Ok(());
                }
                _ => {}
            }
            if KEYWORD_OPENERS.contains(&v) {
                self.unsupported(b, v, start, end);
                match v {
                    "case" => b.open.push((Open::Case, self.orig(start))),
                    "function" => b.fn_name = true,
                    _ => {}
                }
                return Ok(());
            }
            if KEYWORD_OTHERS.contains(&v) {
                // Only a stray one needs recording: with its opener, the
                // construct is already listed.
                if b.unsupported.is_empty() {
                    self.unsupported(b, v, start, end);
                } else {
                    b.keyword_seen();
                }
                return Ok(());
            }
        }
        b.cur.touch(w.span);
        if b.cur.words.is_empty() && is_assignment(w.raw.as_bytes()) {
            b.cur.assignments.push(w);
        } else {
            b.cur.words.push(w);
        }
        Ok(())
    }

    fn redirect(
        &mut self,
        b: &mut Builder,
        fd: Option<u32>,
        start: usize,
    ) -> Result<(), ParseError> {
        #[derive(PartialEq)]
        enum K {
            Plain(RedirectKind),
            DupIn,
            DupOut,
            Doc { strip: bool },
        }
        let p = self.pos;
        let (k, len) = match (self.at(p), self.at(p + 1), self.at(p + 2)) {
            (Some(b'&'), _, Some(b'>')) => (K::Plain(RedirectKind::AppendBoth), 3),
            (Some(b'&'), _, _) => (K::Plain(RedirectKind::OutputBoth), 2),
            (Some(b'<'), Some(b'<'), Some(b'<')) => (K::Plain(RedirectKind::HereString), 3),
            (Some(b'<'), Some(b'<'), Some(b'-')) => (K::Doc { strip: true }, 3),
            (Some(b'<'), Some(b'<'), _) => (K::Doc { strip: false }, 2),
            (Some(b'<'), Some(b'>'), _) => (K::Plain(RedirectKind::ReadWrite), 2),
            (Some(b'<'), Some(b'&'), _) => (K::DupIn, 2),
            (Some(b'<'), _, _) => (K::Plain(RedirectKind::Input), 1),
            (Some(b'>'), Some(b'>'), _) => (K::Plain(RedirectKind::Append), 2),
            (Some(b'>'), Some(b'|'), _) => (K::Plain(RedirectKind::Output), 2),
            (Some(b'>'), Some(b'&'), _) => (K::DupOut, 2),
            _ => (K::Plain(RedirectKind::Output), 1),
        };
        self.pos = p + len;
        self.skip_blanks();
        let t = self.pos;
        let target_ok = match self.peek() {
            // A `#` here starts a comment, as at any word start.
            None | Some(b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'#') => false,
            Some(b'<' | b'>') => self.at(t + 1) == Some(b'('),
            Some(c) if c.is_ascii_digit() => {
                // Bash reads `> 2>x` as `>` missing its target: the digits
                // are the next redirection's descriptor.
                let mut q = t;
                while self.at(q).is_some_and(|c| c.is_ascii_digit()) {
                    q += 1;
                }
                !matches!(self.at(q), Some(b'<' | b'>')) || self.at(q + 1) == Some(b'(')
            }
            Some(_) => true,
        };
        if !target_ok {
            return Err(self.unexpected(t));
        }
        let target = self.scan_word()?;
        // `N`, `-` (close) or `N-` (move) name a descriptor, not a file.
        let digits = target.value.strip_suffix('-').unwrap_or(&target.value);
        let descriptor = !expands(&target.features)
            && (digits.is_empty() || digits.bytes().all(|c| c.is_ascii_digit()))
            && !target.value.is_empty();
        let kind = match k {
            K::Plain(kind) => kind,
            K::Doc { .. } => RedirectKind::HereDoc,
            _ if descriptor => RedirectKind::Duplicate,
            // `>&file` is `&>file`; `2>&file` and `<&file` use the file.
            K::DupOut if fd.is_none() => RedirectKind::OutputBoth,
            K::DupOut => RedirectKind::Output,
            K::DupIn => RedirectKind::Input,
        };
        if let K::Doc { strip } = k {
            b.heredocs.push(PendingDoc {
                command: b.commands.len(),
                redirect: b.cur.redirects.len(),
                delimiter: target.value.as_bytes().to_vec(),
                strip_tabs: strip,
                quoted: target.features.quoted,
                position: self.orig(start),
            });
        }
        let span = self.span(start, self.pos);
        b.cur.touch(span);
        b.cur.redirects.push(Redirect {
            fd,
            kind,
            target,
            heredoc: None,
        });
        Ok(())
    }

    /// Reads the bodies of the here-documents of the line just ended.
    fn read_heredocs(&mut self, b: &mut Builder) -> Result<(), ParseError> {
        for doc in std::mem::take(&mut b.heredocs) {
            let body_start = self.pos;
            let mut line = self.pos;
            let (body_end, next) = loop {
                if line >= self.end {
                    return Err(ParseError::Unterminated {
                        what: "here-document",
                        position: doc.position,
                    });
                }
                let (matches, line_end) = self.delimiter_line(line, &doc);
                if matches {
                    break (line, (line_end + 1).min(self.end));
                }
                line = line_end + 1;
            };
            let region = &self.src[body_start..body_end];
            let body = if doc.strip_tabs {
                let mut out = Vec::with_capacity(region.len());
                for l in region.split_inclusive(|&c| c == b'\n') {
                    let tabs = l.iter().take_while(|&&c| c == b'\t').count();
                    out.extend_from_slice(&l[tabs..]);
                }
                into_string(out)
            } else {
                into_string(region.to_vec())
            };
            let mut w = WordBuf::default();
            if !doc.quoted {
                // An unquoted body is expanded like a double-quoted string
                // (without `"` being special): its substitutions run.
                let saved_end = self.end;
                self.end = body_end;
                self.pos = body_start;
                let scanned = self.heredoc_expansions(&mut w);
                self.end = saved_end;
                scanned?;
            }
            self.pos = next;
            let redirect = b
                .commands
                .get_mut(doc.command)
                .and_then(|c| c.redirects.get_mut(doc.redirect));
            if let Some(r) = redirect {
                r.heredoc = Some(body);
                let f = &mut r.target.features;
                f.command_substitution |= w.features.command_substitution;
                f.parameter_expansion |= w.features.parameter_expansion;
                f.arithmetic |= w.features.arithmetic;
                r.target.substitutions.append(&mut w.subs);
            }
        }
        Ok(())
    }

    /// Whether the line at `line` is the here-document's delimiter, and
    /// where it ends. With an unquoted delimiter bash joins `\`-newline
    /// continued lines before comparing (`EO\` + `F` ends the body), so
    /// this does too: otherwise commands bash runs after the body would be
    /// hidden inside it here. Compared in place, without allocating.
    fn delimiter_line(&self, line: usize, doc: &PendingDoc) -> (bool, usize) {
        let delim = &doc.delimiter[..];
        let mut i = line;
        if doc.strip_tabs {
            while self.at(i) == Some(b'\t') {
                i += 1;
            }
        }
        let rest = self.src.get(i..self.end).unwrap_or_default();
        let physical = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
        let text = &rest[..physical];
        if doc.quoted || !text.contains(&b'\\') {
            // The common case: one physical line, compared as a slice.
            return (text == delim, i + physical);
        }
        let mut matched = 0usize;
        let mut same = true;
        let mut push = |c: u8| {
            if same && delim.get(matched) == Some(&c) {
                matched += 1;
            } else {
                same = false;
            }
        };
        loop {
            match self.at(i) {
                None | Some(b'\n') => break,
                Some(b'\\') if !doc.quoted => match self.at(i + 1) {
                    Some(b'\n') => i += 2,
                    Some(c) => {
                        push(b'\\');
                        push(c);
                        i += 2;
                    }
                    None => {
                        push(b'\\');
                        i += 1;
                    }
                },
                Some(c) => {
                    push(c);
                    i += 1;
                }
            }
        }
        (same && matched == delim.len(), i)
    }

    fn heredoc_expansions(&mut self, w: &mut WordBuf) -> Result<(), ParseError> {
        while let Some(c) = self.peek() {
            match c {
                b'\\' => self.pos = (self.pos + 2).min(self.end),
                b'$' => self.dollar(w, true)?,
                b'`' => self.backtick(w, true)?,
                _ => self.pos += 1,
            }
        }
        Ok(())
    }

    fn finish_word(&self, w: WordBuf, start: usize) -> Word {
        let span = self.span(start, self.pos);
        Word {
            value: into_string(w.value),
            raw: self.raw(span),
            span,
            features: w.features,
            substitutions: w.subs,
        }
    }

    /// Scans one word starting at a byte that is not a blank or operator.
    fn scan_word(&mut self) -> Result<Word, ParseError> {
        let start = self.pos;
        let mut w = WordBuf::default();
        while let Some(c) = self.peek() {
            let p = self.pos;
            match c {
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' => break,
                b'<' | b'>' => {
                    if self.at(p + 1) != Some(b'(') {
                        break;
                    }
                    self.process_substitution(&mut w)?;
                }
                b'\'' => {
                    w.features.quoted = true;
                    let close = self.src[p + 1..self.end].iter().position(|&c| c == b'\'');
                    let Some(len) = close else {
                        return Err(self.unterminated("single quote", p));
                    };
                    w.value.extend_from_slice(&self.src[p + 1..p + 1 + len]);
                    self.pos = p + len + 2;
                }
                b'"' => {
                    w.features.quoted = true;
                    self.pos += 1;
                    self.double_quote(&mut w, p)?;
                }
                b'\\' => match self.at(p + 1) {
                    Some(b'\n') => self.pos += 2,
                    Some(c) => {
                        w.features.quoted = true;
                        w.value.push(c);
                        self.pos += 2;
                    }
                    None => {
                        w.value.push(b'\\');
                        self.pos += 1;
                    }
                },
                b'$' => self.dollar(&mut w, false)?,
                b'`' => self.backtick(&mut w, false)?,
                _ => {
                    match c {
                        b'*' | b'?' => w.features.glob = true,
                        b'[' => w.bracket = true,
                        b']' if w.bracket => w.features.glob = true,
                        b'{' => w.brace_open = true,
                        b',' if w.brace_open => w.brace_sep = true,
                        b'.' if w.brace_open && self.at(p + 1) == Some(b'.') => w.brace_sep = true,
                        b'}' if w.brace_sep => w.features.brace = true,
                        // Also after a removed line continuation (`X=\<newline>~`),
                        // hence the value rather than the source byte.
                        b'~' if w.value.is_empty()
                            || matches!(w.value.last(), Some(b'=' | b':')) =>
                        {
                            w.features.tilde = true
                        }
                        _ => {}
                    }
                    w.value.push(c);
                    self.pos += 1;
                }
            }
        }
        if self.pos == start {
            return Err(self.unexpected(start));
        }
        Ok(self.finish_word(w, start))
    }

    /// After the opening `"` (at `open`), through the closing one.
    fn double_quote(&mut self, w: &mut WordBuf, open: usize) -> Result<(), ParseError> {
        loop {
            let Some(c) = self.peek() else {
                return Err(self.unterminated("double quote", open));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(());
                }
                b'\\' => match self.at(self.pos + 1) {
                    Some(b'\n') => self.pos += 2,
                    Some(e @ (b'$' | b'`' | b'"' | b'\\')) => {
                        w.value.push(e);
                        self.pos += 2;
                    }
                    _ => {
                        w.value.push(b'\\');
                        self.pos += 1;
                    }
                },
                b'$' => self.dollar(w, true)?,
                b'`' => self.backtick(w, true)?,
                _ => {
                    w.value.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// At a `$`. Expansions keep their text in the value.
    fn dollar(&mut self, w: &mut WordBuf, in_quotes: bool) -> Result<(), ParseError> {
        let start = self.pos;
        match self.at(start + 1) {
            Some(b'(') if self.at(start + 2) == Some(b'(') => {
                let mark = w.value.len();
                self.arithmetic(w, start, start + 3, false)?;
                w.value.truncate(mark);
            }
            Some(b'[') => {
                // `$[...]`: bash's old spelling of `$((...))`.
                let mark = w.value.len();
                self.arithmetic(w, start, start + 2, true)?;
                w.value.truncate(mark);
            }
            Some(b'(') => {
                self.enter(start)?;
                self.pos = start + 2;
                let inner = self.script(Term::Paren {
                    what: "command substitution",
                    open: start,
                })?;
                self.depth -= 1;
                w.features.command_substitution = true;
                w.subs.push(inner);
            }
            Some(b'{') => {
                let mark = w.value.len();
                self.parameter_braces(w, start, in_quotes)?;
                w.value.truncate(mark);
            }
            Some(b'\'') if !in_quotes => return self.ansi_c(w, start),
            Some(b'"') if !in_quotes => {
                w.features.quoted = true;
                self.pos = start + 2;
                return self.double_quote(w, start + 1);
            }
            Some(c) if is_name_start(c) => {
                self.pos = start + 2;
                while self.peek().is_some_and(is_name_byte) {
                    self.pos += 1;
                }
                w.features.parameter_expansion = true;
            }
            Some(c) if c.is_ascii_digit() || b"@*#?-$!".contains(&c) => {
                self.pos = start + 2;
                w.features.parameter_expansion = true;
            }
            Some(b'\\') if self.at(start + 2) == Some(b'\n') => {
                // Bash removes the continuation first (`$\<newline>(id)` is `$(id)`);
                // refusing is simpler than re-deriving every `$` form.
                return Err(ParseError::Unexpected {
                    token: "\\<newline>".to_string(),
                    position: self.orig(start + 1),
                });
            }
            _ => {
                w.value.push(b'$');
                self.pos = start + 1;
                return Ok(());
            }
        }
        w.value.extend_from_slice(&self.src[start..self.pos]);
        Ok(())
    }

    /// `$((...))` or `((...))` from `body` to the closing `))`, or with
    /// `bracket`, `$[...]` to the closing `]`.
    fn arithmetic(
        &mut self,
        w: &mut WordBuf,
        start: usize,
        body: usize,
        bracket: bool,
    ) -> Result<(), ParseError> {
        self.enter(start)?;
        self.pos = body;
        let mut parens = 0usize;
        let mut brackets = 0usize;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.unterminated("arithmetic expansion", start));
            };
            let p = self.pos;
            match c {
                b'[' => {
                    brackets += 1;
                    self.pos += 1;
                }
                b']' if bracket && brackets == 0 => {
                    self.pos += 1;
                    break;
                }
                b']' => {
                    brackets = brackets.saturating_sub(1);
                    self.pos += 1;
                }
                b'(' | b')' if bracket => self.pos += 1,
                b'(' => {
                    parens += 1;
                    self.pos += 1;
                }
                b')' if parens > 0 => {
                    parens -= 1;
                    self.pos += 1;
                }
                b')' if self.at(p + 1) == Some(b')') => {
                    self.pos += 2;
                    break;
                }
                b')' => return Err(self.unexpected(p)),
                b'\\' => self.pos = (p + 2).min(self.end),
                b'\'' => {
                    let close = self.src[p + 1..self.end].iter().position(|&c| c == b'\'');
                    let Some(len) = close else {
                        return Err(self.unterminated("single quote", p));
                    };
                    self.pos = p + len + 2;
                }
                b'"' => {
                    self.pos += 1;
                    self.double_quote(w, p)?;
                }
                b'$' => self.dollar(w, true)?,
                b'`' => self.backtick(w, true)?,
                _ => self.pos += 1,
            }
        }
        self.depth -= 1;
        w.features.arithmetic = true;
        Ok(())
    }

    /// `${...}` with nested braces, quotes and expansions.
    fn parameter_braces(
        &mut self,
        w: &mut WordBuf,
        start: usize,
        in_quotes: bool,
    ) -> Result<(), ParseError> {
        self.enter(start)?;
        self.pos = start + 2;
        let mut braces = 0usize;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.unterminated("parameter expansion", start));
            };
            let p = self.pos;
            match c {
                b'{' => {
                    braces += 1;
                    self.pos += 1;
                }
                b'}' if braces > 0 => {
                    braces -= 1;
                    self.pos += 1;
                }
                b'}' => {
                    self.pos += 1;
                    break;
                }
                b'\\' => self.pos = (p + 2).min(self.end),
                b'\'' if !in_quotes => {
                    let close = self.src[p + 1..self.end].iter().position(|&c| c == b'\'');
                    let Some(len) = close else {
                        return Err(self.unterminated("single quote", p));
                    };
                    self.pos = p + len + 2;
                }
                b'"' => {
                    self.pos += 1;
                    self.double_quote(w, p)?;
                }
                b'$' => self.dollar(w, in_quotes)?,
                b'`' => self.backtick(w, in_quotes)?,
                _ => self.pos += 1,
            }
        }
        self.depth -= 1;
        w.features.parameter_expansion = true;
        Ok(())
    }

    /// `$'...'`: decodes the escapes into the value. Bash cuts the string
    /// at a NUL, and so does this.
    fn ansi_c(&mut self, w: &mut WordBuf, start: usize) -> Result<(), ParseError> {
        w.features.quoted = true;
        self.pos = start + 2;
        let mut cut = false;
        let mut out = [0u8; 4];
        loop {
            let Some(c) = self.peek() else {
                return Err(self.unterminated("ANSI-C quote", start));
            };
            self.pos += 1;
            let decoded: &[u8] = match c {
                b'\'' => return Ok(()),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.unterminated("ANSI-C quote", start));
                    };
                    self.pos += 1;
                    let simple = match e {
                        b'n' => Some(b'\n'),
                        b't' => Some(b'\t'),
                        b'r' => Some(b'\r'),
                        b'a' => Some(7),
                        b'b' => Some(8),
                        b'e' | b'E' => Some(27),
                        b'f' => Some(12),
                        b'v' => Some(11),
                        b'\\' | b'\'' | b'"' | b'?' => Some(e),
                        b'c' => {
                            let ctl = self.peek().map_or(0, |x| x & 0x1f);
                            if self.peek().is_some() {
                                self.pos += 1;
                            }
                            Some(ctl)
                        }
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.peek() {
                                    Some(d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.pos += 1;
                                    }
                                    _ => break,
                                }
                            }
                            Some((v & 0xff) as u8)
                        }
                        _ => None,
                    };
                    match (simple, e) {
                        (Some(byte), _) => {
                            out[0] = byte;
                            &out[..1]
                        }
                        (None, b'x' | b'u' | b'U') => {
                            let max = match e {
                                b'x' => 2,
                                b'u' => 4,
                                _ => 8,
                            };
                            let mut v = 0u32;
                            let mut n = 0;
                            while n < max {
                                match self.peek().and_then(hex_value) {
                                    Some(d) => {
                                        v = v * 16 + d;
                                        self.pos += 1;
                                        n += 1;
                                    }
                                    None => break,
                                }
                            }
                            if n == 0 {
                                out[0] = b'\\';
                                out[1] = e;
                                &out[..2]
                            } else if e == b'x' {
                                out[0] = v as u8;
                                &out[..1]
                            } else {
                                match char::from_u32(v) {
                                    Some(ch) => ch.encode_utf8(&mut out).as_bytes(),
                                    None => &[],
                                }
                            }
                        }
                        (None, _) => {
                            out[0] = b'\\';
                            out[1] = e;
                            &out[..2]
                        }
                    }
                }
                _ => {
                    out[0] = c;
                    &out[..1]
                }
            };
            if decoded.contains(&0) {
                cut = true;
            }
            if !cut {
                w.value.extend_from_slice(decoded);
            }
        }
    }

    /// A backquoted substitution: its text is unescaped (`\``, `\\`, `\$`,
    /// and `\"` inside double quotes) and lexed as a script of its own.
    fn backtick(&mut self, w: &mut WordBuf, in_quotes: bool) -> Result<(), ParseError> {
        let open = self.pos;
        self.pos += 1;
        let mut inner = Vec::new();
        let mut map = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.unterminated("backquote", open));
            };
            let p = self.pos;
            match c {
                b'`' => break,
                b'\\' => match self.at(p + 1) {
                    Some(e @ (b'`' | b'\\' | b'$')) => {
                        inner.push(e);
                        map.push(self.orig(p + 1));
                        self.pos += 2;
                    }
                    Some(b'"') if in_quotes => {
                        inner.push(b'"');
                        map.push(self.orig(p + 1));
                        self.pos += 2;
                    }
                    _ => {
                        inner.push(b'\\');
                        map.push(self.orig(p));
                        self.pos += 1;
                    }
                },
                _ => {
                    inner.push(c);
                    map.push(self.orig(p));
                    self.pos += 1;
                }
            }
        }
        map.push(self.orig(self.pos));
        self.pos += 1;
        self.enter(open)?;
        let text = match std::str::from_utf8(&inner) {
            Ok(t) => t,
            // Only ASCII backslashes were dropped, so this cannot happen;
            // refusing is the safe answer if it ever does.
            Err(_) => return Err(self.unterminated("backquote", open)),
        };
        let mut sub = Lexer {
            root: self.root,
            src: text.as_bytes(),
            map: Some(&map),
            pos: 0,
            end: text.len(),
            depth: self.depth,
        };
        let script = sub.script(Term::Eof)?;
        self.depth -= 1;
        w.features.command_substitution = true;
        w.subs.push(script);
        w.value.extend_from_slice(&self.src[open..self.pos]);
        Ok(())
    }

    /// `<(...)` or `>(...)` at the current position.
    fn process_substitution(&mut self, w: &mut WordBuf) -> Result<(), ParseError> {
        let start = self.pos;
        self.enter(start)?;
        self.pos = start + 2;
        let inner = self.script(Term::Paren {
            what: "process substitution",
            open: start,
        })?;
        self.depth -= 1;
        w.features.process_substitution = true;
        w.subs.push(inner);
        w.value.extend_from_slice(&self.src[start..self.pos]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(input: &str) -> Vec<String> {
        let s = lex(input).unwrap();
        s.commands
            .iter()
            .flat_map(|c| c.words.iter().map(|w| w.value.clone()))
            .collect()
    }

    #[test]
    fn assignment_shape() {
        assert!(is_assignment(b"A=1"));
        assert!(is_assignment(b"_x9+=y"));
        assert!(is_assignment(b"A="));
        assert!(!is_assignment(b"9A=1"));
        assert!(!is_assignment(b"A+1=2"));
        assert!(!is_assignment(b"=1"));
        assert!(!is_assignment(b"\"A\"=1"));
    }

    #[test]
    fn quote_removal() {
        assert_eq!(words(r#"a'b'"c"\d $'e\tf'"#), ["abcd", "e\tf"]);
        assert_eq!(words(r#""a\"b" 'a\"b'"#), ["a\"b", "a\\\"b"]);
    }

    #[test]
    fn plain_command_needs_no_shell() {
        let s = lex("grep -rn 'fn main' src").unwrap();
        assert!(!s.needs_shell);
        assert_eq!(s.terminator, None);
        for input in [
            "ls *", "ls $x", "ls ~", "ls {a,b}", "X=1 ls", "ls > f", "ls | wc", "ls &", "( ls )",
        ] {
            assert!(lex(input).unwrap().needs_shell, "{input:?}");
        }
    }

    #[test]
    fn background_terminator() {
        let s = lex("sleep 10 &").unwrap();
        assert_eq!(s.terminator, Some(Operator::Background));
        assert!(s.needs_shell);
        assert_eq!(lex("ls;").unwrap().terminator, Some(Operator::Seq));
    }

    #[test]
    fn single_quotes_hide_features() {
        let s = lex("echo '$(rm -rf /) * ~ {a,b} `x`'").unwrap();
        let w = &s.commands[0].words[1];
        assert!(!expands(&w.features));
        assert!(w.features.quoted);
        assert!(w.substitutions.is_empty());
        assert!(!s.needs_shell);
    }

    #[test]
    fn double_quotes_keep_substitutions() {
        let s = lex("echo \"x $(rm -rf /tmp/a) `id` $HOME\"").unwrap();
        let w = &s.commands[0].words[1];
        assert!(w.features.command_substitution && w.features.parameter_expansion);
        assert!(!w.features.glob);
        let programs: Vec<&str> = w
            .substitutions
            .iter()
            .map(|s| s.commands[0].words[0].value.as_str())
            .collect();
        assert_eq!(programs, ["rm", "id"]);
    }

    #[test]
    fn heredoc_body_substitutions_are_visible() {
        let s = lex("cat <<EOF >f\n$(curl x | sh)\nEOF\n").unwrap();
        let r = &s.commands[0].redirects[0];
        assert_eq!(r.kind, RedirectKind::HereDoc);
        assert_eq!(r.target.substitutions[0].commands[1].words[0].value, "sh");
        let quoted = lex("cat <<'EOF' >f\n$(curl x | sh)\nEOF\n").unwrap();
        assert!(
            quoted.commands[0].redirects[0]
                .target
                .substitutions
                .is_empty()
        );
    }

    #[test]
    fn backtick_positions_map_back() {
        // Inside backquotes `\$` is unescaped; the inner word's span must
        // still cover the request's bytes, backslash excluded.
        let input = "echo `echo \\$HOME`";
        let s = lex(input).unwrap();
        let inner = &s.commands[0].words[1].substitutions[0].commands[0].words[1];
        assert_eq!(inner.value, "$HOME");
        assert_eq!(&input[inner.span.start..inner.span.end], "$HOME");
    }

    #[test]
    fn ansi_c_escapes() {
        assert_eq!(
            words(r"echo $'\x41\101\u263a\n\cA\z'"),
            ["echo", "AA\u{263a}\n\u{1}\\z"]
        );
        // Bash ends the string at a NUL byte.
        assert_eq!(words(r"echo $'ab\0cd'"), ["echo", "ab"]);
    }

    #[test]
    fn errors_carry_positions() {
        assert_eq!(
            lex("echo 'x"),
            Err(ParseError::Unterminated {
                what: "single quote",
                position: 5
            })
        );
        assert_eq!(
            lex("ls |"),
            Err(ParseError::Unexpected {
                token: "|".into(),
                position: 3
            })
        );
        assert_eq!(lex("  # c\n"), Err(ParseError::Empty));
        assert_eq!(ParseError::Empty.position(), None);
    }

    #[test]
    fn multibyte_characters_keep_spans_on_boundaries() {
        // Multibyte characters around every kind of token: positions and
        // spans must fall on character boundaries.
        let input = "é'ü' \"日$(本)\" `ñ` ${é}>ö";
        let s = lex(input).unwrap();
        for w in &s.commands[0].words {
            assert!(input.is_char_boundary(w.span.start) && input.is_char_boundary(w.span.end));
            assert_eq!(&input[w.span.start..w.span.end], w.raw);
        }
    }
}
