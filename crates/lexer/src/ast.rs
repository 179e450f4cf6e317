//! What lexing produces: a script of simple commands, each a list of words
//! with the shell features they use, plus redirections and the operators
//! joining them. Every span is a byte range of the request string.

use serde::Serialize;

/// Byte offsets into the request string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    /// The first byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// The operator that joins a simple command to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Operator {
    /// `;` or a newline
    Seq,
    /// `&&`
    And,
    /// `||`
    Or,
    /// `|` or `|&`
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
    /// After quote removal (see above for expansions).
    pub value: String,
    /// The word as written in the request.
    pub raw: String,
    /// Where `raw` is in the request.
    pub span: Span,
    /// What the shell would do to the word besides removing quotes.
    pub features: Features,
    /// Commands inside `$(...)`, backticks and `<(...)`, lexed recursively.
    pub substitutions: Vec<Script>,
}

/// What a redirection does with its target.
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

/// One redirection of a simple command, in the order written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redirect {
    /// Explicit descriptor (`2>`), if any.
    pub fd: Option<u32>,
    /// What it does.
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

/// What the words of a [`SimpleCommand`] are to the shell. Most are a
/// command; the header of a `for` loop and the subject and patterns of a
/// `case` are lexed the same way (so their substitutions are visible) but
/// run nothing themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Role {
    /// A command: program first, then its arguments.
    #[default]
    Command,
    /// `NAME [in WORD...]` of a `for` (or `select`) loop: the loop variable,
    /// then, after `in`, the words it takes in turn.
    LoopHeader,
    /// `case` subject words, `in`, and the patterns of one branch (or only
    /// the patterns of a later branch): matched, never run.
    CasePattern,
}

/// A simple command: assignments, words, redirections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SimpleCommand {
    /// `VAR=value` words before the program.
    pub assignments: Vec<Word>,
    /// Program first, then its arguments. May be empty (`> file`, `X=1`).
    pub words: Vec<Word>,
    /// In the order written, wherever they stand among the words.
    pub redirects: Vec<Redirect>,
    /// The operator before this command (None for the first).
    pub joined_by: Option<Operator>,
    /// From its first word or redirection to its last.
    pub span: Span,
    /// Whether the words are a command or a loop header or case patterns.
    pub role: Role,
}

/// A whole request. `needs_shell` is false only for exactly one simple
/// command with no shell feature at all, which is exec'd without a shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Script {
    /// In the order written, each with the operator joining it to the one
    /// before.
    pub commands: Vec<SimpleCommand>,
    /// Constructs the policy cannot follow command by command: `select`,
    /// `coproc`, `[[ ]]`, `(( ))`, arithmetic `for ((..))` and stray
    /// keywords. Presence is noted so the policy can refuse them.
    pub unsupported: Vec<(String, Span)>,
    /// Grouping and control flow whose every command is in `commands`:
    /// subshells `( )`, groups `{ }`, `if`, `for`, `while`, `until`,
    /// `case`, `!` and function definitions (`function`). A policy may
    /// check each command, knowing the order of `commands` is the order
    /// written, not necessarily the order run (a loop repeats, a branch may
    /// be skipped, a subshell's `cd` does not outlast it).
    pub control: Vec<(String, Span)>,
    /// Functions the script defines, by name, each with where its
    /// definition starts; calls to them are in `commands` as ordinary
    /// commands.
    pub functions: Vec<(String, Span)>,
    /// False only for one plain command that can be exec'd as its words.
    pub needs_shell: bool,
    /// The operator after the last command when nothing follows it: `;`
    /// (harmless) or `&` (the command runs in the background, so the
    /// script needs a shell and leaves a process behind).
    pub terminator: Option<Operator>,
}

impl Features {
    /// Whether any feature other than quoting is set: such a word differs
    /// from its `value` at run time, so it needs a shell.
    pub fn expands(&self) -> bool {
        self.command_substitution
            || self.process_substitution
            || self.parameter_expansion
            || self.arithmetic
            || self.glob
            || self.brace
            || self.tilde
    }
}
