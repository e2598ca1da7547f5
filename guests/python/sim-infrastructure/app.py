"""The sim-infrastructure provider in Python: pools of instances in
``capwasm sim-cloud`` over its HTTP API, the same behaviour as the Rust
``sim-infrastructure`` (request tokens, ordinals, surplus termination,
retry-after while bootstrap data is missing)."""

import base64
import os

import wit_world
from wit_world.exports import clusters, machine_pools, node_shapes, pool_machines
from wit_world.imports import capwasm_provider_types as types

from capwasm_provider import exports, http, log
from capwasm_provider.errors import RetryAfter, Terminal

import sim

with open(os.path.join(os.path.dirname(__file__), "schema.json"), encoding="utf-8") as schema:
    SCHEMA = schema.read()

_STATES = {
    "pending": types.InstanceState.PENDING,
    "running": types.InstanceState.RUNNING,
    "failed": types.InstanceState.FAILED,
    "terminating": types.InstanceState.TERMINATING,
}
_ADDRESS_TYPES = {
    "Hostname": types.AddressType.HOSTNAME,
    "ExternalIP": types.AddressType.EXTERNAL_IP,
    "InternalIP": types.AddressType.INTERNAL_IP,
    "ExternalDNS": types.AddressType.EXTERNAL_DNS,
    "InternalDNS": types.AddressType.INTERNAL_DNS,
}
_FORMATS = {
    types.BootstrapFormat.CLOUD_CONFIG: "cloud-config",
    types.BootstrapFormat.IGNITION: "ignition",
    types.BootstrapFormat.SHELL_SCRIPT: "shell-script",
}


class Client:
    """The simulated cloud's instance API in one region."""

    def __init__(self, c, credentials):
        self.region_url = c.region_url()
        token = next((cred.value for cred in credentials if cred.key == "token"), None)
        self.headers = [http.bearer(token)] if token is not None else []

    def list(self, pool):
        url = f"{self.region_url}/instances?pool={http.encode_component(pool)}"
        response = http.get(url, headers=self.headers).error_for_status()
        listed = _decode(response, lambda body: [_instance(i) for i in body["instances"]])
        return [i for i in listed if not i["pool"] or i["pool"] == pool]

    def create(self, body):
        url = f"{self.region_url}/instances"
        response = http.post(url, headers=self.headers, json_body=body).error_for_status()
        return _decode(response, _instance), response.status == 201

    def delete(self, instance_id):
        url = f"{self.region_url}/instances/{http.encode_component(instance_id)}"
        response = http.delete(url, headers=self.headers)
        if response.status != 404:
            response.error_for_status()

    def instance_type(self, url):
        """What a node of the instance type at ``url`` has; an unknown type
        is the terminal ``UnknownInstanceType``."""
        response = http.get(url, headers=self.headers)
        if response.status == 404:
            raise Terminal(
                "UnknownInstanceType",
                f"the cloud does not offer this instance type (GET {url}: 404)",
            )
        return _decode(response.error_for_status(), _instance_type)


def _decode(response, shape):
    body = response.json()
    try:
        return shape(body)
    except (KeyError, TypeError, ValueError) as error:
        raise Terminal(
            "InvalidResponse",
            f"{response.method} {response.url} returned a body that does not decode: {error!r}",
        ) from None


def _instance(value):
    """An instance as the cloud lists it; what the Rust provider requires."""
    if not isinstance(value["id"], str) or value["state"] not in _STATES:
        raise ValueError("an instance needs an id and a known state")
    addresses = value.get("addresses") or []
    return {
        "id": value["id"],
        "providerID": value.get("providerID") or "",
        "pool": value.get("pool") or "",
        "state": value["state"],
        "failureDomain": value.get("failureDomain"),
        "addresses": [(a["type"], a["address"]) for a in addresses],
    }


def _instance_type(value):
    """An instance type as ``GET /v1/instance-types/{name}`` describes it."""
    capacity = value["capacity"]
    architecture, operating_system = value["architecture"], value["operatingSystem"]
    if not isinstance(capacity, dict) or not all(
        isinstance(q, str) for q in [*capacity, *capacity.values(), architecture, operating_system]
    ):
        raise ValueError("an instance type needs string capacities, an architecture and an operating system")
    return {
        "capacity": sorted(capacity.items()),
        "architecture": architecture,
        "operatingSystem": operating_system,
    }


def _pool_name(ref):
    return f"{ref.namespace}/{ref.name}"


def _to_instance(key, member, c):
    instance = member.instance
    return types.Instance(
        id=instance["id"],
        provider_id=instance["providerID"] or c.provider_id(instance["id"]),
        state=_STATES[instance["state"]],
        failure_domain=instance["failureDomain"],
        addresses=[
            types.Address(_ADDRESS_TYPES[kind], address)
            for kind, address in instance["addresses"]
            if kind in _ADDRESS_TYPES
        ],
        request_token=None if member.ordinal is None else sim.request_token(key, member.ordinal),
    )


def _pool_state(key, pool, desired, c):
    members, ready, requeue = pool.state(desired, c.poll_seconds)
    return machine_pools.PoolState(
        instances=[_to_instance(key, m, c) for m in members],
        ready=ready,
        requeue_after_seconds=requeue,
    )


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.ProviderInfo:
        return exports.info("sim-infrastructure-python", "0.1.0")

    def config_schema(self) -> str:
        return SCHEMA


class MachinePools(wit_world.exports.MachinePools):
    @exports.provider_call
    def reconcile(self, request: machine_pools.ReconcileRequest) -> machine_pools.PoolState:
        c = sim.parse(request.config)
        client = Client(c, request.credentials)
        pool_name = _pool_name(request.pool)
        key = request.idempotency_key
        listed = client.list(pool_name)
        attempts = len(listed) + request.replicas
        recorded = [(i.id, i.request_token) for i in request.instances]
        pool = sim.Pool(key, recorded, listed)
        for _ in range(attempts + 1):
            ordinal = pool.next_ordinal(request.replicas)
            if ordinal is None:
                break
            if request.bootstrap_data is None:
                raise RetryAfter(
                    sim.BOOTSTRAP_RETRY_SECONDS,
                    f"pool {pool_name} needs bootstrap data to create instances, "
                    "and the bootstrap provider has not produced it yet",
                )
            domains = c.failure_domains
            instance, new = client.create(
                {
                    "requestToken": sim.request_token(key, ordinal),
                    "pool": pool_name,
                    "bootstrapData": base64.b64encode(request.bootstrap_data.value).decode(),
                    "bootstrapFormat": _FORMATS[request.bootstrap_data.format],
                    "failureDomain": domains[ordinal % len(domains)] if domains else None,
                    "nodeLabels": c.node_labels,
                    "instanceType": c.instance_type,
                }
            )
            message = "created instance" if new else "found the instance an earlier call created"
            log.info(message, pool=pool_name, instance=instance["id"], ordinal=ordinal)
            pool.created(ordinal, instance)
        if pool.next_ordinal(request.replicas) is not None:
            raise RetryAfter(
                c.poll_seconds,
                f"pool {pool_name}: the cloud keeps answering creates with terminating instances",
            )
        for instance_id in pool.surplus(request.replicas):
            client.delete(instance_id)
            log.info("terminating surplus instance", pool=pool_name, instance=instance_id)
            pool.terminating(instance_id)
        return _pool_state(key, pool, request.replicas, c)

    @exports.provider_call
    def delete(self, request: machine_pools.DeleteRequest) -> types.DeleteOutcome:
        c = sim.parse(request.config)
        client = Client(c, request.credentials)
        pool_name = _pool_name(request.pool)
        listed = client.list(pool_name)
        if not listed:
            return types.DeleteOutcome_Done()
        for instance in listed:
            if instance["state"] != "terminating":
                client.delete(instance["id"])
                log.info("terminating instance", pool=pool_name, instance=instance["id"])
        return types.DeleteOutcome_InProgress(c.poll_seconds)


class PoolMachines(wit_world.exports.PoolMachines):
    @exports.provider_call
    def remove(self, request: pool_machines.RemoveRequest) -> machine_pools.PoolState:
        c = sim.parse(request.config)
        client = Client(c, request.credentials)
        pool_name = _pool_name(request.pool)
        key = request.idempotency_key
        recorded = [(i.id, i.request_token) for i in request.instances]
        pool = sim.Pool(key, recorded, client.list(pool_name))
        for instance_id in pool.active_of(request.remove):
            client.delete(instance_id)
            log.info("terminating the instance whose Machine was deleted", pool=pool_name, instance=instance_id)
            pool.terminating(instance_id)
        return _pool_state(key, pool, pool.active_count(), c)


class NodeShapes(wit_world.exports.NodeShapes):
    @exports.provider_call
    def describe(self, request: node_shapes.DescribeRequest) -> node_shapes.NodeShape:
        c = sim.parse(request.config)
        described = Client(c, request.credentials).instance_type(c.instance_type_url())
        return node_shapes.NodeShape(
            capacity=described["capacity"],
            architecture=described["architecture"],
            operating_system=described["operatingSystem"],
        )


class Clusters(wit_world.exports.Clusters):
    @exports.provider_call
    def reconcile(self, request: clusters.ClusterRequest) -> clusters.ClusterState:
        c = sim.parse(request.config)
        host, port = c.control_plane_endpoint()
        return clusters.ClusterState(
            control_plane_endpoint=types.ApiEndpoint(host, port),
            failure_domains=[
                clusters.FailureDomain(name, True, [("region", c.region)]) for name in c.failure_domains
            ],
            ready=True,
            requeue_after_seconds=None,
        )

    @exports.provider_call
    def delete(self, request: clusters.ClusterRequest) -> types.DeleteOutcome:
        return types.DeleteOutcome_Done()


class ProviderIds(wit_world.exports.ProviderIds):
    @exports.provider_call
    def provider_id(self, config: str, instance: types.Instance) -> str:
        return sim.parse(config).provider_id(instance.id)

    def owns(self, provider_id: str) -> bool:
        return provider_id.startswith("sim://")
