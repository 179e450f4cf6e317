//! `cargo fuzz run lex`: the lexer must not panic on any input, and every
//! span it reports must index the input on character boundaries.

#![no_main]

use agent_exec_lexer::{Script, Span, lex};
use libfuzzer_sys::fuzz_target;

fn check_span(input: &str, span: Span) {
    assert!(span.start <= span.end && span.end <= input.len());
    assert!(input.is_char_boundary(span.start) && input.is_char_boundary(span.end));
}

fn check(input: &str, script: &Script) {
    for c in &script.commands {
        check_span(input, c.span);
        let targets = c.redirects.iter().map(|r| &r.target);
        for w in c.assignments.iter().chain(&c.words).chain(targets) {
            check_span(input, w.span);
            assert_eq!(&input[w.span.start..w.span.end], w.raw);
            for inner in &w.substitutions {
                check(input, inner);
            }
        }
    }
    for (_, span) in &script.unsupported {
        check_span(input, *span);
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    match lex(input) {
        Ok(script) => check(input, &script),
        Err(e) => {
            if let Some(p) = e.position() {
                assert!(p <= input.len() && input.is_char_boundary(p));
            }
        }
    }
});
