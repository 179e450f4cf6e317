//! Places where bash evaluates text that the lexer sees as data.
//!
//! Bash's arithmetic evaluates a variable's *value* as an expression, and
//! an array subscript inside that expression expands `$(...)`. So
//! `x='a[$(id)]'; echo $((x))` runs `id` although the only substitution is
//! single-quoted. The same evaluation happens in `$[..]`, in subscripts of
//! `${a[..]}`, in `${x:off:len}`, in `${!x}` (indirection through a name
//! that may carry a subscript), and in variable names given to builtins
//! (`printf -v 'a[$(id)]'`). `${x@P}` runs prompt expansion, which includes
//! command substitution, over the value.
//!
//! The checks here are deliberately coarse: arithmetic may hold numbers and
//! operators, nothing that names a value. They run only on words the lexer
//! flagged as expanding, so ordinary commands pay nothing.

/// Transformations that only re-quote or re-case a value (`${x@Q}`);
/// `@P` (prompt expansion) runs substitutions, and unknown future letters
/// are refused.
const SAFE_TRANSFORMS: &[u8] = b"QEAaUuLKk";

/// What was found, for the reason given to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evaluated {
    /// `$((x))`, `$[x]`, `$(( $y ))`.
    Arithmetic,
    /// `${a[i]}`, `${a[$i]}`.
    Subscript,
    /// `${x:$n}`, `${x:0:n}`.
    Offset,
    /// `${!x}`.
    Indirection,
    /// `${x@P}` and unknown transformations.
    Transformation,
}

impl Evaluated {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Evaluated::Arithmetic => {
                "arithmetic that names a variable or expansion (`$((x))`, `$[x]`)"
            }
            Evaluated::Subscript => "an array subscript that names a variable (`${a[i]}`)",
            Evaluated::Offset => "a substring offset or length that names a variable (`${x:$n}`)",
            Evaluated::Indirection => "indirect expansion (`${!x}`)",
            Evaluated::Transformation => "a `${x@P}` prompt transformation",
        }
    }
}

/// Arithmetic that can only compute a number: digits (with bases such as
/// `16#ff` and `0x1f`), operators, blanks and parentheses. Any name,
/// expansion, quote or subscript is a reference whose value bash would
/// evaluate in turn.
pub(crate) fn inert_arithmetic(s: &[u8]) -> bool {
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c.is_ascii_digit() {
            i += 1;
            while i < s.len()
                && (s[i].is_ascii_alphanumeric() || matches!(s[i], b'#' | b'@' | b'_'))
            {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic()
            || c >= 0x80
            || matches!(
                c,
                b'_' | b'$' | b'`' | b'\'' | b'"' | b'\\' | b'[' | b']' | b'{' | b'}'
            )
        {
            return false;
        }
        i += 1;
    }
    true
}

/// A variable name as a builtin receives it (`read NAME`, `printf -v NAME`,
/// `declare NAME=..`): a plain identifier, or one with a subscript that is
/// inert arithmetic (`a[0]`). Returns the identifier, or None when bash
/// would evaluate something or the name is computed.
pub(crate) fn plain_name(name: &str) -> Option<&str> {
    let b = name.as_bytes();
    let ident = b
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
        .unwrap_or(b.len());
    if ident == 0 || b[0].is_ascii_digit() {
        return None;
    }
    match &b[ident..] {
        [] => Some(name),
        [b'[', sub @ .., b']'] if !sub.is_empty() && inert_arithmetic(sub) => Some(&name[..ident]),
        _ => None,
    }
}

/// `{NAME}` or `{NAME[..]}` as written before a redirection operator
/// (`exec {fd}>file`): the name bash assigns the descriptor to. Brace
/// expansions (`{a,b}`) and other words give None.
pub(crate) fn fd_variable(raw: &str) -> Option<&str> {
    let inner = raw.strip_prefix('{')?.strip_suffix('}')?;
    let b = inner.as_bytes();
    let ident = b
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
        .unwrap_or(b.len());
    let named = ident > 0 && !b[0].is_ascii_digit();
    (named && (ident == b.len() || (b[ident] == b'[' && inner.ends_with(']')))).then_some(inner)
}

/// The first place in `text` (a word as written, or an unquoted
/// here-document body) where bash would evaluate a value as code.
///
/// Quotes are not tracked: `'$((x))'` inside a word that also expands is
/// refused too. That only errs on the refusing side, and such words are
/// rare; the lexer's features already exempt fully quoted words.
pub(crate) fn evaluated(text: &str) -> Option<Evaluated> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            // `\$((x))` is literal wherever a backslash quotes.
            b'\\' => i += 2,
            b'$' => match b.get(i + 1) {
                Some(b'(') if b.get(i + 2) == Some(&b'(') => {
                    match arithmetic_end(b, i + 3, false) {
                        Some(end) => i = end,
                        None => return Some(Evaluated::Arithmetic),
                    }
                }
                Some(b'[') => match arithmetic_end(b, i + 2, true) {
                    Some(end) => i = end,
                    None => return Some(Evaluated::Arithmetic),
                },
                Some(b'{') => {
                    if let Some(found) = parameter(b, i + 2) {
                        return Some(found);
                    }
                    // Operands of `${x:-word}` and friends are scanned on.
                    i += 2;
                }
                _ => i += 1,
            },
            _ => i += 1,
        }
    }
    None
}

/// The index after the `))` (or `]` with `bracket`) that closes inert
/// arithmetic starting at `body`; None when the body is not inert or does
/// not close.
fn arithmetic_end(b: &[u8], body: usize, bracket: bool) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = body;
    while i < b.len() {
        match b[i] {
            b']' if bracket => {
                return inert_arithmetic(&b[body..i]).then_some(i + 1);
            }
            b'(' => depth += 1,
            b')' if bracket => {}
            b')' if depth > 0 => depth -= 1,
            b')' if b.get(i + 1) == Some(&b')') => {
                return inert_arithmetic(&b[body..i]).then_some(i + 2);
            }
            b')' => return None,
            // An expansion or quote decides already; stopping here also
            // avoids following quoting rules inside the body.
            b'$' | b'`' | b'\'' | b'"' | b'\\' | b'[' | b'{' => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// `${...}` starting after the brace: what in its parameter part bash
/// evaluates, if anything.
fn parameter(b: &[u8], start: usize) -> Option<Evaluated> {
    let name_start = |c: u8| c.is_ascii_alphabetic() || c == b'_';
    let mut j = start;
    let mut indirect = false;
    match (b.get(j), b.get(j + 1)) {
        (Some(b'#'), Some(&c)) if name_start(c) || c.is_ascii_digit() => j += 1,
        // `${!}` is a plain parameter; `${!x}`, `${!1}` use a value as a name.
        (Some(b'!'), Some(&c)) if c != b'}' => {
            indirect = true;
            j += 1;
        }
        _ => {}
    }
    match b.get(j) {
        Some(&c) if name_start(c) => {
            while b
                .get(j)
                .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_')
            {
                j += 1;
            }
        }
        Some(c) if c.is_ascii_digit() => {
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
        }
        Some(b'@' | b'*' | b'#' | b'?' | b'-' | b'$' | b'!') => j += 1,
        _ => return None,
    }
    if b.get(j) == Some(&b'[') {
        // Bash rejects an unclosed subscript; refusing needs no guess.
        let Some(len) = b[j + 1..].iter().position(|&c| c == b']') else {
            return Some(Evaluated::Subscript);
        };
        let close = j + 1 + len;
        let sub = &b[j + 1..close];
        j = close + 1;
        let listing = matches!(sub, b"@" | b"*");
        if indirect {
            // `${!a[@]}` lists keys; anything else goes through a name.
            return (!(listing && b.get(j) == Some(&b'}'))).then_some(Evaluated::Indirection);
        }
        if !listing && !inert_arithmetic(sub) {
            return Some(Evaluated::Subscript);
        }
    } else if indirect {
        // `${!prefix*}` / `${!prefix@}` list names; anything else is `${!x}`.
        let listing = matches!(b.get(j), Some(b'*' | b'@')) && b.get(j + 1) == Some(&b'}');
        return (!listing).then_some(Evaluated::Indirection);
    }
    match b.get(j) {
        Some(b'@') => match b.get(j + 1) {
            Some(c) if SAFE_TRANSFORMS.contains(c) => None,
            _ => Some(Evaluated::Transformation),
        },
        Some(b':') => match b.get(j + 1) {
            Some(b'-' | b'=' | b'?' | b'+') => None,
            _ => {
                let Some(len) = b[j + 1..].iter().position(|&c| c == b'}') else {
                    return Some(Evaluated::Offset);
                };
                (!inert_arithmetic(&b[j + 1..j + 1 + len])).then_some(Evaluated::Offset)
            }
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_with_only_numbers_is_inert() {
        for s in ["1+2", " (3 * 4) % 5 ", "0x1f + 16#ff", "1 ? 2 : 3", ""] {
            assert!(inert_arithmetic(s.as_bytes()), "{s}");
        }
        for s in ["x", "1+x", "$x", "a[1]", "'1'", "\"1\"", "`id`", "_", "é"] {
            assert!(!inert_arithmetic(s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn finds_every_evaluating_form() {
        let found = [
            ("$((x))", Evaluated::Arithmetic),
            ("$(( 1 + $y ))", Evaluated::Arithmetic),
            ("$[x]", Evaluated::Arithmetic),
            ("$(( $(cat n) ))", Evaluated::Arithmetic),
            ("${a[x]}", Evaluated::Subscript),
            ("${a[$x]}", Evaluated::Subscript),
            ("${#a[i]}", Evaluated::Subscript),
            ("${x:$y}", Evaluated::Offset),
            ("${x:0:n}", Evaluated::Offset),
            ("${a[@]:x}", Evaluated::Offset),
            ("${!x}", Evaluated::Indirection),
            ("${!x[1]}", Evaluated::Indirection),
            ("${!1}", Evaluated::Indirection),
            ("${x@P}", Evaluated::Transformation),
            ("\"${x:-$((y))}\"", Evaluated::Arithmetic),
            ("${x/a/${b[i]}}", Evaluated::Subscript),
            ("pre$((x))post", Evaluated::Arithmetic),
            ("${@:x}", Evaluated::Offset),
            ("${*:$x}", Evaluated::Offset),
            ("${a[x]:-}", Evaluated::Subscript),
        ];
        for (text, what) in found {
            assert_eq!(evaluated(text), Some(what), "{text}");
        }
    }

    #[test]
    fn leaves_ordinary_expansions_alone() {
        for text in [
            "$((1+2))",
            "$[3*4]",
            "${HOME}",
            "$HOME/x",
            "${x:-default}",
            "${x:0:3}",
            "${x: -1}",
            "${a[@]}",
            "${a[0]}",
            "${#a[*]}",
            "${#x}",
            "${!}",
            "${!:-none}",
            "${!pre*}",
            "${!a[@]}",
            "${x@Q}",
            "${x#*/}",
            "\\$((x))",
            "$(( (1+2) * 3 ))$((4))",
        ] {
            assert_eq!(evaluated(text), None, "{text}");
        }
    }

    #[test]
    fn names_with_subscripts() {
        assert_eq!(plain_name("line"), Some("line"));
        assert_eq!(plain_name("PATH[0]"), Some("PATH"));
        assert_eq!(plain_name("a[$(id)]"), None);
        assert_eq!(plain_name("a[i]"), None);
        assert_eq!(plain_name("$n"), None);
        assert_eq!(plain_name("1x"), None);
        assert_eq!(plain_name(""), None);
    }

    #[test]
    fn descriptor_variables() {
        assert_eq!(fd_variable("{fd}"), Some("fd"));
        assert_eq!(fd_variable("{a[x]}"), Some("a[x]"));
        assert_eq!(fd_variable("{a,b}"), None);
        assert_eq!(fd_variable("{1..3}"), None);
        assert_eq!(fd_variable("x"), None);
    }

    proptest::proptest! {
        /// Arbitrary text (biased to the characters that matter) never
        /// panics, and text without `$` never needs refusing.
        #[test]
        fn any_text_scans(text in "[$({\\[\\]})!@:#x0-9 '\"\\\\a]{0,24}|\\PC{0,12}") {
            let found = evaluated(&text);
            if !text.contains('$') {
                proptest::prop_assert_eq!(found, None);
            }
            let _ = plain_name(&text);
            let _ = fd_variable(&text);
            let _ = inert_arithmetic(text.as_bytes());
        }
    }
}
