//! Text from a guest, made safe for logs, conditions, Events and terminals
//! before it leaves the runtime: bounded to a documented size (cut at a
//! character boundary, with a marker saying how much was cut) and with
//! control characters, and the invisible characters that reorder or hide
//! text, escaped as `\u{..}`. The sizes are [`bounds`](super::bounds)'
//! (`MAX_MESSAGE_BYTES` and kin).

use std::fmt::Write as _;

/// `text` with control and invisible-formatting characters escaped, cut to
/// at most `max` bytes (escapes counted) plus a marker `…[+N bytes]` when
/// anything was cut.
pub fn clean(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    for (at, c) in text.char_indices() {
        let before = out.len();
        if needs_escape(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
        if out.len() > max {
            out.truncate(before);
            let _ = write!(out, "…[+{} bytes]", text.len() - at);
            return out;
        }
    }
    out
}

/// What a guest said before it died, made safe as [`clean`] makes text,
/// except that its line breaks stay: its last `max` bytes (escapes counted)
/// with one leading marker `…[N bytes before] ` when anything was left out —
/// the `before` bytes it said that were never kept, and what is cut here —
/// since the end (a traceback's exception line) says most.
pub fn clean_tail(text: &str, before: usize, max: usize) -> String {
    let cleaned = text
        .lines()
        .map(|line| clean(line, usize::MAX))
        .collect::<Vec<_>>()
        .join("\n");
    let mut from = cleaned.len().saturating_sub(max);
    while !cleaned.is_char_boundary(from) {
        from += 1;
    }
    match from + before {
        0 => cleaned,
        left_out => format!("…[{left_out} bytes before] {}", &cleaned[from..]),
    }
}

/// Characters that would act on a terminal or a log line (C0 and C1
/// controls, DEL), or change how text around them reads: bidirectional
/// overrides and isolates, zero-width characters, line and paragraph
/// separators, the byte-order mark.
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::MAX_MESSAGE_BYTES;

    #[test]
    fn text_within_the_bound_is_kept_as_it_is() {
        assert_eq!(
            clean("quota exceeded in eu-1", 22),
            "quota exceeded in eu-1"
        );
        assert_eq!(clean("", 0), "");
        assert_eq!(clean("äöü", 6), "äöü");
    }

    #[test]
    fn last_words_keep_their_lines_and_their_end() {
        let said = "Traceback:\n  File \"app.py\"\x1b[2J\r\nValueError: bad\n";
        assert_eq!(
            clean_tail(said, 0, 100),
            "Traceback:\n  File \"app.py\"\\u{1b}[2J\nValueError: bad"
        );
        assert_eq!(clean_tail("abc\ndefä", 0, 5), "…[4 bytes before] defä");
        assert_eq!(clean_tail("abc\ndefä", 0, 4), "…[5 bytes before] efä");
        // Bytes never kept and bytes cut here make one marker.
        assert_eq!(clean_tail("abc\ndefä", 10, 5), "…[14 bytes before] defä");
        assert_eq!(clean_tail("defä", 10, 5), "…[10 bytes before] defä");
    }

    #[test]
    fn one_byte_over_the_bound_is_cut_with_a_marker() {
        assert_eq!(clean("abcdefg", 6), "abcdef…[+1 bytes]");
        // A character is never split: the cut falls before it.
        assert_eq!(clean("abcdeä", 6), "abcde…[+2 bytes]");
    }

    #[test]
    fn control_and_reordering_characters_are_escaped() {
        assert_eq!(clean("a\nb\r\u{1b}[31m", 100), "a\\u{a}b\\u{d}\\u{1b}[31m");
        assert_eq!(clean("x\0y", 100), "x\\u{0}y");
        assert_eq!(clean("abc\u{202e}cba", 100), "abc\\u{202e}cba");
        assert_eq!(clean("\u{200b}", 100), "\\u{200b}");
        // An escape counts against the bound like any other byte.
        assert_eq!(clean("ab\n", 3), "ab…[+1 bytes]");
    }

    #[test]
    fn ten_megabytes_become_the_bound_and_a_marker() {
        let huge = "x".repeat(10 << 20);
        let cleaned = clean(&huge, MAX_MESSAGE_BYTES);
        assert!(cleaned.starts_with(&"x".repeat(MAX_MESSAGE_BYTES)));
        assert!(cleaned.ends_with(&format!("…[+{} bytes]", (10 << 20) - MAX_MESSAGE_BYTES)));
    }
}
