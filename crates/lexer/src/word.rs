//! Words and quoting: one word scanned up to the next blank or operator,
//! with quote removal (`'..'`, `".."`, `\`, `$'..'`) and the features the
//! shell would expand (globs, braces, `~`), which the policy must see.

use crate::ast::{Features, Script, Word};
use crate::error::ParseError;
use crate::scanner::{Lexer, into_string, is_name_byte, is_name_start};

/// A word under construction.
#[derive(Default)]
pub(crate) struct WordBuf {
    pub(crate) value: Vec<u8>,
    pub(crate) features: Features,
    pub(crate) subs: Vec<Script>,
    /// An unquoted `[` was seen; a later unquoted `]` makes a glob.
    bracket: bool,
    /// An unquoted `{` was seen, and then an unquoted `,` or `..`: a later
    /// unquoted `}` makes a brace expansion. Deliberately looser than bash's
    /// matching (bash keeps looking past a `}` that closes no list, as in
    /// `{a}b,c}`), so an expansion is never missed.
    brace_open: bool,
    brace_sep: bool,
}

/// `NAME=` or `NAME+=` at the start of the word as written.
pub(crate) fn is_assignment(raw: &[u8]) -> bool {
    if !raw.first().is_some_and(|&b| is_name_start(b)) {
        return false;
    }
    let n = raw.iter().take_while(|&&b| is_name_byte(b)).count();
    matches!(&raw[n..], [b'=', ..] | [b'+', b'=', ..])
}

fn hex_value(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

impl Lexer<'_> {
    pub(crate) fn finish_word(&self, w: WordBuf, start: usize) -> Word {
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
    pub(crate) fn scan_word(&mut self) -> Result<Word, ParseError> {
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
    pub(crate) fn double_quote(&mut self, w: &mut WordBuf, open: usize) -> Result<(), ParseError> {
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

    /// `$'...'`: decodes the escapes into the value. Bash cuts the string
    /// at a NUL, and so does this.
    pub(crate) fn ansi_c(&mut self, w: &mut WordBuf, start: usize) -> Result<(), ParseError> {
        w.features.quoted = true;
        self.pos = start + 2;
        let mut cut = false;
        let mut out = [0u8; 4];
        loop {
            let Some(c) = self.peek() else {
                return Err(self.unterminated("ANSI-C quote", start));
            };
            self.pos += 1;
            let len = match c {
                b'\'' => return Ok(()),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.unterminated("ANSI-C quote", start));
                    };
                    self.pos += 1;
                    self.ansi_escape(e, &mut out)
                }
                _ => {
                    out[0] = c;
                    1
                }
            };
            let decoded = &out[..len];
            if decoded.contains(&0) {
                cut = true;
            }
            if !cut {
                w.value.extend_from_slice(decoded);
            }
        }
    }

    /// Decodes the escape `\e` (the cursor after `e`) into `out`; returns
    /// how many bytes it wrote. Unknown escapes stay as written.
    fn ansi_escape(&mut self, e: u8, out: &mut [u8; 4]) -> usize {
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
                1
            }
            (None, b'x' | b'u' | b'U') => self.ansi_hex(e, out),
            (None, _) => {
                out[0] = b'\\';
                out[1] = e;
                2
            }
        }
    }

    /// `\xHH`, `\uHHHH`, `\UHHHHHHHH`: a byte, or a character as UTF-8.
    fn ansi_hex(&mut self, e: u8, out: &mut [u8; 4]) -> usize {
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
            2
        } else if e == b'x' {
            out[0] = v as u8;
            1
        } else {
            match char::from_u32(v) {
                Some(ch) => ch.encode_utf8(out).len(),
                None => 0,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_assignment;

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
}
