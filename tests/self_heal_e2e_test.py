#!/usr/bin/env python3
"""End-to-end tests of what the self-healing work changed in the binary: no
simulated fleet unless asked for, a simulated burn-in by hand not recorded in a
running daemon, and `gpuherd passport` with its export and import. Real
processes, a unix socket and loopback only."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

GPUHERD = os.path.abspath(os.environ.get("GPUHERD_BIN", "build/gpuherd"))


def run(*args, home, check=True, timeout=60):
    env = dict(os.environ, NO_COLOR="1")
    env.pop("GPUHERD_JOB_ID", None)
    proc = subprocess.run([GPUHERD, "--home", home, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}: {proc.stderr}")
    return proc


class SelfHealTest(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="gpuherd-selfheal-e2e-")
        self.daemon = None

    def tearDown(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
        shutil.rmtree(self.home, ignore_errors=True)

    def start_daemon(self, *args):
        with open(os.path.join(self.home, "daemon.out"), "w") as log:
            self.daemon = subprocess.Popen([GPUHERD, "--home", self.home, "daemon", "--port", "0", *args],
                                           stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if run("status", home=self.home, check=False).returncode == 0:
                return
            self.assertIsNone(self.daemon.poll(), "the daemon exited")
            time.sleep(0.1)
        self.fail("the daemon did not answer within 20 s")

    def test_no_driver_means_exit_3_never_a_simulated_fleet(self):
        probe = run("gpus", "--json", home=self.home, check=False)
        if probe.returncode == 0:
            self.skipTest("this machine has an NVIDIA driver")
        for args in (["gpus"], ["gpus", "--json"], ["top", "--iterations", "1"], ["healthcheck"],
                     ["k8s", "labels"], ["slurm", "gres-conf"]):
            proc = run(*args, home=self.home, check=False)
            self.assertEqual(proc.returncode, 3, f"{args}: {proc.stderr}")
            self.assertIn("no NVIDIA driver: ", proc.stderr, args)
            self.assertNotIn("SIMULATED", proc.stdout + proc.stderr, args)
        # Asked for, the simulated fleet is there.
        self.assertEqual(run("gpus", "--sim", "2", home=self.home).returncode, 0)

    def test_a_simulated_burnin_by_hand_is_not_recorded_in_a_running_daemon(self):
        self.start_daemon("--sim", "2", "--interval", "200ms")
        proc = run("burnin", "--sim", "3", "--level", "1", "--json", home=self.home, check=False,
                   timeout=120)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual(len(out["runs"]), 3)
        self.assertFalse(out["recorded"])
        self.assertIn("not recorded", proc.stderr)
        # A scenario is a simulated fleet as well: not recorded either.
        scenario = os.path.join(self.home, "two.yaml")
        with open(scenario, "w") as f:
            f.write("seed: 5\ngpus: [{model: a100-40gb, count: 2}]\nfaults: []\n")
        proc = run("burnin", "--scenario", scenario, "--level", "1", "--json", home=self.home, check=False,
                   timeout=120)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        self.assertFalse(json.loads(proc.stdout)["recorded"])
        health = json.loads(run("health", "--json", home=self.home).stdout)
        self.assertEqual(health["runs"], [], "the daemon's history took the simulated runs")

    def test_passport_export_and_import(self):
        self.start_daemon("--sim", "2", "--interval", "200ms")
        run("burnin", "--level", "1", "--json", home=self.home, check=False, timeout=120)
        time.sleep(1)
        exported = run("passport", "0", "--json", home=self.home)
        passport = json.loads(exported.stdout)
        self.assertEqual(passport["format"], 1)
        self.assertTrue(passport["key"])
        self.assertEqual(len(passport["burnins"]), 1, passport)
        text = run("passport", passport["uuid"], home=self.home).stdout
        self.assertIn("Burn-ins (1)", text)
        page = os.path.join(self.home, "passport.html")
        run("passport", "0", "--html", page, home=self.home)
        with open(page) as f:
            self.assertIn(passport["key"], f.read())
        self.assertNotEqual(run("passport", "no-such-card", home=self.home, check=False).returncode, 0)

        # The card moves to another machine (another state directory).
        other = tempfile.mkdtemp(prefix="gpuherd-selfheal-e2e-other-")
        try:
            path = os.path.join(other, "card.json")
            with open(path, "w") as f:
                f.write(exported.stdout)
            proc = run("passport", "--import", path, home=other)
            self.assertIn(passport["key"], proc.stdout)
            with open(path, "w") as f:
                f.write('{"format": 1, "key": "x\\u001b[2J"}')
            refused = run("passport", "--import", path, home=other, check=False)
            self.assertNotEqual(refused.returncode, 0)
            self.assertIn("control character", refused.stderr)
        finally:
            shutil.rmtree(other, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
