// The kubeadm bootstrap provider's logic, as plain functions: the config
// checked as the Rust provider checks it, and the same cloud-config
// rendered from it. app.ts wires these to the WIT exports; the unit tests
// run them under Node.

import type { ClusterInfo } from 'capwasm:provider/types@0.1.2';

import {
  InvalidConfig, ROOT, RetryAfter, Terminal, byCodePoint, oneOf, parseObject, string, stringMap, strings,
} from '../sdk/capwasm-provider.ts';
import { Documents, map, write, type Node } from './yaml.ts';

const JOIN_CONFIG_PATH = '/run/kubeadm/kubeadm-join-config.yaml';
const INIT_CONFIG_PATH = '/run/kubeadm/kubeadm.yaml';
// Written when kubeadm succeeded, as Cluster API's kubeadm provider does.
const SENTINEL = 'mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete';
const ENDPOINT_RETRY_SECONDS = 30;

const TOKEN = /^[a-z0-9]{6}\.[a-z0-9]{16}$/;
const CA_HASH = /^sha256:[0-9a-fA-F]{64}$/;
const FLAG = /^[a-z0-9][a-z0-9-]*$/;
const LABEL_NAME = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
// Rust's char::is_control: the Unicode Cc category.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// Rust's str::trim: Unicode White_Space (JavaScript's trim adds U+FEFF and lacks U+0085).
const BLANK = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

export interface Config {
  mode: 'join' | 'init';
  /** A kubeadm bootstrap token. Secret: never echoed in messages. Empty
   * when the config has none: the host's (`bootstrap-tokens`) is used. */
  token: string;
  caCertHashes: string[];
  kubeletExtraArgs: Map<string, string>;
  preKubeadmCommands: string[];
  postKubeadmCommands: string[];
  nodeLabels: Map<string, string>;
}

/** `spec.config` parsed and checked; throws InvalidConfig. */
export function parse(text: string): Config {
  const fields = parseObject(text, { mode: oneOf('join', 'init') }, {
    token: string,
    caCertHashes: strings,
    kubeletExtraArgs: stringMap,
    preKubeadmCommands: strings,
    postKubeadmCommands: strings,
    nodeLabels: stringMap,
  });
  const config: Config = {
    mode: fields.mode,
    token: fields.token ?? '',
    caCertHashes: fields.caCertHashes ?? [],
    kubeletExtraArgs: fields.kubeletExtraArgs ?? new Map(),
    preKubeadmCommands: fields.preKubeadmCommands ?? [],
    postKubeadmCommands: fields.postKubeadmCommands ?? [],
    nodeLabels: fields.nodeLabels ?? new Map(),
  };
  validate(config);
  return config;
}

/**
 * The config with the token a machine joins with: its own if it sets one
 * (whoever set it looks after it), else `host()`'s, the one the host made
 * for this call (it keeps that one alive while machines have to join).
 */
export function withToken(c: Config, host: () => string | undefined): Config {
  if (c.token === '') {
    const token = host();
    if (token === undefined) {
      throw new InvalidConfig(ROOT.key('token'), 'no token: set one, or give the Cluster a kubeconfig Secret so that the host makes one');
    }
    c.token = token;
  }
  return c;
}

function validate(c: Config) {
  if (c.token !== '' && !TOKEN.test(c.token)) {
    throw new InvalidConfig(ROOT.key('token'), 'must be a kubeadm bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}');
  }
  if (c.mode === 'join' && c.caCertHashes.length === 0) {
    throw new InvalidConfig(ROOT.key('caCertHashes'), "join needs at least one CA certificate hash to pin the cluster's CA");
  }
  c.caCertHashes.forEach((hash, i) => {
    if (!CA_HASH.test(hash)) {
      throw new InvalidConfig(ROOT.key('caCertHashes').index(i), 'must be sha256: followed by 64 hexadecimal digits');
    }
  });
  for (const [name, value] of c.kubeletExtraArgs) {
    const path = ROOT.key('kubeletExtraArgs').key(name);
    if (!FLAG.test(name)) throw new InvalidConfig(path, 'must be a kubelet flag name without leading dashes, such as max-pods');
    if (CONTROL.test(value)) throw new InvalidConfig(path, 'must not contain control characters');
  }
  if (c.nodeLabels.size > 0 && c.kubeletExtraArgs.has('node-labels')) {
    throw new InvalidConfig(ROOT.key('nodeLabels'), 'set node labels either in nodeLabels or in kubeletExtraArgs.node-labels, not both');
  }
  for (const [key, value] of c.nodeLabels) {
    const path = ROOT.key('nodeLabels').key(key);
    if (!isLabelKey(key)) {
      throw new InvalidConfig(path, "must be a label key: an optional DNS subdomain prefix and '/', then a name of at most 63 characters");
    }
    if (value !== '' && !LABEL_NAME.test(value)) {
      throw new InvalidConfig(path, "must be a label value: at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric");
    }
  }
  for (const field of ['preKubeadmCommands', 'postKubeadmCommands'] as const) {
    c[field].forEach((command, i) => {
      if (BLANK.test(command)) throw new InvalidConfig(ROOT.key(field).index(i), 'must not be empty');
    });
  }
}

function isLabelKey(key: string): boolean {
  const slash = key.indexOf('/');
  if (slash < 0) return LABEL_NAME.test(key);
  const prefix = key.slice(0, slash);
  // Any character beyond ASCII fails DNS_LABEL, so UTF-16 length serves for bytes.
  return prefix.length <= 253 && prefix.split('.').every((label) => DNS_LABEL.test(label)) && LABEL_NAME.test(key.slice(slash + 1));
}

/** Rust's `u32::from_str`: an optional `+`, then decimal digits. */
function parseU32(text: string): number | null {
  if (!/^\+?[0-9]+$/.test(text)) return null;
  const value = Number(text);
  return value <= 0xffffffff ? value : null;
}

/** `v1.31.2` or `1.31.2` (suffixes such as `-rc.1` allowed) → [1, 31]. */
function parseMinor(version: string): [number, number] | null {
  const parts = (version.startsWith('v') ? version.slice(1) : version).split('.');
  if (parts.length < 3) return null;
  const major = parseU32(parts[0]);
  const minor = parseU32(parts[1]);
  const patch = parts.slice(2).join('.').split(/[-+]/)[0];
  return major !== null && minor !== null && /^[0-9]+$/.test(patch) ? [major, minor] : null;
}

const DEBUG_ESCAPES = new Map([['\0', '\\0'], ['\t', '\\t'], ['\r', '\\r'], ['\n', '\\n'], ['\\', '\\\\'], ['"', '\\"']]);

/**
 * `s` as Rust's `{:?}` writes a string, but for the characters beyond
 * ASCII and C1 that Rust also escapes (combining marks, invisible,
 * unassigned and private-use ones): telling them takes Unicode property
 * escapes, which componentize-js's engine lacks. A Kubernetes version is
 * ASCII in practice.
 */
function debug(s: string): string {
  let out = '"';
  for (const c of s) {
    const escape = DEBUG_ESCAPES.get(c);
    if (escape !== undefined) out += escape;
    else if (CONTROL.test(c)) out += `\\u{${c.codePointAt(0)!.toString(16)}}`;
    else out += c;
  }
  return `${out}"`;
}

/** kubeadm.k8s.io/v1beta4 unless the cluster runs Kubernetes before 1.31 (v1beta3). */
function kubeadmApi(version: string | undefined): string {
  if (version === undefined) return 'kubeadm.k8s.io/v1beta4';
  const parsed = parseMinor(version);
  if (parsed === null) {
    throw new Terminal('InvalidKubernetesVersion', `the cluster's Kubernetes version ${debug(version)} is not of the form v1.31.2`);
  }
  const [major, minor] = parsed;
  return major < 1 || (major === 1 && minor < 31) ? 'kubeadm.k8s.io/v1beta3' : 'kubeadm.k8s.io/v1beta4';
}

/** `host:port`, an IPv6 host in brackets. */
export function authority(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The `#cloud-config` document for config `c` in `cluster`. */
export function render(c: Config, cluster: ClusterInfo): string {
  const endpoint = cluster.controlPlaneEndpoint;
  if (endpoint === undefined) {
    throw new RetryAfter(
      ENDPOINT_RETRY_SECONDS,
      `the control-plane endpoint of cluster ${cluster.namespace}/${cluster.name} is not known yet; kubeadm ${c.mode} needs it`,
    );
  }
  const api = kubeadmApi(cluster.kubernetesVersion);
  const address = authority(endpoint.host, endpoint.port);
  const [path, kubeadmConfig] =
    c.mode === 'join'
      ? [JOIN_CONFIG_PATH, joinConfiguration(c, address, api)]
      : [INIT_CONFIG_PATH, initConfiguration(c, cluster, address, api)];
  const document = map([
    ['write_files', [map([['path', path], ['owner', 'root:root'], ['permissions', '0640'], ['content', kubeadmConfig]])]],
    ['runcmd', [...c.preKubeadmCommands, `kubeadm ${c.mode} --config ${path} && ${SENTINEL}`, ...c.postKubeadmCommands]],
  ]);
  return `#cloud-config\n${write(document)}`;
}

function joinConfiguration(c: Config, address: string, api: string): Node {
  const bootstrapToken = map([['apiServerEndpoint', address], ['token', c.token], ['caCertHashes', [...c.caCertHashes]]]);
  return new Documents([
    map([
      ['apiVersion', api],
      ['kind', 'JoinConfiguration'],
      ['discovery', map([['bootstrapToken', bootstrapToken]])],
      ...nodeRegistration(c, api),
    ]),
  ]);
}

function initConfiguration(c: Config, cluster: ClusterInfo, address: string, api: string): Node {
  const init = map([
    ['apiVersion', api],
    ['kind', 'InitConfiguration'],
    ['bootstrapTokens', [map([['token', c.token]])]],
    ...nodeRegistration(c, api),
  ]);
  const clusterConfiguration = map([
    ['apiVersion', api],
    ['kind', 'ClusterConfiguration'],
    ['clusterName', cluster.name],
    ['controlPlaneEndpoint', address],
  ]);
  if (cluster.kubernetesVersion !== undefined) clusterConfiguration.entries.push(['kubernetesVersion', cluster.kubernetesVersion]);
  return new Documents([init, clusterConfiguration]);
}

/** `nodeRegistration`, when there are kubelet arguments to pass. */
function nodeRegistration(c: Config, api: string): [string, Node][] {
  const args = new Map(c.kubeletExtraArgs);
  if (c.nodeLabels.size > 0) {
    args.set('node-labels', [...c.nodeLabels].map(([k, v]) => `${k}=${v}`).join(','));
  }
  if (args.size === 0) return [];
  const sorted = [...args].sort(([a], [b]) => byCodePoint(a, b));
  const value: Node = api.endsWith('v1beta3')
    ? map(sorted)
    : sorted.map(([name, v]) => map([['name', name], ['value', v]]));
  return [['nodeRegistration', map([['kubeletExtraArgs', value]])]];
}
