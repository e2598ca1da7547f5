"""Parsing a provider's ``spec.config`` with the JSON path of every problem.

The host checks the config against the provider's JSON Schema before any
call, but a provider must not trust that: :func:`parse_object` reports the
first value that does not fit, in document order, as :class:`InvalidConfig`
with its path (``$.caCertHashes[1]``), as the Rust SDK does.
"""

import json
import re

from .errors import InvalidConfig

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class JsonPath:
    """A JSON path: ``$``, ``$.token``, ``$.labels['node.example/role']``."""

    __slots__ = ("_text",)

    def __init__(self, text="$"):
        self._text = text

    def key(self, key):
        """A member of the object at this path."""
        if _PLAIN_KEY.match(key):
            return JsonPath(f"{self._text}.{key}")
        escaped = key.replace("\\", "\\\\").replace("'", "\\'")
        return JsonPath(f"{self._text}['{escaped}']")

    def index(self, index):
        """An element of the array at this path."""
        return JsonPath(f"{self._text}[{index}]")

    def __str__(self):
        return self._text

    def __repr__(self):
        return f"JsonPath({self._text!r})"


ROOT = JsonPath()


def string(value, path):
    """``value`` if it is a string."""
    if not isinstance(value, str):
        raise InvalidConfig(path, f"invalid type: {_kind(value)}, expected a string")
    return value


def strings(value, path):
    """``value`` if it is a list of strings."""
    if not isinstance(value, list):
        raise InvalidConfig(path, f"invalid type: {_kind(value)}, expected a sequence")
    return [string(item, path.index(i)) for i, item in enumerate(value)]


def string_map(value, path):
    """``value`` if it is an object of strings, sorted by key."""
    if not isinstance(value, dict):
        raise InvalidConfig(path, f"invalid type: {_kind(value)}, expected a map")
    checked = {key: string(item, path.key(key)) for key, item in value.items()}
    return dict(sorted(checked.items()))


def one_of(*choices):
    """A field reader accepting only ``choices``."""

    def read(value, path):
        if value not in choices:
            expected = " or ".join(f"`{c}`" for c in choices)
            raise InvalidConfig(path, f"unknown variant {json.dumps(value)}, expected {expected}")
        return value

    return read


def parse_object(text, required, optional):
    """Parses ``text`` as a JSON object with exactly these fields.

    ``required`` and ``optional`` map each field's JSON name to a reader
    ``(value, path) -> parsed``; an optional field left out is absent from
    the result. Unknown fields are refused.
    """
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InvalidConfig(ROOT, f"not JSON: {error}") from None
    if not isinstance(document, dict):
        raise InvalidConfig(ROOT, f"invalid type: {_kind(document)}, expected a config object")
    parsed = {}
    for name, value in document.items():
        read = required.get(name) or optional.get(name)
        if read is None:
            raise InvalidConfig(ROOT.key(name), f"unknown field `{name}`")
        parsed[name] = read(value, ROOT.key(name))
    for name in required:
        if name not in parsed:
            raise InvalidConfig(ROOT, f"missing field `{name}`")
    return parsed


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, (int, float)):
        return f"number {value}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "sequence"
    return "map"
