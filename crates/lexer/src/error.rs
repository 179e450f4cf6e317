//! Why a string could not be lexed.

use serde::Serialize;

/// A request bash would reject (or that nests too deeply to follow). Every
/// position is a byte offset into the request string, on a character
/// boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[non_exhaustive]
pub enum ParseError {
    /// A quote, substitution, group or here-document the text never
    /// closes.
    #[error("unterminated {what} starting at byte {position}")]
    Unterminated {
        /// The construct ("single quote", "command substitution", ...).
        what: &'static str,
        /// Where it opens.
        position: usize,
    },
    /// A token bash would not accept here: an operator, the start of the
    /// offending word, or the end of the input.
    #[error("unexpected `{token}` at byte {position}")]
    Unexpected {
        /// The token as written, or "end of input".
        token: String,
        /// Where it starts.
        position: usize,
    },
    /// Substitutions or expansions nest deeper than [`MAX_DEPTH`](crate::MAX_DEPTH).
    #[error("nesting deeper than {limit} levels at byte {position}")]
    TooDeep {
        /// The limit passed.
        limit: usize,
        /// Where the construct one level too deep opens.
        position: usize,
    },
    /// Nothing to run: blanks and comments only.
    #[error("empty command")]
    Empty,
}

impl ParseError {
    /// Where the problem is, when it is at a place.
    pub fn position(&self) -> Option<usize> {
        match self {
            ParseError::Unterminated { position, .. }
            | ParseError::Unexpected { position, .. }
            | ParseError::TooDeep { position, .. } => Some(*position),
            ParseError::Empty => None,
        }
    }
}
