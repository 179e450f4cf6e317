//! Property tests: the lexer never panics, its spans always index the
//! request, and it is a pure function of its input.

use agent_exec_lexer::{Script, Span, Word, lex};
use proptest::prelude::*;

/// Pieces that exercise every quoting, substitution and operator path,
/// including the unbalanced ones.
const FRAGMENTS: &[&str] = &[
    "'", "\"", "`", "\\", "\\\n", "$(", "$((", "${", "$'", "$\"", "<(", ">(", "(", ")", "((", "))",
    "{", "}", "[", "]", "*", "?", "~", "#", "$", "$x", "$1", ";", ";;", "&", "&&", "|", "||", "|&",
    "<", ">", ">>", "<<", "<<-", "<<<", "<>", ">&", "&>", "2>&1", "\n", " ", "\t", "EOF", "'EOF'",
    "=", "X=", "if", "then", "fi", "case", "esac", "in", "a)", "do", "done", "function", "!", "[[",
    "]]", "ls", "é", "日本", "\u{0}", "\r", ",", "..",
];

const KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "select", "function", "coproc",
];

fn shellish() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40).prop_map(|v| v.concat())
}

fn check_span(input: &str, span: Span, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        span.start <= span.end && span.end <= input.len(),
        "{what} span {span:?} outside {input:?}"
    );
    prop_assert!(
        input.is_char_boundary(span.start) && input.is_char_boundary(span.end),
        "{what} span {span:?} not on char boundaries of {input:?}"
    );
    Ok(())
}

fn check_word(input: &str, w: &Word) -> Result<(), TestCaseError> {
    check_span(input, w.span, "word")?;
    prop_assert_eq!(&input[w.span.start..w.span.end], w.raw.as_str());
    for s in &w.substitutions {
        check_script(input, s)?;
    }
    Ok(())
}

fn check_script(input: &str, s: &Script) -> Result<(), TestCaseError> {
    for c in &s.commands {
        check_span(input, c.span, "command")?;
        for w in c.assignments.iter().chain(&c.words) {
            check_word(input, w)?;
        }
        for r in &c.redirects {
            check_word(input, &r.target)?;
        }
    }
    for (_, span) in &s.unsupported {
        check_span(input, *span, "unsupported")?;
    }
    Ok(())
}

fn check_all(input: &str) -> Result<(), TestCaseError> {
    let first = lex(input);
    prop_assert_eq!(&first, &lex(input), "not deterministic");
    match &first {
        Ok(s) => check_script(input, s)?,
        Err(e) => {
            if let Some(p) = e.position() {
                prop_assert!(
                    p <= input.len() && input.is_char_boundary(p),
                    "error at {p} in {input:?}"
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings(input in any::<String>()) {
        check_all(&input)?;
    }

    #[test]
    fn printable_ascii(input in "[ -~\n\t]{0,200}") {
        check_all(&input)?;
    }

    #[test]
    fn shell_fragments(input in shellish()) {
        check_all(&input)?;
    }

    /// Plain words need no shell and keep their exact text.
    #[test]
    fn plain_words_run_without_a_shell(
        words in prop::collection::vec("[a-zA-Z0-9_./:@%+-]{1,12}", 1..10)
            .prop_filter("a keyword first is not a program", |w| !KEYWORDS.contains(&w[0].as_str()))
    ) {
        let input = words.join(" ");
        let s = lex(&input).unwrap();
        prop_assert!(!s.needs_shell);
        let values: Vec<&str> = s.commands[0].words.iter().map(|w| w.value.as_str()).collect();
        prop_assert_eq!(values, words.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// Anything inside single quotes comes back verbatim, with no feature
    /// but `quoted`.
    #[test]
    fn single_quotes_are_literal(text in "[^']{0,60}") {
        let s = lex(&format!("echo '{text}'")).unwrap();
        let w = &s.commands[0].words[1];
        prop_assert_eq!(&w.value, &text);
        prop_assert!(w.substitutions.is_empty());
        prop_assert!(!s.needs_shell);
    }

    /// Joining commands with an operator yields one command per part.
    #[test]
    fn operators_split(parts in prop::collection::vec("x[a-z]{0,8}", 1..20), op in prop::sample::select(&[";", "&&", "||", "|", "&", "\n"][..])) {
        let input = parts.join(&format!(" {op} "));
        let s = lex(&input).unwrap();
        prop_assert_eq!(s.commands.len(), parts.len());
    }
}
