//! Redirections and here-documents: the operator, its target word, and
//! for `<<` the body read after the line ends (with the substitutions an
//! unquoted body runs).

use crate::ast::{Redirect, RedirectKind};
use crate::error::ParseError;
use crate::scanner::{Lexer, into_string};
use crate::script::{Builder, PendingDoc};
use crate::word::WordBuf;

impl Lexer<'_> {
    /// A redirection operator at the cursor (its descriptor, if any, began
    /// at `start`) and its target.
    pub(crate) fn redirect(
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
        let descriptor = !target.features.expands()
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
    pub(crate) fn read_heredocs(&mut self, b: &mut Builder) -> Result<(), ParseError> {
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
}
