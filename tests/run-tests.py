#!/usr/bin/env python3
"""Runs the workspace's test binaries JOBS at a time, then its doc tests.

`cargo test` runs one test binary after another; most of ours wait on API
servers, nodes and guests more than they compute, so the suite's wall clock
is mostly waiting. A runner that starts a process per test (nextest) would
start each binary's shared servers once per test instead of once per
binary, so this runs whole binaries side by side, the longest first (from
the last run's times), each with its output printed whole when it ends.

    tests/run-tests.py [--jobs N] [CARGO TEST ARGUMENTS...]

One slot runs, one after another, the binaries that would not share the
machine well: those that drive its one-node Kubernetes (`node_*`: each would
wait for the node's lock anyway), and those that keep both cores busy or time
guests against deadlines (compiling Python and JavaScript components,
building provider projects, hostile guests and neighbours, moto's Python
EC2), whose waits
would otherwise stretch past their bounds on two cores. The other slots run
the rest. Exits non-zero when a binary fails, after every binary has run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CACHE = Path(os.environ.get("CAPWASM_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "capwasm")
TIMES = CACHE / "test-times.json"
SERIAL_PREFIX = "node_"
SERIAL = {
    "aws_ec2",
    "ec2_operator",
    "ec2_sample",
    "hostile_guests",
    "hostile_neighbours",
    "language_providers",
    "polyglot_providers",
    "provider_new",
    # Serving certificates of 6 s renewed every 4 s and a leader Lease each
    # replica exits on losing: beside another binary's load, a replica lost
    # its Lease mid-test once (connection refused).
    "webhook_rotation",
}


def test_binaries(cargo_args):
    """Builds the test binaries (`cargo test --no-run`) and lists them."""
    command = ["cargo", "test", *cargo_args, "--no-run", "--message-format=json-render-diagnostics"]
    built = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if built.returncode != 0:
        sys.exit(f"run-tests: {' '.join(command)} failed ({built.returncode})")
    binaries = []
    for line in built.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        target = message["target"]
        binaries.append(
            {
                "name": f"{message['package_id'].split('#')[0].rsplit('/', 1)[-1]}::{target['kind'][0]}::{target['name']}",
                "target": target["name"],
                "source": target["src_path"],
                "executable": message["executable"],
                "manifest_dir": str(Path(message["manifest_path"]).parent),
            }
        )
    return binaries


def chains(binaries, times):
    """The binaries as chains a slot runs in order, longest chain first; a
    binary never timed counts as long, so it starts early."""
    alone = lambda b: b["target"].startswith(SERIAL_PREFIX) or b["target"] in SERIAL
    serial = sorted((b for b in binaries if alone(b)), key=lambda b: -times.get(b["name"], 600.0))
    single = [[b] for b in binaries if not alone(b)]
    groups = single + ([serial] if serial else [])
    cost = lambda chain: sum(times.get(b["name"], 600.0) for b in chain)
    return sorted(groups, key=cost, reverse=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("TEST_JOBS", "2")))
    parser.add_argument("cargo_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cargo_args = [a for a in args.cargo_args if a != "--"]

    binaries = test_binaries(cargo_args)
    try:
        times = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        times = {}

    printing = threading.Lock()
    results = {}
    started_all = time.monotonic()

    def run(binary):
        env = dict(os.environ, CARGO_MANIFEST_DIR=binary["manifest_dir"])
        started = time.monotonic()
        with tempfile.TemporaryFile(mode="w+") as output:
            code = subprocess.call(
                [binary["executable"]],
                cwd=binary["manifest_dir"],
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            elapsed = time.monotonic() - started
            output.seek(0)
            text = output.read()
        results[binary["name"]] = (code, elapsed)
        with printing:
            print(f"     Running {binary['source']} ({binary['executable']})", flush=True)
            sys.stdout.write(text)
            print(f"     {'ok' if code == 0 else 'FAILED'}: {binary['name']} in {elapsed:.1f}s\n", flush=True)

    def run_chain(chain):
        for binary in chain:
            run(binary)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(run_chain, chains(binaries, times)))

    doc = subprocess.run(["cargo", "test", *cargo_args, "--doc"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(doc.stdout, flush=True)
    results["doc tests"] = (doc.returncode, 0.0)

    times.update({name: elapsed for name, (code, elapsed) in results.items() if code == 0 and name != "doc tests"})
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
        TIMES.write_text(json.dumps(times, indent=1, sort_keys=True))
    except OSError as error:
        print(f"run-tests: could not keep the times in {TIMES}: {error}", file=sys.stderr)

    failed = sorted(name for name, (code, _) in results.items() if code != 0)
    print(f"run-tests: {len(results)} binaries in {time.monotonic() - started_all:.0f}s with {args.jobs} at a time")
    if failed:
        print("run-tests: failed: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
