"""A Python bootstrap provider that misbehaves on purpose, as its config
says: ``{"do": "loop"}`` computes for ever, ``allocate`` grows without
bound, ``open`` reads /etc/passwd, ``environment`` returns what it finds
in its environment, ``connect`` opens a TCP connection to ``port`` on
127.0.0.1, ``raise`` lets an exception escape. The hostile-guest tests
check that each is contained with the right typed error."""

import json
import os
import socket

import wit_world
from wit_world.exports import bootstrap
from wit_world.imports import types

from capwasm_provider import exports

SCHEMA = json.dumps(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["do"],
        "properties": {
            "do": {"enum": ["loop", "allocate", "open", "environment", "connect", "raise"]},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        },
    }
)


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.ProviderInfo:
        return exports.info("hostile-python", "0.1.0")

    def config_schema(self) -> str:
        return SCHEMA


def _data(text):
    script = "#!/bin/sh\n: '" + text.replace("'", "") + "'\n"
    return types.BootstrapData(types.BootstrapFormat.SHELL_SCRIPT, script.encode())


class Bootstrap(wit_world.exports.Bootstrap):
    @exports.provider_call
    def generate(self, request: bootstrap.GenerateRequest) -> types.BootstrapData:
        config = json.loads(request.config)
        what = config["do"]
        if what == "loop":
            n = 0
            while True:
                n += 1
        if what == "allocate":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        if what == "open":
            with open("/etc/passwd", encoding="utf-8") as passwd:
                return _data(passwd.read())
        if what == "environment":
            return _data(json.dumps(dict(os.environ)))
        if what == "connect":
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as conn:
                conn.settimeout(2)
                conn.connect(("127.0.0.1", config["port"]))
                conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
                return _data(conn.recv(1024).decode(errors="replace"))
        raise RuntimeError("the hostile provider raised, as asked")
