//! A minimal YAML emitter for the documents this provider writes.
//!
//! Every scalar is a string, emitted double-quoted (with every character
//! YAML does not allow raw escaped) or, for multi-line text this crate
//! built itself, as a literal block. Nothing a user writes in the config
//! can change the structure of the output.

use alloc::borrow::Cow;
use core::fmt::Write as _;

use capwasm_provider_sdk::prelude::*;

/// A YAML value: a string, a mapping (in order), a sequence, or YAML
/// documents that this emitter writes into a literal block (a file's
/// content). Keys and strings borrow from the config where they can: a
/// call builds and drops one tree, and copying every scalar into it was
/// most of its cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node<'a> {
    Str(Cow<'a, str>),
    Map(Vec<(Cow<'a, str>, Node<'a>)>),
    List(Vec<Node<'a>>),
    Documents(Vec<Node<'a>>),
}

impl<'a> Node<'a> {
    /// A string node.
    pub fn str(value: impl Into<Cow<'a, str>>) -> Self {
        Self::Str(value.into())
    }

    /// A mapping node from `(key, value)` pairs.
    pub fn map<K: Into<Cow<'a, str>>>(entries: impl IntoIterator<Item = (K, Node<'a>)>) -> Self {
        Self::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A sequence of strings.
    pub fn strs<S: Into<Cow<'a, str>>>(items: impl IntoIterator<Item = S>) -> Self {
        Self::List(items.into_iter().map(|s| Self::Str(s.into())).collect())
    }
}

/// Renders `node` as the body of a YAML document, ending in a newline.
#[cfg(test)]
pub fn to_string(node: &Node) -> String {
    let mut out = String::new();
    write(&mut out, node);
    out
}

/// Appends `node` to `out` as the body of a YAML document, ending in a
/// newline.
pub fn write(out: &mut String, node: &Node) {
    write_at(out, node, 0);
}

/// Writes `node` as a document whose lines start at `indent`.
fn write_at(out: &mut String, node: &Node, indent: usize) {
    match node {
        Node::Str(s) => {
            pad(out, indent);
            quote_into(out, s);
            out.push('\n');
        }
        Node::Map(entries) if entries.is_empty() => {
            pad(out, indent);
            out.push_str("{}\n");
        }
        Node::List(items) if items.is_empty() => {
            pad(out, indent);
            out.push_str("[]\n");
        }
        Node::Map(entries) => write_map(out, entries, indent, false),
        Node::List(items) => write_list(out, items, indent),
        Node::Documents(documents) => {
            for (i, document) in documents.iter().enumerate() {
                if i > 0 {
                    pad(out, indent);
                    out.push_str("---\n");
                }
                write_at(out, document, indent);
            }
        }
    }
}

/// Writes `entries` at `indent`; with `on_dash_line` the first entry goes
/// where the caller left off (after a list item's `- `).
fn write_map(out: &mut String, entries: &[(Cow<str>, Node)], indent: usize, on_dash_line: bool) {
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 || !on_dash_line {
            pad(out, indent);
        }
        key_into(out, key);
        out.push(':');
        write_value(out, value, indent);
    }
}

fn write_list(out: &mut String, items: &[Node], indent: usize) {
    for item in items {
        pad(out, indent);
        match item {
            // A mapping item starts on the dash line, its other entries two
            // columns in.
            Node::Map(entries) if !entries.is_empty() => {
                out.push_str("- ");
                write_map(out, entries, indent + 2, true);
            }
            _ => {
                out.push('-');
                write_value(out, item, indent);
            }
        }
    }
}

/// Writes what follows `key:` or `-`, including the line break.
fn write_value(out: &mut String, value: &Node, indent: usize) {
    match value {
        Node::Str(s) if block_safe(s) => {
            out.push_str(" |\n");
            for line in s.lines() {
                if !line.is_empty() {
                    pad(out, indent + 2);
                    out.push_str(line);
                }
                out.push('\n');
            }
        }
        Node::Str(s) => {
            out.push(' ');
            quote_into(out, s);
            out.push('\n');
        }
        Node::Map(entries) if entries.is_empty() => out.push_str(" {}\n"),
        Node::List(items) if items.is_empty() => out.push_str(" []\n"),
        Node::Map(entries) => {
            out.push('\n');
            write_map(out, entries, indent + 2, false);
        }
        Node::List(items) => {
            out.push('\n');
            write_list(out, items, indent + 2);
        }
        Node::Documents(documents) if documents.is_empty() => out.push_str(" \"\"\n"),
        // Written straight into the block: every line this emitter writes
        // is printable, none is blank or starts with a space, and the last
        // ends in exactly one line break, which is what `block_safe` checks
        // of a string.
        Node::Documents(_) => {
            out.push_str(" |\n");
            write_at(out, value, indent + 2);
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    const SPACES: &str = "                                ";
    let mut left = indent;
    while left > 0 {
        let n = left.min(SPACES.len());
        out.push_str(&SPACES[..n]);
        left -= n;
    }
}

/// YAML's printable set (YAML 1.2 §5.1) less NEL, which some parsers
/// treat as a line break.
fn printable(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && c != '\u{feff}'
}

/// Whether `s` can be a literal block (`|`) with clip chomping and no
/// indentation indicator: several lines, exactly one final line break,
/// no leading blank, nothing that needs escaping.
fn block_safe(s: &str) -> bool {
    s.contains('\n')
        && s.ends_with('\n')
        && !s.ends_with("\n\n")
        && !s.starts_with([' ', '\t', '\n'])
        && (s.bytes().all(|b| b == b'\n' || matches!(b, 0x20..=0x7e))
            || s.chars().all(|c| c == '\n' || printable(c)))
}

/// A double-quoted scalar; JSON-style escapes, which YAML shares.
#[cfg(test)]
fn quote(s: &str) -> String {
    let mut out = String::new();
    quote_into(&mut out, s);
    out
}

/// Appends `s` double-quoted. Runs of characters that need no escape are
/// copied whole, and ASCII is checked eight bytes at a time: most scalars
/// are one such run.
fn quote_into(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut plain_from = 0;
    let mut at = 0;
    loop {
        at = plain_ascii_run(s.as_bytes(), at);
        // `at` is a character boundary: only ASCII bytes were skipped.
        let Some(c) = s[at..].chars().next() else {
            break;
        };
        let escape = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\t' => "\\t",
            '\r' => "\\r",
            c if printable(c) => {
                at += c.len_utf8();
                continue;
            }
            _ => "",
        };
        out.push_str(&s[plain_from..at]);
        at += c.len_utf8();
        plain_from = at;
        if escape.is_empty() {
            let code = u32::from(c);
            let _ = if code <= 0xffff {
                write!(out, "\\u{code:04x}")
            } else {
                write!(out, "\\U{code:08x}")
            };
        } else {
            out.push_str(escape);
        }
    }
    out.push_str(&s[plain_from..]);
    out.push('"');
}

/// Where the run of [`plain_ascii`] bytes starting at `at` ends. Whole
/// words are tested at once (SWAR: a byte's high bit says whether it is
/// below 0x20, at least 0x7f, `"` or `\\`), the rest byte by byte.
fn plain_ascii_run(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // High bit set in some byte iff some byte of `x` is zero (exact for
    // "any", which is all this asks).
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    while let Some(word) = bytes.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        let x = u64::from_le_bytes(*word);
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let del_or_not_ascii = (x.wrapping_add(ONES) | x) & HIGH;
        let quote = has_zero(x ^ (ONES * u64::from(b'"')));
        let backslash = has_zero(x ^ (ONES * u64::from(b'\\')));
        if control | del_or_not_ascii | quote | backslash != 0 {
            break;
        }
        at += 8;
    }
    while bytes.get(at).is_some_and(|&b| plain_ascii(b)) {
        at += 1;
    }
    at
}

/// Printable ASCII that a double-quoted scalar carries as is.
fn plain_ascii(b: u8) -> bool {
    matches!(b, 0x20..=0x7e) && b != b'"' && b != b'\\'
}

/// Appends `key`, plain when it cannot be read as anything but a string.
fn key_into(out: &mut String, key: &str) {
    const RESERVED: [&str; 12] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<", "=",
    ];
    // Every reserved word is at most five bytes long.
    let reserved =
        |key: &str| key.len() <= 5 && RESERVED.iter().any(|r| r.eq_ignore_ascii_case(key));
    let plain = key
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'/'))
        && !reserved(key);
    if plain {
        out.push_str(key);
    } else {
        quote_into(out, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_string_nests_maps_and_lists() {
        let doc = Node::map([
            ("kind", Node::str("JoinConfiguration")),
            (
                "args",
                Node::List(vec![Node::map([
                    ("name", Node::str("a")),
                    ("value", Node::str("b")),
                ])]),
            ),
            ("cmds", Node::strs(["x", "y"])),
            ("empty", Node::Map(vec![])),
        ]);
        assert_eq!(
            to_string(&doc),
            "kind: \"JoinConfiguration\"\nargs:\n  - name: \"a\"\n    value: \"b\"\ncmds:\n  - \"x\"\n  - \"y\"\nempty: {}\n"
        );
    }

    #[test]
    fn quote_escapes_structure_and_unprintable_characters() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("x\ny: z"), r#""x\ny: z""#);
        assert_eq!(quote("\u{7f}\u{85}\u{feff}"), r#""\u007f\u0085\ufeff""#);
        assert_eq!(quote("é 🚀"), "\"é 🚀\"");
    }

    #[test]
    fn plain_ascii_run_stops_at_the_first_byte_to_escape_at_any_offset() {
        let to_escape = [0x00, 0x09, 0x0a, 0x1f, b'"', b'\\', 0x7f, 0x80, 0xc3, 0xff];
        for len in 0..20 {
            let mut bytes = vec![b'a'; len];
            assert_eq!(plain_ascii_run(&bytes, 0), len);
            for at in 0..len {
                for b in to_escape {
                    bytes[at] = b;
                    assert_eq!(plain_ascii_run(&bytes, 0), at, "{b:#x} at {at} of {len}");
                    bytes[at] = b'~';
                    assert_eq!(plain_ascii_run(&bytes, 0), len);
                    bytes[at] = b' ';
                }
            }
        }
    }

    #[test]
    fn block_scalar_used_only_for_safe_multiline_text() {
        let doc = Node::map([("content", Node::str("a: 1\n\nb: 2\n"))]);
        assert_eq!(to_string(&doc), "content: |\n  a: 1\n\n  b: 2\n");
        let leading_space = Node::map([("content", Node::str(" a\n"))]);
        assert_eq!(to_string(&leading_space), "content: \" a\\n\"\n");
        let no_final_newline = Node::map([("content", Node::str("a\nb"))]);
        assert_eq!(to_string(&no_final_newline), "content: \"a\\nb\"\n");
    }

    #[test]
    fn documents_render_as_the_block_of_their_text() {
        let first = Node::map([
            ("kind", Node::str("A")),
            ("list", Node::strs(["x", "y\nz"])),
            (
                "maps",
                Node::List(vec![Node::map([
                    ("k", Node::str("v")),
                    ("l", Node::str("w")),
                ])]),
            ),
            ("empty", Node::Map(vec![])),
        ]);
        let second = Node::strs(["b"]);
        let text = format!("{}---\n{}", to_string(&first), to_string(&second));
        let as_text = Node::map([("content", Node::str(text))]);
        let as_documents = Node::map([("content", Node::Documents(vec![first, second]))]);
        assert_eq!(to_string(&as_documents), to_string(&as_text));
        assert_eq!(
            to_string(&Node::map([("content", Node::Documents(vec![]))])),
            "content: \"\"\n"
        );
    }

    fn key_text(key: &str) -> String {
        let mut out = String::new();
        key_into(&mut out, key);
        out
    }

    #[test]
    fn key_text_quotes_keys_yaml_would_misread() {
        assert_eq!(key_text("node-labels"), "node-labels");
        assert_eq!(key_text("on"), "\"on\"");
        assert_eq!(key_text("a: b"), "\"a: b\"");
        assert_eq!(key_text("1x"), "\"1x\"");
    }
}
