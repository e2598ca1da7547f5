"""A YAML writer for the cloud-config, byte for byte the Rust provider's.

Values are strings, maps (insertion order), lists, or ``Documents`` (YAML
documents joined by ``---``, written as a block string). Every string is
double-quoted unless it is a multi-line block that reads back unchanged.
"""


class Documents(list):
    """Several YAML documents, written one after another."""


_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<", "="}
_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def write(node):
    """``node`` as YAML text."""
    out = []
    _write_at(out, node, 0)
    return "".join(out)


def _write_at(out, node, indent):
    if isinstance(node, str):
        out.append(" " * indent + _quote(node) + "\n")
    elif isinstance(node, Documents):
        for i, document in enumerate(node):
            if i > 0:
                out.append(" " * indent + "---\n")
            _write_at(out, document, indent)
    elif isinstance(node, dict) and not node:
        out.append(" " * indent + "{}\n")
    elif isinstance(node, list) and not node:
        out.append(" " * indent + "[]\n")
    elif isinstance(node, dict):
        _write_map(out, node, indent, False)
    else:
        _write_list(out, node, indent)


def _write_map(out, entries, indent, on_dash_line):
    for i, (key, value) in enumerate(entries.items()):
        if i > 0 or not on_dash_line:
            out.append(" " * indent)
        out.append(_key(key) + ":")
        _write_value(out, value, indent)


def _write_list(out, items, indent):
    for item in items:
        out.append(" " * indent)
        if isinstance(item, dict) and item:
            out.append("- ")
            _write_map(out, item, indent + 2, True)
        else:
            out.append("-")
            _write_value(out, item, indent)


def _write_value(out, value, indent):
    if isinstance(value, str) and _block_safe(value):
        out.append(" |\n")
        for line in value[:-1].split("\n"):
            if line:
                out.append(" " * (indent + 2) + line)
            out.append("\n")
    elif isinstance(value, str):
        out.append(" " + _quote(value) + "\n")
    elif isinstance(value, Documents) and not value:
        out.append(' ""\n')
    elif isinstance(value, Documents):
        out.append(" |\n")
        _write_at(out, value, indent + 2)
    elif isinstance(value, dict) and not value:
        out.append(" {}\n")
    elif isinstance(value, list) and not value:
        out.append(" []\n")
    elif isinstance(value, dict):
        out.append("\n")
        _write_map(out, value, indent + 2, False)
    else:
        out.append("\n")
        _write_list(out, value, indent + 2)


def _printable(c):
    code = ord(c)
    return (
        0x20 <= code <= 0x7E
        or 0xA0 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or code >= 0x10000
    ) and code != 0xFEFF


def _block_safe(s):
    return (
        "\n" in s
        and s.endswith("\n")
        and not s.endswith("\n\n")
        and not s.startswith((" ", "\t", "\n"))
        and all(c == "\n" or _printable(c) for c in s)
    )


def _quote(s):
    out = ['"']
    for c in s:
        escape = _ESCAPES.get(c)
        if escape is not None:
            out.append(escape)
        elif _printable(c):
            out.append(c)
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


def _key(key):
    plain = (
        key[:1].isascii()
        and (key[:1].isalpha() or key[:1] == "_")
        and all(c in _KEY_CHARS for c in key)
        and key.lower() not in _RESERVED
    )
    return key if plain else _quote(key)
