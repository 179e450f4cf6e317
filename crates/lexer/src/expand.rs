//! Expansions: `$NAME`, `${..}`, `$((..))`, `$[..]`, and the substitutions
//! whose commands are lexed as scripts of their own (`$(..)`, backquotes,
//! `<(..)`, `>(..)`). Nothing is expanded; each sets the word's feature
//! and keeps its text, so the policy can judge what the shell would do.

use crate::error::ParseError;
use crate::scanner::{Lexer, Term, is_name_byte, is_name_start};
use crate::word::WordBuf;

impl Lexer<'_> {
    /// At a `$`. Expansions keep their text in the value.
    pub(crate) fn dollar(&mut self, w: &mut WordBuf, in_quotes: bool) -> Result<(), ParseError> {
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
    pub(crate) fn arithmetic(
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

    /// A backquoted substitution: its text is unescaped (`\``, `\\`, `\$`,
    /// and `\"` inside double quotes) and lexed as a script of its own.
    pub(crate) fn backtick(&mut self, w: &mut WordBuf, in_quotes: bool) -> Result<(), ParseError> {
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
    pub(crate) fn process_substitution(&mut self, w: &mut WordBuf) -> Result<(), ParseError> {
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
