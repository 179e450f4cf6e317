//! Shell lexing: one request string to a list of simple commands.
//!
//! Pure and allocation-bounded by its input. It does not execute or expand
//! anything; it records where the shell *would* expand (substitutions,
//! parameters, globs, braces, `~`) so the policy can decide what each gets.

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
/// (`$HOME`, `*.rs`) so paths can still be checked by prefix.
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
    /// The file, descriptor, delimiter or here-string word.
    pub target: Word,
    /// Here-document body, when `kind` is `HereDoc`.
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

/// Lexes one request string.
pub fn lex(input: &str) -> Result<Script, ParseError> {
    let _ = input;
    Err(ParseError::Empty)
}
