//! The cursor every part of the lexer moves: bytes of the text being
//! lexed, where it maps back to in the request, how deep the recursion is,
//! and the errors that name a place.

use crate::MAX_DEPTH;
use crate::ast::Span;
use crate::error::ParseError;

/// Where a script being lexed ends.
#[derive(Clone, Copy)]
pub(crate) enum Term {
    /// At the end of the text.
    Eof,
    /// At an unmatched `)`; `what` and `open` name the construct for the
    /// error when the text ends first.
    Paren { what: &'static str, open: usize },
}

/// Cursor over the text being lexed. For backtick substitutions `src` is an
/// unescaped copy and `map` sends its byte offsets back to the request, so
/// every span and error position refers to the request string.
pub(crate) struct Lexer<'a> {
    pub(crate) root: &'a str,
    pub(crate) src: &'a [u8],
    pub(crate) map: Option<&'a [usize]>,
    pub(crate) pos: usize,
    /// Scanning stops here (the start of a here-document's delimiter line
    /// while its body is scanned, otherwise the end of `src`).
    pub(crate) end: usize,
    /// Substitutions and expansions open around the cursor.
    pub(crate) depth: usize,
}

pub(crate) fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub(crate) fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl<'a> Lexer<'a> {
    /// A cursor at the start of the request.
    pub(crate) fn new(input: &'a str) -> Self {
        Lexer {
            root: input,
            src: input.as_bytes(),
            map: None,
            pos: 0,
            end: input.len(),
            depth: 0,
        }
    }

    pub(crate) fn at(&self, i: usize) -> Option<u8> {
        if i < self.end {
            self.src.get(i).copied()
        } else {
            None
        }
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.at(self.pos)
    }

    /// Request offset of local byte `i`.
    pub(crate) fn orig(&self, i: usize) -> usize {
        match self.map {
            None => i,
            Some(m) => m.get(i).or(m.last()).copied().unwrap_or(0),
        }
    }

    /// Request offset just past local byte `i - 1`.
    pub(crate) fn orig_end(&self, i: usize) -> usize {
        match self.map {
            None => i,
            Some(_) if i == 0 => self.orig(0),
            Some(_) => self.orig(i - 1) + 1,
        }
    }

    pub(crate) fn span(&self, start: usize, end: usize) -> Span {
        let s = self.orig(start);
        Span {
            start: s,
            end: self.orig_end(end).max(s),
        }
    }

    pub(crate) fn raw(&self, span: Span) -> String {
        self.root
            .get(span.start..span.end)
            .unwrap_or_default()
            .to_string()
    }

    pub(crate) fn unterminated(&self, what: &'static str, at: usize) -> ParseError {
        ParseError::Unterminated {
            what,
            position: self.orig(at),
        }
    }

    pub(crate) fn unexpected(&self, at: usize) -> ParseError {
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

    pub(crate) fn enter(&mut self, at: usize) -> Result<(), ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseError::TooDeep {
                limit: MAX_DEPTH,
                position: self.orig(at),
            });
        }
        self.depth += 1;
        Ok(())
    }

    pub(crate) fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'\\') if self.at(self.pos + 1) == Some(b'\n') => self.pos += 2,
                _ => return,
            }
        }
    }
}
