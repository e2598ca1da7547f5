// Unit tests of the logic under Node (build.sh bundles and runs them). The
// cloud-config is compared byte for byte with the Rust provider's through
// the host by crates/capwasm/tests/language_providers.rs; these check what the config
// checks refuse, at which path, and the rendering's corners.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { InvalidConfig, RetryAfter, Terminal } from '../sdk/capwasm-provider.ts';
import { parse, render, withToken } from './kubeadm.ts';

const TOKEN = 'abcdef.0123456789abcdef';
const HASH = `sha256:${'0123456789abcdef'.repeat(4)}`;
const SENTINEL = 'mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete';
const CLUSTER = { name: 'demo', namespace: 'default', controlPlaneEndpoint: { host: '10.0.0.1', port: 6443 }, kubernetesVersion: 'v1.31.2' };

const join = (extra: object = {}) => JSON.stringify({ mode: 'join', token: TOKEN, caCertHashes: [HASH], ...extra });

/** The InvalidConfig that parsing `text` throws. */
function refused(text: string): InvalidConfig {
  try {
    parse(text);
  } catch (error) {
    if (error instanceof InvalidConfig) return error;
    throw error;
  }
  assert.fail(`accepted ${text}`);
}

const refusedAt = (text: string) => refused(text).path;

describe('config', () => {
  test('accepts a full join config', () => {
    const config = parse(join({
      kubeletExtraArgs: { 'max-pods': '50' },
      nodeLabels: { 'example.com/pool': 'a', tier: '' },
      preKubeadmCommands: ['echo pre'],
      postKubeadmCommands: ['echo post'],
    }));
    assert.equal(config.mode, 'join');
    assert.equal(config.nodeLabels.size, 2);
  });

  test('accepts init without CA hashes', () => {
    parse(JSON.stringify({ mode: 'init', token: TOKEN }));
  });

  test('refuses a malformed token without echoing it', () => {
    const error = refused(join().replace(TOKEN, 'ABCDEF.0123456789abcdef'));
    assert.equal(error.path, '$.token');
    assert.doesNotMatch(error.message, /ABCDEF/);
  });

  test('refuses what the types do not fit, at its path', () => {
    assert.equal(refusedAt(join({ tokn: 'x' })), '$.tokn');
    assert.equal(refused(join().replace('"join"', '"upgrade"')).message, 'unknown variant `upgrade`, expected `join` or `init`');
    assert.equal(refused(JSON.stringify({ mode: 'mend' })).message, 'unknown variant `mend`, expected `join` or `init`');
    assert.equal(refusedAt(join({ caCertHashes: [HASH, 5] })), '$.caCertHashes[1]');
    assert.equal(refusedAt(join({ constructor: 'x' })), '$.constructor');
    assert.equal(refusedAt('[]'), '$');
    assert.equal(refusedAt('{'), '$');
  });

  test('takes the host\'s token only when the config has none', () => {
    const host = () => 'zzzzzz.zzzzzzzzzzzzzzzz';
    assert.equal(withToken(parse(join()), host).token, TOKEN);
    const bare = JSON.stringify({ mode: 'join', caCertHashes: [HASH] });
    assert.equal(withToken(parse(bare), host).token, 'zzzzzz.zzzzzzzzzzzzzzzz');
    assert.throws(() => withToken(parse(bare), () => undefined), (e: InvalidConfig) => e.path === '$.token');
  });

  test('refuses join without CA hashes', () => {
    assert.equal(refusedAt(JSON.stringify({ mode: 'join', token: TOKEN })), '$.caCertHashes');
  });

  test('points at the bad CA hash', () => {
    assert.equal(refusedAt(join({ caCertHashes: [HASH, 'sha256:xyz'] })), '$.caCertHashes[1]');
  });

  test('refuses flag names with dashes and control characters in values', () => {
    assert.equal(refusedAt(join({ kubeletExtraArgs: { '--max-pods': '5' } })), "$.kubeletExtraArgs['--max-pods']");
    assert.equal(refusedAt(join({ kubeletExtraArgs: { v: '2\n' } })), '$.kubeletExtraArgs.v');
  });

  test('refuses node labels set twice', () => {
    assert.equal(refusedAt(join({ kubeletExtraArgs: { 'node-labels': 'a=b' }, nodeLabels: { c: 'd' } })), '$.nodeLabels');
  });

  test('refuses label values that could inject labels', () => {
    assert.equal(refusedAt(join({ nodeLabels: { a: 'b,c=d' } })), '$.nodeLabels.a');
    assert.equal(refusedAt(join({ nodeLabels: { 'Bad_Prefix/a': 'b' } })), "$.nodeLabels['Bad_Prefix/a']");
  });

  test('reports the first bad key in code point order, as a BTreeMap has them', () => {
    assert.equal(refusedAt(join({ nodeLabels: { '\u{1F600}': 'x', '\uFF01': 'x' } })), "$.nodeLabels['\uFF01']");
  });

  test('refuses blank commands as Rust trims them', () => {
    assert.equal(refusedAt(join({ postKubeadmCommands: ['ok', ' \u0085'] })), '$.postKubeadmCommands[1]');
    parse(join({ preKubeadmCommands: ['\uFEFF'] }));
  });
});

describe('render', () => {
  test('writes a join config and runs kubeadm join', () => {
    const text = render(parse(join({ preKubeadmCommands: ['echo pre'], nodeLabels: { tier: 'web', pool: 'a' } })), CLUSTER);
    assert.equal(text, `#cloud-config
write_files:
  - path: "/run/kubeadm/kubeadm-join-config.yaml"
    owner: "root:root"
    permissions: "0640"
    content: |
      apiVersion: "kubeadm.k8s.io/v1beta4"
      kind: "JoinConfiguration"
      discovery:
        bootstrapToken:
          apiServerEndpoint: "10.0.0.1:6443"
          token: "${TOKEN}"
          caCertHashes:
            - "${HASH}"
      nodeRegistration:
        kubeletExtraArgs:
          - name: "node-labels"
            value: "pool=a,tier=web"
runcmd:
  - "echo pre"
  - "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && ${SENTINEL}"
`);
  });

  test('waits for the control-plane endpoint', () => {
    const { controlPlaneEndpoint: _, ...noEndpoint } = CLUSTER;
    assert.throws(() => render(parse(join()), noEndpoint), (error) => error instanceof RetryAfter && error.seconds === 30);
  });

  test('refuses a Kubernetes version it cannot read, quoted as Rust does', () => {
    assert.throws(
      () => render(parse(join()), { ...CLUSTER, kubernetesVersion: 'v1.31\t"x"' }),
      (error) =>
        error instanceof Terminal &&
        error.reason === 'InvalidKubernetesVersion' &&
        error.message === `the cluster's Kubernetes version "v1.31\\t\\"x\\"" is not of the form v1.31.2`,
    );
    assert.throws(() => render(parse(join()), { ...CLUSTER, kubernetesVersion: 'v1.31' }), Terminal);
    render(parse(join()), { ...CLUSTER, kubernetesVersion: '+1.+31.0-rc.1' });
  });

  test('speaks v1beta3 to Kubernetes before 1.31, with arguments as a map in key order', () => {
    const config = parse(join({ kubeletExtraArgs: { 'max-pods': '50', '9': 'a', '10': 'b', y: 'c' } }));
    const text = render(config, { ...CLUSTER, kubernetesVersion: 'v1.30.4' });
    assert.match(text, /apiVersion: "kubeadm.k8s.io\/v1beta3"/);
    assert.match(text, /kubeletExtraArgs:\n {10}"10": "b"\n {10}"9": "a"\n {10}max-pods: "50"\n {10}"y": "c"\n/);
  });

  test('writes an init config with the cluster configuration', () => {
    const config = parse(JSON.stringify({ mode: 'init', token: TOKEN }));
    const text = render(config, { ...CLUSTER, controlPlaneEndpoint: { host: 'fd00::1', port: 6443 }, kubernetesVersion: 'v1.32.0' });
    assert.match(text, /kind: "InitConfiguration"\n {6}bootstrapTokens:\n {8}- token: /);
    assert.match(text, / {6}---\n {6}apiVersion: "kubeadm.k8s.io\/v1beta4"\n {6}kind: "ClusterConfiguration"\n/);
    assert.match(text, /controlPlaneEndpoint: "\[fd00::1\]:6443"/);
    assert.match(text, /kubernetesVersion: "v1.32.0"/);
    assert.match(text, /"kubeadm init --config \/run\/kubeadm\/kubeadm.yaml && /);
  });

  test('keeps hostile commands inside their scalar, and writes blocks and escapes', () => {
    const commands = ['echo "x"\nruncmd: [evil]', 'echo a\necho b\n', '\u0085\u{1F600}\u{E0001}'];
    const text = render(parse(join({ postKubeadmCommands: commands })), { ...CLUSTER, kubernetesVersion: undefined });
    assert.ok(text.endsWith(`  - "echo \\"x\\"\\nruncmd: [evil]"\n  - |\n    echo a\n    echo b\n  - "\\u0085\u{1F600}\u{E0001}"\n`), text);
    assert.equal(text.split('\nruncmd:').length, 2);
  });
});
