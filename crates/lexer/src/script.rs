//! Commands and operators: the loop that reads one script (the request, or
//! the inside of a substitution) token by token, groups words into simple
//! commands, joins them with operators, and notes the constructs the
//! policy cannot follow (groups, control flow, functions).

use crate::ast::{
    Features, Operator, Redirect, RedirectKind, Role, Script, SimpleCommand, Span, Word,
};
use crate::error::ParseError;
use crate::scanner::{Lexer, Term};
use crate::word::{WordBuf, is_assignment};

/// A here-document whose body starts after the next newline token.
pub(crate) struct PendingDoc {
    /// Index of the command and of its redirection the body belongs to.
    pub(crate) command: usize,
    pub(crate) redirect: usize,
    pub(crate) delimiter: Vec<u8>,
    /// `<<-`: leading tabs are removed from every line.
    pub(crate) strip_tabs: bool,
    /// A quoted delimiter: the body is literal.
    pub(crate) quoted: bool,
    /// Where the `<<` is, for the error when the body never ends.
    pub(crate) position: usize,
}

/// A simple command under construction.
#[derive(Default)]
pub(crate) struct Cmd {
    pub(crate) assignments: Vec<Word>,
    pub(crate) words: Vec<Word>,
    pub(crate) redirects: Vec<Redirect>,
    pub(crate) start: Option<usize>,
    pub(crate) end: usize,
}

impl Cmd {
    pub(crate) fn is_empty(&self) -> bool {
        self.assignments.is_empty() && self.words.is_empty() && self.redirects.is_empty()
    }

    pub(crate) fn touch(&mut self, span: Span) {
        if self.start.is_none() {
            self.start = Some(span.start);
        }
        self.end = self.end.max(span.end);
    }
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
pub(crate) struct Builder {
    pub(crate) commands: Vec<SimpleCommand>,
    unsupported: Vec<(String, Span)>,
    control: Vec<(String, Span)>,
    functions: Vec<(String, Span)>,
    /// The role of the next command finished (a loop header after `for`).
    role_next: Role,
    /// Inside a `case`, between `in` or `;;` and the `)` ending a branch's
    /// patterns: `|` separates patterns and a leading `(` is optional.
    in_pattern: bool,
    pub(crate) cur: Cmd,
    /// The operator seen before `cur`.
    pending_op: Option<Operator>,
    /// A `&&`, `||` or `|` still waiting for its right-hand command.
    need: Option<(&'static str, usize)>,
    /// `cur` follows a keyword or closed group, so an operator right after
    /// it is not a dangling one (`fi && ls`, `(ls) | wc`).
    after_keyword: bool,
    /// The last operator when no command followed it (`ls &`, `ls;`).
    last_op: Option<Operator>,
    pub(crate) heredocs: Vec<PendingDoc>,
    open: Vec<(Open, usize)>,
    /// The next word is a function name (after `function`).
    fn_name: bool,
}

impl Builder {
    /// A keyword, group or closing bracket took the place of a command.
    pub(crate) fn keyword_seen(&mut self) {
        self.after_keyword = true;
        self.need = None;
        self.last_op = None;
    }
}

const KEYWORD_OPENERS: &[&str] = &[
    "if", "for", "while", "until", "case", "select", "function", "coproc", "!", "[[",
];
/// Openers whose every part is an ordinary command (or a loop header or
/// case patterns, marked by their role): listed in `Script::control`.
const FOLLOWABLE: &[&str] = &["if", "for", "while", "until", "case", "function", "!"];
const KEYWORD_OTHERS: &[&str] = &[
    "then", "elif", "else", "fi", "do", "done", "esac", "in", "]]",
];

/// What the token loop does after one token.
#[derive(PartialEq, Eq)]
enum Step {
    Next,
    /// The `)` closing this script was consumed.
    End,
}

impl Builder {
    /// The script, once the text (or its closing `)`) is reached: anything
    /// still open is an error.
    fn into_script(self) -> Result<Script, ParseError> {
        if let Some((token, position)) = self.need {
            return Err(ParseError::Unexpected {
                token: token.to_string(),
                position,
            });
        }
        if let Some(&(open, position)) = self.open.last() {
            let what = match open {
                Open::Paren => "group `(`",
                Open::Brace => "group `{`",
                Open::Case => "case",
            };
            return Err(ParseError::Unterminated { what, position });
        }
        if let Some(doc) = self.heredocs.first() {
            return Err(ParseError::Unterminated {
                what: "here-document",
                position: doc.position,
            });
        }
        let terminator = self.last_op;
        let needs_shell = match self.commands.as_slice() {
            [c] => {
                !self.unsupported.is_empty()
                    || !self.control.is_empty()
                    || terminator == Some(Operator::Background)
                    || !c.assignments.is_empty()
                    || !c.redirects.is_empty()
                    || c.words.is_empty()
                    || c.words
                        .iter()
                        .any(|w| w.features.expands() || !w.substitutions.is_empty())
            }
            _ => true,
        };
        Ok(Script {
            commands: self.commands,
            unsupported: self.unsupported,
            control: self.control,
            functions: self.functions,
            needs_shell,
            terminator,
        })
    }
}

impl Lexer<'_> {
    /// Lexes commands until `term`. Consumes the closing `)` of a `Paren`.
    pub(crate) fn script(&mut self, term: Term) -> Result<Script, ParseError> {
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
            if self.token(&mut b, c, term)? == Step::End {
                break;
            }
        }
        self.finish(&mut b);
        b.into_script()
    }

    /// One token starting at `c`, which is not a blank.
    fn token(&mut self, b: &mut Builder, c: u8, term: Term) -> Result<Step, ParseError> {
        let p = self.pos;
        match c {
            b'\n' => {
                self.pos += 1;
                self.finish(b);
                if b.need.is_none() && !b.commands.is_empty() {
                    b.pending_op = Some(Operator::Seq);
                }
                self.read_heredocs(b)?;
            }
            b'#' => {
                while self.peek().is_some_and(|c| c != b'\n') {
                    self.pos += 1;
                }
            }
            b';' => self.semicolon(b, p)?,
            b'&' => match self.at(p + 1) {
                Some(b'&') => {
                    self.pos += 2;
                    self.operator(b, Operator::And, "&&", p)?;
                }
                Some(b'>') => self.redirect(b, None, p)?,
                _ => {
                    self.pos += 1;
                    self.operator(b, Operator::Background, "&", p)?;
                }
            },
            b'|' => self.pipe(b, p)?,
            b'<' | b'>' if self.at(p + 1) != Some(b'(') => self.redirect(b, None, p)?,
            b'(' => self.open_paren(b, p)?,
            b')' => return self.close_paren(b, p, term),
            b'0'..=b'9' => self.digits(b, p)?,
            _ => self.word(b)?,
        }
        Ok(Step::Next)
    }

    /// `;`, or `;;`, `;&`, `;;&` ending a case branch.
    fn semicolon(&mut self, b: &mut Builder, p: usize) -> Result<(), ParseError> {
        if self.at(p + 1) == Some(b';') || self.at(p + 1) == Some(b'&') {
            if b.open.last().map(|o| o.0) != Some(Open::Case) {
                return Err(self.unexpected(p));
            }
            self.pos += 2;
            if self.peek() == Some(b'&') {
                self.pos += 1;
            }
            self.finish(b);
            b.keyword_seen();
            b.pending_op = Some(Operator::Seq);
            b.in_pattern = true;
            b.role_next = Role::CasePattern;
            return Ok(());
        }
        self.pos += 1;
        self.operator(b, Operator::Seq, ";", p)
    }

    /// `|`, `||` or `|&`.
    fn pipe(&mut self, b: &mut Builder, p: usize) -> Result<(), ParseError> {
        match self.at(p + 1) {
            Some(b'|') => {
                self.pos += 2;
                self.operator(b, Operator::Or, "||", p)
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
                self.operator(b, Operator::Pipe, "|&", p)
            }
            // Between case patterns, `|` means "or", not a pipe.
            _ if b.in_pattern && b.open.last().map(|o| o.0) == Some(Open::Case) => {
                self.pos += 1;
                Ok(())
            }
            _ => {
                self.pos += 1;
                self.operator(b, Operator::Pipe, "|", p)
            }
        }
    }

    /// A `)`: closes a group, a case pattern, or this script.
    fn close_paren(&mut self, b: &mut Builder, p: usize, term: Term) -> Result<Step, ParseError> {
        match b.open.last().map(|o| o.0) {
            Some(Open::Paren) => {
                self.pos += 1;
                b.open.pop();
                self.finish(b);
                b.keyword_seen();
            }
            Some(Open::Case) => {
                // The end of a case pattern; what precedes it stays
                // a (pattern) command so its substitutions are still seen.
                self.pos += 1;
                b.role_next = Role::CasePattern;
                self.finish(b);
                b.role_next = Role::Command;
                b.in_pattern = false;
                b.keyword_seen();
                b.pending_op = Some(Operator::Seq);
            }
            _ => {
                if matches!(term, Term::Paren { .. }) && b.open.is_empty() {
                    self.pos += 1;
                    return Ok(Step::End);
                }
                return Err(self.unexpected(p));
            }
        }
        Ok(Step::Next)
    }

    /// Digits: a redirection's descriptor (`2>`) or the start of a word.
    fn digits(&mut self, b: &mut Builder, p: usize) -> Result<(), ParseError> {
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
                self.redirect(b, Some(fd), p)
            }
            _ => self.word(b),
        }
    }

    /// Ends the current simple command, if it has anything.
    fn finish(&self, b: &mut Builder) {
        if b.cur.is_empty() {
            b.cur.start = None;
            return;
        }
        let cmd = std::mem::take(&mut b.cur);
        let role = std::mem::take(&mut b.role_next);
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
            role,
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

    fn control(&self, b: &mut Builder, what: &str, start: usize, end: usize) {
        let span = self.span(start, end);
        b.control.push((what.to_string(), span));
        b.keyword_seen();
    }

    fn open_paren(&mut self, b: &mut Builder, p: usize) -> Result<(), ParseError> {
        if b.cur.is_empty() {
            if b.in_pattern && b.open.last().map(|o| o.0) == Some(Open::Case) {
                // The optional `(` before a case branch's patterns.
                self.pos += 1;
                return Ok(());
            }
            if self.at(p + 1) == Some(b'(') {
                return self.arith_command(b, p);
            }
            self.pos += 1;
            self.control(b, "(", p, p + 1);
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
                let name = std::mem::take(&mut b.cur).words.pop();
                self.pos = q + 1;
                let span = Span {
                    start,
                    end: self.orig_end(q + 1),
                };
                if let Some(name) = name {
                    b.functions.push((name.value, span));
                }
                b.control.push(("function".to_string(), span));
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
        // `for ((..))` has no loop variable: the word is no header.
        b.role_next = Role::Command;
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
            let span = self.span(start, self.pos);
            b.functions.push((w.value, span));
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
        if command_position && !w.features.quoted && !w.features.expands() {
            let v = w.value.as_str();
            let end = self.pos;
            match v {
                "{" => {
                    self.control(b, "{", start, end);
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
                    b.in_pattern = false;
                    b.role_next = Role::Command;
                    b.keyword_seen();
                    return Ok(());
                }
                _ => {}
            }
            if KEYWORD_OPENERS.contains(&v) {
                if FOLLOWABLE.contains(&v) {
                    self.control(b, v, start, end);
                } else {
                    self.unsupported(b, v, start, end);
                }
                match v {
                    "for" | "select" => b.role_next = Role::LoopHeader,
                    "case" => {
                        b.open.push((Open::Case, self.orig(start)));
                        b.in_pattern = true;
                        b.role_next = Role::CasePattern;
                    }
                    "function" => b.fn_name = true,
                    _ => {}
                }
                return Ok(());
            }
            if KEYWORD_OTHERS.contains(&v) {
                // Only a stray one needs recording: with its opener, the
                // construct is already listed.
                if b.unsupported.is_empty() && b.control.is_empty() {
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
}
