"""The sim-infrastructure provider's logic in plain Python: its config,
checked as the Rust provider checks it, and the pool arithmetic — which
instances a pool has, which ordinal to create next, which to terminate —
kept apart from HTTP and the WIT types so CPython unit tests run it.

A pool's instances are created with request token ``<key>-<ordinal>``;
a recorded instance keeps its ordinal through the host's records, so a
call repeated after a crash asks the cloud again with the same token and
gets the same instance back instead of a second one.
"""

import re

from capwasm_provider import config
from capwasm_provider.config import ROOT
from capwasm_provider.errors import InvalidConfig
from capwasm_provider.urls import is_base_url

DEFAULT_REGION = "local-1"
DEFAULT_CONTROL_PLANE_PORT = 6443
DEFAULT_POLL_SECONDS = 10
MAX_POLL_SECONDS = 600
BOOTSTRAP_RETRY_SECONDS = 15
# The instance type of instances created without one.
DEFAULT_INSTANCE_TYPE = "small"

_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
_DOTTED_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?\Z")


def _integer(value, path):
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(path, "invalid type, expected an integer")
    return value


def _port(value, path):
    value = _integer(value, path)
    if not 0 <= value <= 65535:
        raise InvalidConfig(path, f"invalid value: integer `{value}`, expected u16")
    return value


def _u32(value, path):
    value = _integer(value, path)
    if not 0 <= value <= 0xFFFFFFFF:
        raise InvalidConfig(path, f"invalid value: integer `{value}`, expected u32")
    return value


def _nullable(read):
    """``read``, or None for null."""

    def read_or_none(value, path):
        return None if value is None else read(value, path)

    return read_or_none


_FIELDS = {"endpoint": config.string}
_OPTIONAL = {
    "region": config.string,
    "instanceType": _nullable(config.string),
    "failureDomains": config.strings,
    "nodeLabels": config.string_map,
    "controlPlaneHost": _nullable(config.string),
    "controlPlanePort": _nullable(_port),
    "pollSeconds": _u32,
}


class Config:
    """``spec.config``; ``schema.json`` describes the same shape for the host."""

    def __init__(self, fields):
        self.endpoint = fields["endpoint"]
        self.region = fields.get("region", DEFAULT_REGION)
        self.instance_type = fields.get("instanceType")
        self.failure_domains = fields.get("failureDomains", [])
        self.node_labels = fields.get("nodeLabels", {})
        self.control_plane_host = fields.get("controlPlaneHost")
        self.control_plane_port = fields.get("controlPlanePort")
        self.poll_seconds = fields.get("pollSeconds", DEFAULT_POLL_SECONDS)

    def instance_type_url(self):
        """Where the cloud describes the instance type new instances get."""
        name = DEFAULT_INSTANCE_TYPE if self.instance_type is None else self.instance_type
        return f"{self.endpoint.rstrip('/')}/v1/instance-types/{name}"

    def region_url(self):
        return f"{self.endpoint.rstrip('/')}/v1/regions/{self.region}"

    def provider_id(self, instance_id):
        return f"sim://{self.region}/{instance_id}"

    def control_plane_endpoint(self):
        """(host, port) of the cluster's API server."""
        host = self.control_plane_host
        if host is None:
            host = _endpoint_host(self.endpoint)
        port = self.control_plane_port
        return host, DEFAULT_CONTROL_PLANE_PORT if port is None else port


def parse(text):
    """``spec.config`` parsed and checked; raises :class:`InvalidConfig`."""
    c = Config(config.parse_object(text, _FIELDS, _OPTIONAL))
    if not is_base_url(c.endpoint):
        raise InvalidConfig(
            ROOT.key("endpoint"),
            "must be an http or https URL with a host and no query, such as http://127.0.0.1:8080",
        )
    if not _NAME.match(c.region):
        raise InvalidConfig(
            ROOT.key("region"), "must be lowercase alphanumerics and '-', at most 63 characters"
        )
    if c.instance_type is not None and not _DOTTED_NAME.match(c.instance_type):
        raise InvalidConfig(
            ROOT.key("instanceType"),
            "must be lowercase alphanumerics, '-' and '.', at most 63 characters",
        )
    if not 1 <= c.poll_seconds <= MAX_POLL_SECONDS:
        raise InvalidConfig(ROOT.key("pollSeconds"), "must be 1 to 600")
    seen = set()
    for i, domain in enumerate(c.failure_domains):
        path = ROOT.key("failureDomains").index(i)
        if not _NAME.match(domain):
            raise InvalidConfig(path, "must be lowercase alphanumerics and '-', at most 63 characters")
        if domain in seen:
            raise InvalidConfig(path, "is listed twice")
        seen.add(domain)
    for key, value in c.node_labels.items():
        if not key or len(key.encode()) > 317 or len(value.encode()) > 63:
            raise InvalidConfig(
                ROOT.key("nodeLabels").key(key),
                "label keys must be 1-317 characters and values at most 63",
            )
    if c.control_plane_host == "":
        raise InvalidConfig(ROOT.key("controlPlaneHost"), "must not be empty")
    if c.control_plane_port == 0:
        raise InvalidConfig(ROOT.key("controlPlanePort"), "must be between 1 and 65535")
    return c


def _endpoint_host(url):
    rest = url.split("://", 1)[1] if "://" in url else url
    authority = rest.split("/", 1)[0]
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    return authority.split(":", 1)[0]


def request_token(key, ordinal):
    return f"{key}-{ordinal}"


def _ordinal_of(key, token):
    prefix = key + "-"
    if token is None or not token.startswith(prefix):
        return None
    digits = token[len(prefix):]
    # Rust's u32 parse: ASCII digits (a leading '+' allowed), at most u32::MAX.
    plain = digits[1:] if digits.startswith("+") else digits
    if not plain or not plain.isascii() or not plain.isdigit() or int(plain) > 0xFFFFFFFF:
        return None
    return int(plain)


class Member:
    """An instance the cloud listed for the pool, with its ordinal if known."""

    def __init__(self, ordinal, instance):
        self.ordinal = ordinal
        self.instance = instance

    def active(self):
        return self.instance["state"] != "terminating"


def _order(member):
    return (member.ordinal is None, member.ordinal or 0)


class Pool:
    """The pool as the cloud lists it, its members' ordinals from the
    instances the host recorded (``(id, request_token)`` pairs)."""

    def __init__(self, key, recorded, listed):
        tokens = {}
        for instance_id, token in recorded:
            tokens.setdefault(instance_id, token)
        self.key = key
        self.members = [
            Member(_ordinal_of(key, tokens.get(instance["id"])), instance) for instance in listed
        ]

    def active_of(self, ids):
        """Of ``ids``, those the cloud lists as active, to terminate."""
        return [m.instance["id"] for m in self.members if m.active() and m.instance["id"] in ids]

    def active_count(self):
        """How many members are not terminating."""
        return self._active_count()

    def _active_count(self):
        return sum(1 for m in self.members if m.active())

    def next_ordinal(self, desired):
        """The lowest ordinal no member has, while fewer than ``desired`` are active."""
        if self._active_count() >= desired:
            return None
        taken = {m.ordinal for m in self.members}
        ordinal = 0
        while ordinal in taken:
            ordinal += 1
        return ordinal

    def created(self, ordinal, instance):
        for member in self.members:
            if member.instance["id"] == instance["id"]:
                member.ordinal = ordinal
                member.instance = instance
                return
        self.members.append(Member(ordinal, instance))

    def surplus(self, desired):
        """Ids of the active members beyond ``desired``, highest ordinals first to go."""
        active = sorted((m for m in self.members if m.active()), key=_order)
        return [m.instance["id"] for m in active[desired:]]

    def terminating(self, instance_id):
        for member in self.members:
            if member.instance["id"] == instance_id:
                member.instance = {**member.instance, "state": "terminating"}

    def state(self, desired, poll_seconds):
        """(members in ordinal order, ready, requeue seconds or None)."""
        self.members.sort(key=_order)
        active = [m for m in self.members if m.active()]
        ready = len(active) == desired and all(m.instance["state"] == "running" for m in active)
        settled = ready and all(m.active() for m in self.members)
        return self.members, ready, None if settled else poll_seconds
