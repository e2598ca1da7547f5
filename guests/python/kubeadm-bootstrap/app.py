"""The kubeadm bootstrap provider in Python: the same config schema and the
same cloud-config as the Rust ``kubeadm-bootstrap``, on componentize-py."""

import os

import wit_world
from wit_world.exports import bootstrap
from wit_world.imports import bootstrap_tokens, types

from capwasm_provider import exports, log

import kubeadm

# Read while componentize-py pre-initialises the component, so the schema
# is part of its memory image and no call touches a file.
with open(os.path.join(os.path.dirname(__file__), "schema.json"), encoding="utf-8") as schema:
    SCHEMA = schema.read()


def _host_token():
    """``id.secret`` of the token the host made for this call, if any."""
    token = bootstrap_tokens.join_token()
    return None if token is None else f"{token.id}.{token.secret}"


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.ProviderInfo:
        return exports.info("kubeadm-bootstrap-python", "0.1.0")

    def config_schema(self) -> str:
        return SCHEMA


class Bootstrap(wit_world.exports.Bootstrap):
    @exports.provider_call
    def generate(self, request: bootstrap.GenerateRequest) -> types.BootstrapData:
        config = kubeadm.with_token(kubeadm.parse(request.config), _host_token)
        endpoint = request.cluster.control_plane_endpoint
        cloud_config = kubeadm.render(
            config,
            {
                "name": request.cluster.name,
                "namespace": request.cluster.namespace,
                "endpoint": None if endpoint is None else (endpoint.host, endpoint.port),
                "kubernetes_version": request.cluster.kubernetes_version,
            },
        )
        log.info("rendered kubeadm cloud-config", mode=config["mode"], owner=request.owner_name)
        return types.BootstrapData(types.BootstrapFormat.CLOUD_CONFIG, cloud_config.encode())
