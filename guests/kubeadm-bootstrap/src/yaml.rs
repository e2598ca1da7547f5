//! A minimal YAML emitter for the documents this provider writes.
//!
//! Every scalar is a string, emitted double-quoted (with every character
//! YAML does not allow raw escaped) or, for multi-line text this crate
//! built itself, as a literal block. Nothing a user writes in the config
//! can change the structure of the output.

use std::fmt::Write as _;

/// A YAML value: a string, a mapping (in order) or a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Str(String),
    Map(Vec<(String, Node)>),
    List(Vec<Node>),
}

impl Node {
    /// A string node.
    pub fn str(value: impl Into<String>) -> Self {
        Self::Str(value.into())
    }

    /// A mapping node from `(key, value)` pairs.
    pub fn map<K: Into<String>>(entries: impl IntoIterator<Item = (K, Node)>) -> Self {
        Self::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A sequence of strings.
    pub fn strs<S: Into<String>>(items: impl IntoIterator<Item = S>) -> Self {
        Self::List(items.into_iter().map(|s| Self::Str(s.into())).collect())
    }
}

/// Renders `node` as the body of a YAML document, ending in a newline.
pub fn to_string(node: &Node) -> String {
    let mut out = String::new();
    match node {
        Node::Str(s) => {
            out.push_str(&quote(s));
            out.push('\n');
        }
        Node::Map(entries) if entries.is_empty() => out.push_str("{}\n"),
        Node::List(items) if items.is_empty() => out.push_str("[]\n"),
        Node::Map(entries) => write_map(&mut out, entries, 0),
        Node::List(items) => write_list(&mut out, items, 0),
    }
    out
}

fn write_map(out: &mut String, entries: &[(String, Node)], indent: usize) {
    for (key, value) in entries {
        pad(out, indent);
        out.push_str(&key_text(key));
        out.push(':');
        write_value(out, value, indent);
    }
}

fn write_list(out: &mut String, items: &[Node], indent: usize) {
    for item in items {
        match item {
            // A mapping item starts on the dash line: render it two columns
            // in, then put the dash into the first line's padding.
            Node::Map(entries) if !entries.is_empty() => {
                let mut nested = String::new();
                write_map(&mut nested, entries, indent + 2);
                pad(out, indent);
                out.push_str("- ");
                out.push_str(nested.get(indent + 2..).unwrap_or(&nested));
            }
            _ => {
                pad(out, indent);
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
            out.push_str(&quote(s));
            out.push('\n');
        }
        Node::Map(entries) if entries.is_empty() => out.push_str(" {}\n"),
        Node::List(items) if items.is_empty() => out.push_str(" []\n"),
        Node::Map(entries) => {
            out.push('\n');
            write_map(out, entries, indent + 2);
        }
        Node::List(items) => {
            out.push('\n');
            write_list(out, items, indent + 2);
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
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
        && s.chars().all(|c| c == '\n' || printable(c))
}

/// A double-quoted scalar; JSON-style escapes, which YAML shares.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c if u32::from(c) <= 0xffff => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// Keys are plain when they cannot be read as anything but a string.
fn key_text(key: &str) -> String {
    const RESERVED: [&str; 12] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<", "=",
    ];
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !RESERVED.contains(&key.to_ascii_lowercase().as_str());
    if plain { key.to_owned() } else { quote(key) }
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
    fn block_scalar_used_only_for_safe_multiline_text() {
        let doc = Node::map([("content", Node::str("a: 1\n\nb: 2\n"))]);
        assert_eq!(to_string(&doc), "content: |\n  a: 1\n\n  b: 2\n");
        let leading_space = Node::map([("content", Node::str(" a\n"))]);
        assert_eq!(to_string(&leading_space), "content: \" a\\n\"\n");
        let no_final_newline = Node::map([("content", Node::str("a\nb"))]);
        assert_eq!(to_string(&no_final_newline), "content: \"a\\nb\"\n");
    }

    #[test]
    fn key_text_quotes_keys_yaml_would_misread() {
        assert_eq!(key_text("node-labels"), "node-labels");
        assert_eq!(key_text("on"), "\"on\"");
        assert_eq!(key_text("a: b"), "\"a: b\"");
        assert_eq!(key_text("1x"), "\"1x\"");
    }
}
