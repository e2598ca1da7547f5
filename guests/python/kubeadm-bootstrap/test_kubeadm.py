"""Unit tests of the logic, with CPython alone (``make guests`` runs them).

The cloud-config itself is compared byte for byte with the Rust provider's
by the conformance tests, through the host; these check the paths of what
the config checks refuse.
"""

import json
import unittest

import kubeadm
from capwasm_provider.errors import InvalidConfig, RetryAfter, Terminal

TOKEN = "abcdef.0123456789abcdef"
HASH = "sha256:" + "0123456789abcdef" * 4
CLUSTER = {
    "name": "demo",
    "namespace": "default",
    "endpoint": ("10.0.0.1", 6443),
    "kubernetes_version": "v1.31.2",
}


def join(**extra):
    return json.dumps({"mode": "join", "token": TOKEN, "caCertHashes": [HASH], **extra})


class Config(unittest.TestCase):
    def refused_at(self, text):
        with self.assertRaises(InvalidConfig) as refused:
            kubeadm.parse(text)
        return refused.exception.path

    def test_accepts_a_full_join_config(self):
        parsed = kubeadm.parse(
            join(
                kubeletExtraArgs={"max-pods": "50"},
                nodeLabels={"example.com/pool": "a", "tier": ""},
                preKubeadmCommands=["echo pre"],
                postKubeadmCommands=["echo post"],
            )
        )
        self.assertEqual(parsed["mode"], "join")
        self.assertEqual(len(parsed["nodeLabels"]), 2)

    def test_accepts_init_without_ca_hashes(self):
        kubeadm.parse(json.dumps({"mode": "init", "token": TOKEN}))

    def test_takes_the_hosts_token_only_when_the_config_has_none(self):
        own = kubeadm.with_token(kubeadm.parse(join()), lambda: "zzzzzz.zzzzzzzzzzzzzzzz")
        self.assertEqual(own["token"], TOKEN)
        text = json.dumps({"mode": "join", "caCertHashes": [HASH]})
        hosts = kubeadm.with_token(kubeadm.parse(text), lambda: "zzzzzz.zzzzzzzzzzzzzzzz")
        self.assertEqual(hosts["token"], "zzzzzz.zzzzzzzzzzzzzzzz")
        with self.assertRaises(InvalidConfig) as refused:
            kubeadm.with_token(kubeadm.parse(text), lambda: None)
        self.assertEqual(refused.exception.path, "$.token")

    def test_refuses_a_malformed_token_without_echoing_it(self):
        with self.assertRaises(InvalidConfig) as refused:
            kubeadm.parse(join().replace(TOKEN, "ABCDEF.0123456789abcdef"))
        self.assertEqual(refused.exception.path, "$.token")
        self.assertNotIn("ABCDEF", refused.exception.message)

    def test_refuses_what_the_types_do_not_fit_at_its_path(self):
        self.assertEqual(self.refused_at(join(tokn="x")), "$.tokn")
        self.assertEqual(self.refused_at(join().replace('"join"', '"upgrade"')), "$.mode")
        self.assertEqual(self.refused_at(json.dumps({"token": TOKEN})), "$")
        self.assertEqual(self.refused_at(join(token=5)), "$.token")
        self.assertEqual(self.refused_at(join(caCertHashes=[HASH, 5])), "$.caCertHashes[1]")
        self.assertEqual(self.refused_at("[]"), "$")
        self.assertEqual(self.refused_at("{"), "$")

    def test_refuses_join_without_ca_hashes(self):
        text = json.dumps({"mode": "join", "token": TOKEN})
        self.assertEqual(self.refused_at(text), "$.caCertHashes")

    def test_points_at_the_bad_ca_hash(self):
        self.assertEqual(self.refused_at(join(caCertHashes=[HASH, "sha256:xyz"])), "$.caCertHashes[1]")

    def test_refuses_flag_names_with_dashes_and_newlines_in_values(self):
        path = self.refused_at(join(kubeletExtraArgs={"--max-pods": "5"}))
        self.assertEqual(path, "$.kubeletExtraArgs['--max-pods']")
        self.assertEqual(self.refused_at(join(kubeletExtraArgs={"v": "2\n"})), "$.kubeletExtraArgs.v")

    def test_refuses_node_labels_set_twice(self):
        text = join(kubeletExtraArgs={"node-labels": "a=b"}, nodeLabels={"c": "d"})
        self.assertEqual(self.refused_at(text), "$.nodeLabels")

    def test_refuses_label_values_that_could_inject_labels(self):
        self.assertEqual(self.refused_at(join(nodeLabels={"a": "b,c=d"})), "$.nodeLabels.a")
        path = self.refused_at(join(nodeLabels={"Bad_Prefix/a": "b"}))
        self.assertEqual(path, "$.nodeLabels['Bad_Prefix/a']")

    def test_refuses_blank_commands(self):
        self.assertEqual(self.refused_at(join(postKubeadmCommands=["ok", " "])), "$.postKubeadmCommands[1]")

    def test_blank_is_rusts_white_space(self):
        # Python's str.strip also strips \x1c-\x1f; Rust's trim does not.
        kubeadm.parse(join(postKubeadmCommands=["\x1c"]))
        self.assertEqual(self.refused_at(join(preKubeadmCommands=["\u3000\x85"])), "$.preKubeadmCommands[0]")


class Render(unittest.TestCase):
    def test_waits_for_the_control_plane_endpoint(self):
        with self.assertRaises(RetryAfter) as waiting:
            kubeadm.render(kubeadm.parse(join()), {**CLUSTER, "endpoint": None})
        self.assertEqual(waiting.exception.seconds, 30)

    def test_refuses_a_kubernetes_version_it_cannot_read(self):
        with self.assertRaises(Terminal) as refused:
            kubeadm.render(kubeadm.parse(join()), {**CLUSTER, "kubernetes_version": "1.31"})
        self.assertEqual(refused.exception.reason, "InvalidKubernetesVersion")

    def test_says_an_unreadable_version_as_rust_debug_does(self):
        with self.assertRaises(Terminal) as refused:
            kubeadm.render(kubeadm.parse(join()), {**CLUSTER, "kubernetes_version": 'v1\t"x\x1b'})
        self.assertIn('version "v1\\t\\"x\\u{1b}" is not', refused.exception.message)

    def test_reads_versions_as_rust_does(self):
        # A leading "+" is what Rust's u32 parse accepts.
        text = kubeadm.render(kubeadm.parse(join()), {**CLUSTER, "kubernetes_version": "+1.+30.0"})
        self.assertIn('apiVersion: "kubeadm.k8s.io/v1beta3"', text)

    def test_speaks_v1beta3_to_kubernetes_before_1_31(self):
        config = kubeadm.parse(join(kubeletExtraArgs={"max-pods": "50"}))
        text = kubeadm.render(config, {**CLUSTER, "kubernetes_version": "v1.30.4"})
        self.assertIn('apiVersion: "kubeadm.k8s.io/v1beta3"', text)
        self.assertIn('max-pods: "50"', text)

    def test_brackets_an_ipv6_endpoint(self):
        text = kubeadm.render(kubeadm.parse(join()), {**CLUSTER, "endpoint": ("fd00::1", 6443)})
        self.assertIn('apiServerEndpoint: "[fd00::1]:6443"', text)


if __name__ == "__main__":
    unittest.main()
