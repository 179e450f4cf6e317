//! Reading an awk program for what would make a read-only run do more
//! than read: running commands (`system`, pipes), reading other files
//! (`getline`), the environment (`ENVIRON`), loading code (`@load`,
//! `@include`, indirect calls) and writing files (`print > "f"`).
//!
//! Only the last needs the program's structure: `>` is a comparison
//! everywhere except in a `print`/`printf` statement outside parentheses,
//! and text inside strings, regex literals and comments is not code. So
//! the program is tokenized the way awk does it (a `/` starts a regex
//! where an operand is expected, a division after one). Every other
//! construct is refused wherever its name appears, even inside a string:
//! a tokenizer that misjudged one `/` must not be able to hide a `system`.

/// The first thing in `program` that is not plain filtering and
/// printing: `(token, what it does)`.
pub(crate) fn refused(program: &str) -> Option<(String, &'static str)> {
    if let Some(found) = forbidden_anywhere(program) {
        return Some(found);
    }
    match output_redirection(program) {
        Ok(None) => None,
        Ok(Some(at)) => Some((
            program[at..].chars().take(24).collect(),
            "writes to a file (output redirection in print/printf)",
        )),
        Err(at) => Some((
            program[at..].chars().take(24).collect(),
            "has a string or regex that does not end, so it cannot be read",
        )),
    }
}

/// Names and operators refused wherever they appear.
fn forbidden_anywhere(program: &str) -> Option<(String, &'static str)> {
    let bytes = program.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let what = match &program[start..i] {
                "system" => "runs a shell command",
                "getline" => "reads other files or the output of commands",
                "ENVIRON" | "PROCINFO" | "SYMTAB" => "reads the environment or awk's internals",
                _ => continue,
            };
            return Some((program[start..i].to_string(), what));
        }
        if b == b'|' {
            if bytes.get(i + 1) == Some(&b'|') {
                i += 2;
                continue;
            }
            return Some(("|".into(), "pipes to or from a command"));
        }
        if b == b'@' {
            return Some((
                "@".into(),
                "loads code or calls a function by name (@load, @include, @f())",
            ));
        }
        i += 1;
    }
    None
}

/// What the previous token lets a `/` be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// An operand ended: `/` divides.
    Operand,
    /// Anything else: `/` starts a regex.
    Other,
}

/// The tokenizer's state for the redirection check.
struct Scan<'a> {
    bytes: &'a [u8],
    i: usize,
    prev: Prev,
    /// Inside a print/printf statement, with this many parentheses open
    /// since it began.
    print: Option<usize>,
    /// For each open parenthesis: whether it holds an `if`/`while`/`for`
    /// condition (a statement, so a regex, may follow its `)`).
    parens: Vec<bool>,
    /// The last word was `if`, `while` or `for`.
    condition_next: bool,
    /// A newline here does not end a statement (after `,`, `{`, `&&`,
    /// `||`, `do`, `else`).
    continues: bool,
}

/// Where a print/printf statement redirects its output (`Ok(Some)`), or
/// where a string or regex runs past the end of a line (`Err`).
fn output_redirection(program: &str) -> Result<Option<usize>, usize> {
    let mut s = Scan {
        bytes: program.as_bytes(),
        i: 0,
        prev: Prev::Other,
        print: None,
        parens: Vec::new(),
        condition_next: false,
        continues: false,
    };
    while s.i < s.bytes.len() {
        if let Some(at) = s.step()? {
            return Ok(Some(at));
        }
    }
    Ok(None)
}

impl Scan<'_> {
    /// One token; `Some(at)` when it is a redirection.
    fn step(&mut self) -> Result<Option<usize>, usize> {
        let b = self.bytes[self.i];
        let at = self.i;
        let next = self.bytes.get(self.i + 1).copied();
        self.i += 1;
        let continues = std::mem::take(&mut self.continues);
        match b {
            b' ' | b'\t' | b'\r' => self.continues = continues,
            b'\\' if next == Some(b'\n') => {
                self.i += 1;
                self.continues = continues;
            }
            b'\n' => {
                if !continues {
                    self.print = None;
                    self.prev = Prev::Other;
                }
                self.continues = continues;
            }
            b'#' => {
                while self.i < self.bytes.len() && self.bytes[self.i] != b'\n' {
                    self.i += 1;
                }
                self.continues = continues;
            }
            b'"' => {
                self.skip_quoted(b'"', at)?;
                self.prev = Prev::Operand;
            }
            b'/' if self.prev == Prev::Other => {
                self.skip_quoted(b'/', at)?;
                self.prev = Prev::Operand;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => self.word(at),
            b'0'..=b'9' | b'.' => {
                while self.i < self.bytes.len()
                    && (self.bytes[self.i].is_ascii_alphanumeric() || self.bytes[self.i] == b'.')
                {
                    self.i += 1;
                }
                self.prev = Prev::Operand;
            }
            b'(' => {
                self.parens.push(std::mem::take(&mut self.condition_next));
                if let Some(depth) = &mut self.print {
                    *depth += 1;
                }
                self.prev = Prev::Other;
            }
            b')' => {
                let condition = self.parens.pop().unwrap_or(false);
                if let Some(depth) = &mut self.print {
                    *depth = depth.saturating_sub(1);
                }
                self.prev = if condition {
                    Prev::Other
                } else {
                    Prev::Operand
                };
            }
            b']' => self.prev = Prev::Operand,
            b'>' if self.print == Some(0) => return Ok(Some(at)),
            b';' | b'}' if self.print.is_none_or(|d| d == 0) => {
                self.print = None;
                self.prev = Prev::Other;
            }
            // `x++ / 2` divides; `++` keeps what came before it.
            b'+' | b'-' if next == Some(b) => self.i += 1,
            b'&' | b'|' if next == Some(b) => {
                self.i += 1;
                self.prev = Prev::Other;
                self.continues = true;
            }
            b',' | b'{' => {
                self.prev = Prev::Other;
                self.continues = true;
            }
            _ => self.prev = Prev::Other,
        }
        Ok(None)
    }

    fn word(&mut self, start: usize) {
        while self.i < self.bytes.len()
            && (self.bytes[self.i].is_ascii_alphanumeric() || self.bytes[self.i] == b'_')
        {
            self.i += 1;
        }
        let word = &self.bytes[start..self.i];
        self.condition_next = matches!(word, b"if" | b"while" | b"for");
        self.prev = match word {
            b"print" | b"printf" => {
                self.print = Some(0);
                Prev::Other
            }
            b"do" | b"else" => {
                self.continues = true;
                Prev::Other
            }
            b"if" | b"while" | b"for" | b"return" | b"in" | b"case" | b"delete" | b"exit"
            | b"getline" => Prev::Other,
            _ => Prev::Operand,
        };
    }

    /// Past a string or regex literal opened at `open` (the cursor is just
    /// after the quote). In a regex, `/` does not end a bracket expression.
    fn skip_quoted(&mut self, quote: u8, open: usize) -> Result<(), usize> {
        let mut bracket = false;
        while self.i < self.bytes.len() {
            let c = self.bytes[self.i];
            self.i += 1;
            match c {
                b'\n' => return Err(open),
                b'\\' => self.i += 1,
                b'[' if quote == b'/' && !bracket => {
                    bracket = true;
                    // `[]...]` and `[^]...]`: a leading `]` is a member.
                    if self.bytes.get(self.i) == Some(&b'^') {
                        self.i += 1;
                    }
                    if self.bytes.get(self.i) == Some(&b']') {
                        self.i += 1;
                    }
                }
                b']' if bracket => bracket = false,
                _ if c == quote && !bracket => return Ok(()),
                _ => {}
            }
        }
        Err(open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what(p: &str) -> Option<&'static str> {
        refused(p).map(|(_, w)| w)
    }

    #[test]
    fn filtering_and_printing_pass() {
        for p in [
            "{print $1}",
            "$3 > 100",
            "$3 > 100 { print $1 }",
            "{ if ($2 > 3) print $1; else print $2 }",
            "{ print ($1 > 2) }",
            "NR > 1 && $2 >= 5 { n++ } END { print n / 2 }",
            "/a\\/..\\/b/",
            "/[/]x/ { print }",
            "{ x = a / 2; y = b / 3 }",
            "# a comment with > and ; }\n{ print $1 }",
            "{ s = \"a > b\"; print s }",
            "{ print \"}\" }",
            "BEGIN { FS = \":\" } { print $1, $NF }",
            "{ i++ / 2 > 1 }",
            "{ print length($0) }",
        ] {
            assert_eq!(refused(p), None, "{p}");
        }
    }

    #[test]
    fn redirections_are_found_whatever_hides_the_statement_end() {
        for p in [
            "{ print > \"out\" }",
            "{ print \"}\" > \"f\" }",
            "{ print \";\" >> \"f\" }",
            "{ printf(\"%s\", $0) > \"f\" }",
            "{ print $1, \"x\" > $2 }",
            "{ if (x) print > \"f\" }",
            "{ print /}/ > \"f\" }",
            "{ print a,\n b > \"f\" }",
            "{ print $1, # } is no end\n \"x\" > \"f\" }",
            "{ print \\\n > \"f\" }",
        ] {
            assert_eq!(
                what(p),
                Some("writes to a file (output redirection in print/printf)"),
                "{p}"
            );
        }
    }

    #[test]
    fn commands_files_and_code_loading_are_refused_anywhere() {
        for (p, token) in [
            ("BEGIN { system(\"id\") }", "system"),
            ("BEGIN { system (\"id\") }", "system"),
            ("{ print | \"sh\" }", "|"),
            ("{ \"id\" | getline x }", "|"),
            ("{ getline < \"/etc/passwd\" }", "getline"),
            ("BEGIN { print ENVIRON[\"HOME\"] }", "ENVIRON"),
            ("@load \"filefuncs\"", "@"),
            ("BEGIN { f = \"system\"; @f(\"id\") }", "system"),
            ("{ print |& \"sh\" }", "|"),
            // A misread `/` could hide the rest from the tokenizer, never
            // from this check.
            ("{ x = 1 /\"/; system(\"id\") }", "system"),
        ] {
            assert_eq!(refused(p).map(|(t, _)| t), Some(token.to_string()), "{p}");
        }
        assert_eq!(refused("$1 == \"a\" || $2 == \"b\""), None);
    }

    #[test]
    fn an_unterminated_literal_is_refused() {
        for p in ["{ print \"abc }", "/abc", "{ x = \"a\nb\" }"] {
            assert_eq!(
                what(p),
                Some("has a string or regex that does not end, so it cannot be read"),
                "{p}"
            );
        }
    }
}
