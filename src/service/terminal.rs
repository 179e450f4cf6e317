//! Text from a request or a command's output, made safe to show a person
//! on a terminal. Escape sequences can move the cursor, erase and rewrite
//! lines, change the title or the clipboard; bidirectional overrides
//! reorder what is displayed; zero-width and other invisible characters
//! hide text. Any of them lets an agent (or the files it reads) make a
//! prompt say something else than what will run. Every such character is
//! shown escaped instead (`\x1b`, `\u{202e}`), so what is on the screen
//! is what the bytes say.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control, bidi and invisible character escaped,
/// newlines and tabs included: for one-line fields (a command to
/// approve, a reason).
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// [`visible`] for multi-line output: newlines and tabs are kept as
/// they are, everything else is escaped alike.
pub fn visible_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// The one function both forms go through.
fn escape(text: &str, keep_layout: bool) -> Cow<'_, str> {
    let hidden = |c: char| needs_escape(c) && !(keep_layout && matches!(c, '\n' | '\t'));
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !hidden(c) {
            out.push(c);
        } else if c.is_ascii() {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Characters that change or hide what a terminal shows: C0 and C1
/// controls and DEL; bidirectional embeddings, overrides, isolates and
/// marks; zero-width and other invisible format characters (joiners,
/// word joiner, invisible operators, the BOM, the soft hyphen, line and
/// paragraph separators, fillers, interlinear annotations); tag
/// characters, which can spell hidden text.
pub fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for s in ["cat README.md", "grep -n 'ünïcödé ✓' src", "", "a\\x1b b"] {
            assert!(matches!(visible(s), Cow::Borrowed(t) if t == s), "{s:?}");
        }
        assert!(matches!(
            visible_lines("a\n\tb\n"),
            Cow::Borrowed("a\n\tb\n")
        ));
    }

    #[test]
    fn c0_controls_del_and_c1_controls_are_escaped() {
        assert_eq!(visible("a\x1b[2Kb"), "a\\x1b[2Kb");
        assert_eq!(visible("\r\x07\x08\0"), "\\x0d\\x07\\x08\\x00");
        assert_eq!(visible("x\x7fy"), "x\\x7fy");
        // C1: CSI (U+009B) starts an escape sequence on its own in many
        // terminals; NEL (U+0085) is a newline.
        assert_eq!(visible("\u{9b}2K\u{85}"), "\\u{9b}2K\\u{85}");
        assert_eq!(visible("a\nb\tc"), "a\\x0ab\\x09c");
    }

    #[test]
    fn bidi_overrides_isolates_and_marks_are_escaped() {
        for c in ('\u{202a}'..='\u{202e}').chain('\u{2066}'..='\u{2069}') {
            let s = format!("ls {c}txt.exe");
            assert_eq!(
                visible(&s),
                format!("ls \\u{{{:x}}}txt.exe", c as u32),
                "{c:?}"
            );
        }
        assert_eq!(
            visible("\u{200e}\u{200f}\u{61c}"),
            "\\u{200e}\\u{200f}\\u{61c}"
        );
    }

    #[test]
    fn zero_width_and_invisible_characters_are_escaped() {
        for c in ('\u{200b}'..='\u{200f}')
            .chain('\u{2060}'..='\u{2064}')
            .chain([
                '\u{feff}', '\u{ad}', '\u{2028}', '\u{2029}', '\u{180e}', '\u{3164}',
            ])
        {
            let s = format!("rm{c}-rf");
            assert_eq!(visible(&s), format!("rm\\u{{{:x}}}-rf", c as u32), "{c:?}");
        }
    }

    #[test]
    fn tag_characters_are_escaped() {
        // "hi" spelled in tags, invisible on screen.
        let s = "ok\u{e0068}\u{e0069}\u{e007f}";
        assert_eq!(visible(s), "ok\\u{e0068}\\u{e0069}\\u{e007f}");
    }

    #[test]
    fn output_keeps_its_lines_and_tabs_only() {
        assert_eq!(
            visible_lines("line 1\n\x1b]0;title\x07line\t2\r\n"),
            "line 1\n\\x1b]0;title\\x07line\t2\\x0d\n"
        );
    }

    #[test]
    fn ordinary_non_ascii_text_is_kept() {
        for s in ["日本語", "Ελληνικά", "emoji ✅🚀", "e\u{301}", "\u{a0}nbsp"] {
            assert_eq!(visible(s), s);
        }
    }
}
