//! Shell lexing: one request string to a list of simple commands.
//!
//! Pure and allocation-bounded by its input. It does not execute or expand
//! anything; it records where the shell *would* expand (substitutions,
//! parameters, globs, braces, `~`) so the policy can decide what each gets.
//!
//! The grammar followed is bash's, so the script given to the shell must be
//! run by bash for the policy's view and the shell's to agree (`&>`, `|&`,
//! `$'..'` and `<(..)` mean something else, or nothing, to a POSIX `sh`).
//! [`SHELL_PATHS`] names that shell.
//!
//! ```
//! use agent_exec_lexer::{Operator, RedirectKind, lex};
//!
//! let script = lex("git status --short && grep -rn \"$(id -u)\" src > hits.txt")?;
//! assert!(script.needs_shell);
//! let [status, grep] = script.commands.as_slice() else {
//!     panic!("two simple commands");
//! };
//! let argv: Vec<&str> = status.words.iter().map(|w| w.value.as_str()).collect();
//! assert_eq!(argv, ["git", "status", "--short"]);
//! assert_eq!(grep.joined_by, Some(Operator::And));
//!
//! // The substitution is not run, only lexed: its commands are visible.
//! let pattern = &grep.words[2];
//! assert!(pattern.features.command_substitution && pattern.features.quoted);
//! assert_eq!(pattern.substitutions[0].commands[0].words[0].value, "id");
//!
//! let out = &grep.redirects[0];
//! assert_eq!((out.kind, out.target.value.as_str()), (RedirectKind::Output, "hits.txt"));
//! # Ok::<(), agent_exec_lexer::ParseError>(())
//! ```
//!
//! Known simplifications, all on the refusing side: `$((` always starts
//! arithmetic (bash retries `$( (..) )` without the space), `a=(..)` arrays
//! are a syntax error, and inside `[[ .. ]]` the operators `<`, `>`, `&&`,
//! `(` are lexed as in a command (the construct is unsupported anyway).
//! Array element assignments `a[i]=v` are plain words: bash keeps blanks
//! and operators inside the brackets in the word, this lexer splits there
//! (every part is still seen by the policy).

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod ast;
mod error;
mod expand;
mod redirect;
mod scanner;
mod script;
mod word;

pub use ast::{
    Features, Operator, Redirect, RedirectKind, Role, Script, SimpleCommand, Span, Word,
};
pub use error::ParseError;

/// Where the shell whose grammar this lexer follows (bash) is looked up, in
/// order. A script this lexer read must run under this shell and no other.
pub const SHELL_PATHS: &[&str] = &["/bin/bash", "/usr/bin/bash"];

/// How deep substitutions and `${...}` expansions may nest before lexing
/// gives up: deeper input is adversarial, and the limit bounds recursion.
pub const MAX_DEPTH: usize = 32;

/// Lexes one request string.
///
/// Bash syntax is the reference: a construct bash accepts either lexes here
/// or is listed in [`Script::unsupported`]; what bash rejects is an error.
pub fn lex(input: &str) -> Result<Script, ParseError> {
    let script = scanner::Lexer::new(input).script(scanner::Term::Eof)?;
    if script.commands.is_empty() && script.unsupported.is_empty() && script.control.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(script)
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
        assert!(!w.features.expands());
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
