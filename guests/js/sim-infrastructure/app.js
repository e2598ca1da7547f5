// The sim-infrastructure provider in JavaScript: pools of instances in
// `capwasm sim-cloud` over its HTTP API, the same behaviour as the Rust
// `sim-infrastructure` (request tokens, ordinals, surplus termination,
// retry-after while bootstrap data is missing).

import {
  InvalidConfig, RetryAfter, Terminal, ROOT, integer, nullable, parseObject, string, stringMap, strings,
} from '../sdk/capwasm-provider.ts';
import { providerCall } from '../sdk/exports.ts';
import { bearer, encodeComponent, isBaseUrl, request } from '../sdk/http.ts';
import { log } from '../sdk/log.ts';
import SCHEMA from './schema.json';

const DEFAULT_REGION = 'local-1';
// The instance type of instances created without one.
const DEFAULT_INSTANCE_TYPE = 'small';
const BOOTSTRAP_RETRY_SECONDS = 15;
const NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const DOTTED_NAME = /^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$/;
const STATES = new Set(['pending', 'running', 'failed', 'terminating']);
const ADDRESS_TYPES = {
  Hostname: 'hostname', ExternalIP: 'external-ip', InternalIP: 'internal-ip',
  ExternalDNS: 'external-dns', InternalDNS: 'internal-dns',
};

// === config ===

function parseConfig(text) {
  const f = parseObject(text, { endpoint: string }, {
    region: string,
    instanceType: nullable(string),
    failureDomains: strings,
    nodeLabels: stringMap,
    controlPlaneHost: nullable(string),
    controlPlanePort: nullable(integer(0, 65535)),
    pollSeconds: integer(0, 0xffffffff),
  });
  const c = {
    endpoint: f.endpoint,
    region: f.region ?? DEFAULT_REGION,
    instanceType: f.instanceType ?? null,
    failureDomains: f.failureDomains ?? [],
    nodeLabels: f.nodeLabels ?? new Map(),
    controlPlaneHost: f.controlPlaneHost ?? null,
    controlPlanePort: f.controlPlanePort ?? null,
    pollSeconds: f.pollSeconds ?? 10,
  };
  if (!isBaseUrl(c.endpoint)) {
    throw new InvalidConfig(ROOT.key('endpoint'), 'must be an http or https URL with a host and no query, such as http://127.0.0.1:8080');
  }
  if (!NAME.test(c.region)) {
    throw new InvalidConfig(ROOT.key('region'), "must be lowercase alphanumerics and '-', at most 63 characters");
  }
  if (c.instanceType !== null && !DOTTED_NAME.test(c.instanceType)) {
    throw new InvalidConfig(ROOT.key('instanceType'), "must be lowercase alphanumerics, '-' and '.', at most 63 characters");
  }
  if (c.pollSeconds < 1 || c.pollSeconds > 600) throw new InvalidConfig(ROOT.key('pollSeconds'), 'must be 1 to 600');
  const seen = new Set();
  c.failureDomains.forEach((domain, i) => {
    const path = ROOT.key('failureDomains').index(i);
    if (!NAME.test(domain)) throw new InvalidConfig(path, "must be lowercase alphanumerics and '-', at most 63 characters");
    if (seen.has(domain)) throw new InvalidConfig(path, 'is listed twice');
    seen.add(domain);
  });
  const bytes = (s) => new TextEncoder().encode(s).length;
  for (const [key, value] of c.nodeLabels) {
    if (key === '' || bytes(key) > 317 || bytes(value) > 63) {
      throw new InvalidConfig(ROOT.key('nodeLabels').key(key), 'label keys must be 1-317 characters and values at most 63');
    }
  }
  if (c.controlPlaneHost === '') throw new InvalidConfig(ROOT.key('controlPlaneHost'), 'must not be empty');
  if (c.controlPlanePort === 0) throw new InvalidConfig(ROOT.key('controlPlanePort'), 'must be between 1 and 65535');
  return c;
}

const regionUrl = (c) => `${c.endpoint.replace(/\/+$/, '')}/v1/regions/${c.region}`;
const providerIdOf = (c, id) => `sim://${c.region}/${id}`;
// Where the cloud describes the instance type new instances get.
const instanceTypeUrl = (c) => `${c.endpoint.replace(/\/+$/, '')}/v1/instance-types/${c.instanceType ?? DEFAULT_INSTANCE_TYPE}`;

function endpointHost(url) {
  const rest = url.includes('://') ? url.split('://')[1] : url;
  const authority = rest.split('/')[0];
  if (authority.startsWith('[')) return authority.slice(1).split(']')[0];
  return authority.split(':')[0];
}

// === the cloud's API ===

function decode(response, shape) {
  const body = response.json();
  try {
    return shape(body);
  } catch (error) {
    throw new Terminal('InvalidResponse', `${response.method} ${response.url} returned a body that does not decode: ${error.message}`);
  }
}

function instanceOf(value) {
  if (typeof value.id !== 'string' || !STATES.has(value.state)) throw new Error('an instance needs an id and a known state');
  return {
    id: value.id,
    providerID: value.providerID ?? '',
    pool: value.pool ?? '',
    state: value.state,
    failureDomain: value.failureDomain ?? undefined,
    addresses: (value.addresses ?? []).map((a) => [a.type, a.address]),
  };
}

// An instance type as `GET /v1/instance-types/{name}` describes it.
function instanceTypeOf(value) {
  const { capacity, architecture, operatingSystem } = value;
  if (capacity === null || typeof capacity !== 'object' || Array.isArray(capacity)
    || ![...Object.values(capacity), architecture, operatingSystem].every((v) => typeof v === 'string')) {
    throw new Error('an instance type needs string capacities, an architecture and an operating system');
  }
  return {
    capacity: Object.entries(capacity).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    architecture,
    operatingSystem,
  };
}

class Client {
  constructor(c, credentials) {
    this.url = regionUrl(c);
    const token = credentials.find((cred) => cred.key === 'token');
    this.headers = token ? [bearer(token.value)] : [];
  }
  list(pool) {
    const response = request('GET', `${this.url}/instances?pool=${encodeComponent(pool)}`, { headers: this.headers }).errorForStatus();
    const listed = decode(response, (body) => body.instances.map(instanceOf));
    return listed.filter((i) => i.pool === '' || i.pool === pool);
  }
  create(body) {
    const response = request('POST', `${this.url}/instances`, { headers: this.headers, json: body }).errorForStatus();
    return [decode(response, instanceOf), response.status === 201];
  }
  delete(id) {
    const response = request('DELETE', `${this.url}/instances/${encodeComponent(id)}`, { headers: this.headers });
    if (response.status !== 404) response.errorForStatus();
  }
  // What a node of the instance type at `url` has; an unknown type is the
  // terminal `UnknownInstanceType`.
  instanceType(url) {
    const response = request('GET', url, { headers: this.headers });
    if (response.status === 404) {
      throw new Terminal('UnknownInstanceType', `the cloud does not offer this instance type (GET ${url}: 404)`);
    }
    return decode(response.errorForStatus(), instanceTypeOf);
  }
}

// === the pool ===

const requestToken = (key, ordinal) => `${key}-${ordinal}`;

function ordinalOf(key, token) {
  if (token === undefined || !token.startsWith(`${key}-`)) return null;
  const digits = token.slice(key.length + 1).replace(/^\+/, '');
  if (!/^[0-9]+$/.test(digits) || Number(digits) > 0xffffffff) return null;
  return Number(digits);
}

const order = (a, b) => (a.ordinal === null) - (b.ordinal === null) || (a.ordinal ?? 0) - (b.ordinal ?? 0);
const active = (m) => m.instance.state !== 'terminating';

class Pool {
  constructor(key, recorded, listed) {
    const tokens = new Map();
    for (const r of recorded) if (!tokens.has(r.id)) tokens.set(r.id, r.requestToken);
    this.key = key;
    this.members = listed.map((instance) => ({ ordinal: ordinalOf(key, tokens.get(instance.id)), instance }));
  }
  nextOrdinal(desired) {
    if (this.members.filter(active).length >= desired) return null;
    const taken = new Set(this.members.map((m) => m.ordinal));
    let ordinal = 0;
    while (taken.has(ordinal)) ordinal += 1;
    return ordinal;
  }
  created(ordinal, instance) {
    const member = this.members.find((m) => m.instance.id === instance.id);
    if (member) Object.assign(member, { ordinal, instance });
    else this.members.push({ ordinal, instance });
  }
  surplus(desired) {
    return this.members.filter(active).sort(order).slice(desired).map((m) => m.instance.id);
  }
  terminating(id) {
    for (const m of this.members) if (m.instance.id === id) m.instance = { ...m.instance, state: 'terminating' };
  }
  // Of `ids`, those the cloud lists as active, to terminate.
  activeOf(ids) {
    return this.members.filter((m) => active(m) && ids.includes(m.instance.id)).map((m) => m.instance.id);
  }
  // The pool for the host: ready when exactly `desired` are active and all run.
  state(desired, c) {
    this.members.sort(order);
    const running = this.members.filter(active);
    const ready = running.length === desired && running.every((m) => m.instance.state === 'running');
    const settled = ready && this.members.every(active);
    return {
      instances: this.members.map((m) => toInstance(this.key, m, c)),
      ready,
      requeueAfterSeconds: settled ? undefined : c.pollSeconds,
    };
  }
}

function toInstance(key, member, c) {
  const { instance } = member;
  return {
    id: instance.id,
    providerId: instance.providerID || providerIdOf(c, instance.id),
    state: instance.state,
    failureDomain: instance.failureDomain ?? undefined,
    addresses: instance.addresses
      .filter(([type]) => type in ADDRESS_TYPES)
      .map(([type, address]) => ({ kind: ADDRESS_TYPES[type], address })),
    requestToken: member.ordinal === null ? undefined : requestToken(key, member.ordinal),
  };
}

const poolName = (ref) => `${ref.namespace}/${ref.name}`;

// === exports ===

export function info() {
  return { name: 'sim-infrastructure-js', version: '0.1.0' };
}

export function configSchema() {
  return SCHEMA;
}

export const machinePools = {
  reconcile: providerCall((r) => {
    const c = parseConfig(r.config);
    const client = new Client(c, r.credentials);
    const name = poolName(r.pool);
    const key = r.idempotencyKey;
    const listed = client.list(name);
    const pool = new Pool(key, r.instances, listed);
    for (let attempt = 0; attempt <= listed.length + r.replicas; attempt += 1) {
      const ordinal = pool.nextOrdinal(r.replicas);
      if (ordinal === null) break;
      if (r.bootstrapData === undefined) {
        throw new RetryAfter(BOOTSTRAP_RETRY_SECONDS, `pool ${name} needs bootstrap data to create instances, and the bootstrap provider has not produced it yet`);
      }
      const domains = c.failureDomains;
      const [instance, created] = client.create({
        requestToken: requestToken(key, ordinal),
        pool: name,
        bootstrapData: btoa(String.fromCharCode(...r.bootstrapData.value)),
        bootstrapFormat: r.bootstrapData.format,
        failureDomain: domains.length ? domains[ordinal % domains.length] : null,
        nodeLabels: Object.fromEntries(c.nodeLabels),
        instanceType: c.instanceType,
      });
      log.info(created ? 'created instance' : 'found the instance an earlier call created', { pool: name, instance: instance.id, ordinal });
      pool.created(ordinal, instance);
    }
    if (pool.nextOrdinal(r.replicas) !== null) {
      throw new RetryAfter(c.pollSeconds, `pool ${name}: the cloud keeps answering creates with terminating instances`);
    }
    for (const id of pool.surplus(r.replicas)) {
      client.delete(id);
      log.info('terminating surplus instance', { pool: name, instance: id });
      pool.terminating(id);
    }
    return pool.state(r.replicas, c);
  }),
  delete: providerCall((r) => {
    const c = parseConfig(r.config);
    const client = new Client(c, r.credentials);
    const name = poolName(r.pool);
    const listed = client.list(name);
    if (listed.length === 0) return { tag: 'done' };
    for (const instance of listed) {
      if (instance.state !== 'terminating') {
        client.delete(instance.id);
        log.info('terminating instance', { pool: name, instance: instance.id });
      }
    }
    return { tag: 'in-progress', val: c.pollSeconds };
  }),
};

export const poolMachines = {
  remove: providerCall((r) => {
    const c = parseConfig(r.config);
    const client = new Client(c, r.credentials);
    const name = poolName(r.pool);
    const pool = new Pool(r.idempotencyKey, r.instances, client.list(name));
    for (const id of pool.activeOf(r.remove)) {
      client.delete(id);
      log.info('terminating the instance whose Machine was deleted', { pool: name, instance: id });
      pool.terminating(id);
    }
    return pool.state(pool.members.filter(active).length, c);
  }),
};

export const nodeShapes = {
  describe: providerCall((r) => {
    const c = parseConfig(r.config);
    return new Client(c, r.credentials).instanceType(instanceTypeUrl(c));
  }),
};

export const clusters = {
  reconcile: providerCall((r) => {
    const c = parseConfig(r.config);
    return {
      controlPlaneEndpoint: { host: c.controlPlaneHost ?? endpointHost(c.endpoint), port: c.controlPlanePort ?? 6443 },
      failureDomains: c.failureDomains.map((name) => ({ name, controlPlane: true, attributes: [['region', c.region]] })),
      ready: true,
      requeueAfterSeconds: undefined,
    };
  }),
  delete: providerCall(() => ({ tag: 'done' })),
};

export const providerIds = {
  providerId: providerCall((config, instance) => providerIdOf(parseConfig(config), instance.id)),
  owns: (id) => id.startsWith('sim://'),
};
