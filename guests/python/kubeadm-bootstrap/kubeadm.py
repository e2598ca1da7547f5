"""The kubeadm bootstrap provider's logic, as plain functions: the config
checked as the Rust provider checks it, and the same cloud-config rendered
from it. ``app.py`` wires these to the WIT exports; the unit tests run them
with CPython alone.
"""

import re

from capwasm_provider import config
from capwasm_provider.config import ROOT
from capwasm_provider.errors import InvalidConfig, RetryAfter, Terminal

import yamlout

JOIN_CONFIG_PATH = "/run/kubeadm/kubeadm-join-config.yaml"
INIT_CONFIG_PATH = "/run/kubeadm/kubeadm.yaml"
# Written when kubeadm succeeded, as Cluster API's kubeadm provider does.
SENTINEL = "mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete"
ENDPOINT_RETRY_SECONDS = 30

_TOKEN = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}\Z")
_CA_HASH = re.compile(r"sha256:[0-9a-fA-F]{64}\Z")
_FLAG = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?\Z")
_DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
# Rust's u32 parse takes a leading "+" for major and minor.
_VERSION = re.compile(r"v?\+?([0-9]+)\.\+?([0-9]+)\.[0-9]+([-+].*)?\Z", re.DOTALL)
# Rust's str::trim: Unicode White_Space (Python's strip adds \x1c-\x1f).
_BLANK = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*\\Z")
_U32_MAX = 0xFFFFFFFF

_FIELDS = {"mode": config.one_of("join", "init")}
_OPTIONAL = {
    "token": config.string,
    "caCertHashes": config.strings,
    "kubeletExtraArgs": config.string_map,
    "preKubeadmCommands": config.strings,
    "postKubeadmCommands": config.strings,
    "nodeLabels": config.string_map,
}


def parse(text):
    """``spec.config`` parsed and checked; raises :class:`InvalidConfig`."""
    parsed = config.parse_object(text, _FIELDS, _OPTIONAL)
    for name, empty in (
        ("token", ""),
        ("caCertHashes", []),
        ("kubeletExtraArgs", {}),
        ("preKubeadmCommands", []),
        ("postKubeadmCommands", []),
        ("nodeLabels", {}),
    ):
        parsed.setdefault(name, empty)
    _validate(parsed)
    return parsed


def with_token(c, host):
    """The config with the token a machine joins with: its own if it sets
    one (whoever set it looks after it), else ``host()``'s, the one the host
    made for this call (it keeps that one alive while machines have to
    join); raises :class:`InvalidConfig` when there is neither."""
    if not c["token"]:
        token = host()
        if token is None:
            raise InvalidConfig(ROOT.key("token"), "no token: set one, or give the Cluster a kubeconfig Secret so that the host makes one")
        c["token"] = token
    return c


def _validate(c):
    if c["token"] and not _TOKEN.match(c["token"]):
        raise InvalidConfig(
            ROOT.key("token"),
            "must be a kubeadm bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}",
        )
    if c["mode"] == "join" and not c["caCertHashes"]:
        raise InvalidConfig(
            ROOT.key("caCertHashes"),
            "join needs at least one CA certificate hash to pin the cluster's CA",
        )
    for i, value in enumerate(c["caCertHashes"]):
        if not _CA_HASH.match(value):
            raise InvalidConfig(
                ROOT.key("caCertHashes").index(i),
                "must be sha256: followed by 64 hexadecimal digits",
            )
    for name, value in c["kubeletExtraArgs"].items():
        path = ROOT.key("kubeletExtraArgs").key(name)
        if not _FLAG.match(name):
            raise InvalidConfig(
                path, "must be a kubelet flag name without leading dashes, such as max-pods"
            )
        if any(_is_control(ch) for ch in value):
            raise InvalidConfig(path, "must not contain control characters")
    if c["nodeLabels"] and "node-labels" in c["kubeletExtraArgs"]:
        raise InvalidConfig(
            ROOT.key("nodeLabels"),
            "set node labels either in nodeLabels or in kubeletExtraArgs.node-labels, not both",
        )
    for key, value in c["nodeLabels"].items():
        path = ROOT.key("nodeLabels").key(key)
        if not _is_label_key(key):
            raise InvalidConfig(
                path,
                "must be a label key: an optional DNS subdomain prefix and '/', "
                "then a name of at most 63 characters",
            )
        if value and not _LABEL_NAME.match(value):
            raise InvalidConfig(
                path,
                "must be a label value: at most 63 alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric",
            )
    for field in ("preKubeadmCommands", "postKubeadmCommands"):
        for i, command in enumerate(c[field]):
            if _BLANK.match(command):
                raise InvalidConfig(ROOT.key(field).index(i), "must not be empty")


def _is_control(ch):
    # Rust's char::is_control: the Unicode Cc category.
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _is_label_key(key):
    prefix, slash, name = key.partition("/")
    if not slash:
        return bool(_LABEL_NAME.match(key))
    return (
        len(prefix) <= 253
        and all(_DNS_LABEL.match(label) for label in prefix.split("."))
        and bool(_LABEL_NAME.match(name))
    )


def _kubeadm_api(version):
    """kubeadm.k8s.io/v1beta4 unless the cluster runs Kubernetes < 1.31."""
    if version is None:
        return "v1beta4"
    match = _VERSION.match(version)
    if not match or max(int(match.group(1)), int(match.group(2))) > _U32_MAX:
        raise Terminal(
            "InvalidKubernetesVersion",
            f"the cluster's Kubernetes version {_debug(version)} is not of the form v1.31.2",
        )
    major, minor = int(match.group(1)), int(match.group(2))
    return "v1beta3" if (major, minor) < (1, 31) else "v1beta4"


_DEBUG_ESCAPES = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\r": "\\r", "\n": "\\n", "\0": "\\0"}


def _debug(s):
    # Rust's {:?} of a string, for ASCII and the C0/C1 controls (Rust also
    # escapes some characters beyond: combining marks, invisible ones).
    out = []
    for c in s:
        escape = _DEBUG_ESCAPES.get(c)
        if escape is not None:
            out.append(escape)
        elif _is_control(c):
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def authority(host, port):
    """``host:port``, an IPv6 host in brackets."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def render(c, cluster):
    """The ``#cloud-config`` document for config ``c`` in ``cluster``.

    ``cluster`` has ``name``, ``namespace``, ``endpoint`` (``(host, port)``
    or None) and ``kubernetes_version`` (or None).
    """
    if cluster["endpoint"] is None:
        raise RetryAfter(
            ENDPOINT_RETRY_SECONDS,
            f"the control-plane endpoint of cluster {cluster['namespace']}/{cluster['name']} "
            f"is not known yet; kubeadm {c['mode']} needs it",
        )
    api = "kubeadm.k8s.io/" + _kubeadm_api(cluster["kubernetes_version"])
    endpoint = authority(*cluster["endpoint"])
    if c["mode"] == "join":
        path = JOIN_CONFIG_PATH
        kubeadm_config = _join_configuration(c, endpoint, api)
    else:
        path = INIT_CONFIG_PATH
        kubeadm_config = _init_configuration(c, cluster, endpoint, api)
    command = f"kubeadm {c['mode']} --config {path} && {SENTINEL}"
    document = {
        "write_files": [
            {
                "path": path,
                "owner": "root:root",
                "permissions": "0640",
                "content": kubeadm_config,
            }
        ],
        "runcmd": [*c["preKubeadmCommands"], command, *c["postKubeadmCommands"]],
    }
    return "#cloud-config\n" + yamlout.write(document)


def _join_configuration(c, endpoint, api):
    document = {
        "apiVersion": api,
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": endpoint,
                "token": c["token"],
                "caCertHashes": list(c["caCertHashes"]),
            }
        },
    }
    document.update(_node_registration(c, api))
    return yamlout.Documents([document])


def _init_configuration(c, cluster, endpoint, api):
    init = {
        "apiVersion": api,
        "kind": "InitConfiguration",
        "bootstrapTokens": [{"token": c["token"]}],
    }
    init.update(_node_registration(c, api))
    cluster_configuration = {
        "apiVersion": api,
        "kind": "ClusterConfiguration",
        "clusterName": cluster["name"],
        "controlPlaneEndpoint": endpoint,
    }
    if cluster["kubernetes_version"] is not None:
        cluster_configuration["kubernetesVersion"] = cluster["kubernetes_version"]
    return yamlout.Documents([init, cluster_configuration])


def _node_registration(c, api):
    """``nodeRegistration``, when there are kubelet arguments to pass."""
    args = dict(c["kubeletExtraArgs"])
    if c["nodeLabels"]:
        args["node-labels"] = ",".join(f"{k}={v}" for k, v in c["nodeLabels"].items())
    if not args:
        return {}
    args = dict(sorted(args.items()))
    if api.endswith("v1beta3"):
        value = args
    else:
        value = [{"name": name, "value": v} for name, v in args.items()]
    return {"nodeRegistration": {"kubeletExtraArgs": value}}
