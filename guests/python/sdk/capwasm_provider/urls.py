"""URL helpers of the HTTP client, free of the WIT bindings."""

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def encode_component(value):
    """``value`` percent-encoded for a path segment or a query value."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in value.encode())


def is_base_url(url):
    """An http(s) URL with a host, no user info, query or fragment."""
    for scheme in ("http://", "https://"):
        if url.startswith(scheme):
            host = url[len(scheme):].split("/", 1)[0]
            return (
                bool(host)
                and "@" not in host
                and "?" not in url
                and "#" not in url
                and not any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in url)
            )
    return False
