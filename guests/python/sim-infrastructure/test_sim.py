"""Unit tests of the pool arithmetic and the config checks, with CPython
alone; the provider's behaviour against the simulated cloud is tested
through the host."""

import json
import unittest

import sim
from capwasm_provider.errors import InvalidConfig

KEY = "uid-1234"


def listed(instance_id, state="running"):
    return {"id": instance_id, "providerID": "", "pool": "ns/p", "state": state,
            "failureDomain": None, "addresses": []}


def recorded(instance_id, ordinal):
    return (instance_id, sim.request_token(KEY, ordinal))


class Pool(unittest.TestCase):
    def test_next_ordinal_fills_the_lowest_gap_until_desired_is_reached(self):
        pool = sim.Pool(KEY, [recorded("a", 0), recorded("c", 2)], [listed("a"), listed("c")])
        self.assertEqual(pool.next_ordinal(3), 1)
        self.assertIsNone(pool.next_ordinal(2))

    def test_next_ordinal_skips_ordinals_held_by_terminating_instances(self):
        pool = sim.Pool(KEY, [recorded("a", 0)], [listed("a", "terminating")])
        self.assertEqual(pool.next_ordinal(1), 1)

    def test_created_adopts_an_instance_its_token_identifies(self):
        pool = sim.Pool(KEY, [recorded("a", 0)], [listed("a"), listed("b")])
        self.assertIsNone(pool.next_ordinal(2))
        self.assertEqual(pool.next_ordinal(3), 1)
        pool.created(1, listed("b"))
        self.assertEqual(pool.next_ordinal(3), 2)
        pool.created(2, listed("n"))
        self.assertIsNone(pool.next_ordinal(3))

    def test_surplus_goes_unknown_and_highest_ordinals_first(self):
        pool = sim.Pool(
            KEY,
            [recorded("a", 0), recorded("b", 1), recorded("c", 2)],
            [listed("x"), listed("c"), listed("a"), listed("b")],
        )
        self.assertEqual(pool.surplus(2), ["c", "x"])
        self.assertEqual(pool.surplus(0), ["a", "b", "c", "x"])
        self.assertEqual(pool.surplus(4), [])

    def test_state_is_ready_when_the_desired_instances_run(self):
        pool = sim.Pool(KEY, [recorded("a", 0)], [listed("a")])
        _, ready, requeue = pool.state(1, 7)
        self.assertTrue(ready)
        self.assertIsNone(requeue)

    def test_state_waits_while_instances_start_or_terminate(self):
        starting = sim.Pool(KEY, [recorded("a", 0)], [listed("a", "pending")])
        self.assertEqual(starting.state(1, 7)[1:], (False, 7))
        going = sim.Pool(KEY, [recorded("a", 0)], [listed("a"), listed("b", "terminating")])
        self.assertEqual(going.state(1, 7)[1:], (True, 7))

    def test_only_listed_active_instances_are_removed(self):
        pool = sim.Pool(
            KEY,
            [recorded("a", 0), recorded("b", 1)],
            [listed("a"), listed("b"), listed("c", "terminating")],
        )
        self.assertEqual(pool.active_of(["b", "c", "gone"]), ["b"])
        pool.terminating("b")
        self.assertEqual(pool.active_count(), 1)
        self.assertEqual(pool.state(1, 7)[1:], (True, 7))

    def test_tokens_of_other_keys_give_no_ordinal(self):
        pool = sim.Pool(KEY, [("a", "uid-12345-7"), ("b", "other-7")], [listed("a"), listed("b")])
        self.assertEqual([m.ordinal for m in pool.members], [None, None])


class Config(unittest.TestCase):
    def refused_at(self, **fields):
        with self.assertRaises(InvalidConfig) as refused:
            sim.parse(json.dumps({"endpoint": "http://127.0.0.1:8080", **fields}))
        return refused.exception.path

    def test_defaults(self):
        c = sim.parse('{"endpoint": "http://[fd00::1]:8080/"}')
        self.assertEqual(c.region_url(), "http://[fd00::1]:8080/v1/regions/local-1")
        self.assertEqual(c.control_plane_endpoint(), ("fd00::1", 6443))
        self.assertEqual(c.poll_seconds, 10)
        self.assertEqual(c.instance_type_url(), "http://[fd00::1]:8080/v1/instance-types/small")

    def test_instance_type_url_names_the_configured_type(self):
        c = sim.parse('{"endpoint": "http://127.0.0.1:8080//", "instanceType": "small-arm"}')
        self.assertEqual(c.instance_type_url(), "http://127.0.0.1:8080/v1/instance-types/small-arm")

    def test_refuses_at_the_field(self):
        self.assertEqual(self.refused_at(endpoint="ftp://x"), "$.endpoint")
        self.assertEqual(self.refused_at(region="Local"), "$.region")
        self.assertEqual(self.refused_at(pollSeconds=0), "$.pollSeconds")
        self.assertEqual(self.refused_at(failureDomains=["a", "a"]), "$.failureDomains[1]")
        self.assertEqual(self.refused_at(controlPlanePort=70000), "$.controlPlanePort")
        self.assertEqual(self.refused_at(nodeLabels={"": "x"}), "$.nodeLabels['']")
        self.assertEqual(self.refused_at(extra=1), "$.extra")


if __name__ == "__main__":
    unittest.main()
