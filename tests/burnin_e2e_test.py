#!/usr/bin/env python3
"""End-to-end tests of `gpuherd burnin` and `gpuherd health`: the real binary on
a simulated fleet, its state directory, signals and a daemon on loopback and a
unix socket. Run by CTest with the binary's path. A burn-in is an admin's (root's);
the queue's jobs around it are nobody's (JOB_USER) wherever the test runs as root."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_e2e_test  # noqa: E402
from cli_e2e_test import JOB_USER  # noqa: E402

GPUHERD = os.path.abspath(os.environ.get("GPUHERD_BIN", "build/gpuherd"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULTS = os.path.join(ROOT, "examples", "scenarios", "burnin-faults.yaml")


def run(*args, home, check=None, timeout=120):
    cmd = [GPUHERD, "--home", home] + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, NO_COLOR="1"))
    if check is not None and proc.returncode != check:
        raise AssertionError(f"{cmd} exited {proc.returncode}, not {check}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def stored_runs(home):
    """The burn-in rows of the state database, read with SQLite itself."""
    path = os.path.join(home, "state.db")
    if not os.path.exists(path):
        return []
    with sqlite3.connect(path) as db:
        return db.execute("SELECT gpu_uuid, level, outcome, verdict, score FROM burnin_runs ORDER BY id").fetchall()


class HomeTestCase(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="gpuherd-burnin-e2e-")
        self.daemon = None

    def tearDown(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
        shutil.rmtree(self.home, ignore_errors=True)

    def gpuherd(self, *args, check=None, timeout=120):
        return run(*args, home=self.home, check=check, timeout=timeout)

    def start_daemon(self, *args):
        with open(os.path.join(self.home, "daemon.out"), "w") as log:
            self.daemon = subprocess.Popen([GPUHERD, "--home", self.home, "daemon", "--port", "0", *args],
                                           stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.gpuherd("status").returncode == 0:
                return
            self.assertIsNone(self.daemon.poll(), "the daemon exited")
            time.sleep(0.1)
        self.fail("the daemon did not answer within 20 s")


class BurnInTest(HomeTestCase):
    def test_level1_on_a_simulated_fleet_passes_healthy(self):
        proc = self.gpuherd("burnin", "--sim", "2", "--level", "1", "--json", check=0)
        out = json.loads(proc.stdout)
        self.assertTrue(out["simulated"])
        self.assertIn("--sim 2", out["sim_reason"])
        self.assertEqual(sorted(r["gpu_index"] for r in out["runs"]), [0, 1])
        for r in out["runs"]:
            self.assertEqual(r["outcome"], "passed", r)
            self.assertEqual(r["level"], 1)
            self.assertGreaterEqual(r["health"]["score"], 95, r["health"])
            self.assertEqual(r["health"]["verdict"], "healthy")
            self.assertGreater(r["id"], 0)
        self.assertIn("SIMULATED FLEET", proc.stderr)
        rows = stored_runs(self.home)
        self.assertEqual(sorted((u, lvl, o, v) for u, lvl, o, v, _ in rows),
                         sorted((r["gpu_uuid"], 1, "passed", "healthy") for r in out["runs"]))

    def test_table_ranks_the_gpus_and_says_simulated(self):
        proc = self.gpuherd("burnin", "--sim", "2", "--level", "1", check=0)
        lines = proc.stdout.splitlines()
        self.assertTrue(lines[0].startswith("SIMULATED FLEET"), proc.stdout)
        self.assertTrue(lines[1].startswith("#  GPU  MODEL"), proc.stdout)
        self.assertEqual([line.split()[0] for line in lines[2:4]], ["1", "2"])
        self.assertIn("Recorded in", proc.stdout)

    def test_level3_stress_measures_a_rate_and_a_second_run_compares_with_the_first(self):
        first = json.loads(self.gpuherd("burnin", "--sim", "1", "--level", "3", "--duration", "5s", "--json",
                                         check=0).stdout)["runs"][0]
        self.assertEqual(first["outcome"], "passed")
        self.assertGreater(first["rates"]["fp32_tflops"], 0)
        self.assertEqual(first["health"]["fleet_reference_runs"], 0)
        second = json.loads(self.gpuherd("burnin", "--sim", "1", "--level", "3", "--duration", "5s", "--json",
                                         check=0).stdout)["runs"][0]
        # The first run of the same model is the fleet's reference now.
        self.assertEqual(second["health"]["fleet_reference_runs"], 1)
        self.assertAlmostEqual(second["health"]["ratio_to_fleet"], 1.0, delta=0.2)

    def test_a_stuck_bit_is_found_and_the_card_is_unhealthy(self):
        self.assertTrue(os.path.exists(FAULTS), FAULTS)
        proc = self.gpuherd("burnin", "--scenario", FAULTS, "--level", "2", "--json", check=1)
        runs = json.loads(proc.stdout)["runs"]
        faulty = [r for r in runs if r["outcome"] == "faults_found"]
        self.assertTrue(faulty, runs)
        stuck = [r for r in faulty if r["memory_errors"] > 0]
        self.assertEqual(len(stuck), 1, faulty)
        self.assertEqual(stuck[0]["health"]["verdict"], "unhealthy")
        failed = [c for c in stuck[0]["checks"] if c["outcome"] == "fail"]
        self.assertTrue(any(c["name"].startswith("memtest.") for c in failed), failed)
        # Ranked last among the runs that finished: the table shows it below the healthy ones.
        table = self.gpuherd("burnin", "--scenario", FAULTS, "--level", "2", check=1).stdout
        self.assertIn("faults_found", table)

    def test_sigint_stops_within_seconds_and_records_aborted_runs(self):
        proc = subprocess.Popen([GPUHERD, "--home", self.home, "burnin", "--sim", "2", "--level", "3",
                                 "--duration", "10m"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, NO_COLOR="1"))
        # Wait for the first progress line: the GPUs are busy by then.
        line = proc.stderr.readline()
        while line and "GPU 0" not in line:
            line = proc.stderr.readline()
        self.assertIn("GPU 0", line)
        time.sleep(1)
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        self.assertLess(time.time() - sent, 5, err)
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("interrupted", err)
        self.assertIn("aborted", out)
        self.assertEqual([(lvl, o) for _, lvl, o, _, _ in stored_runs(self.home)], [(3, "aborted")] * 2)
        health = json.loads(self.gpuherd("health", "0", "--json", check=0).stdout)
        self.assertEqual(health["runs"][0]["outcome"], "aborted")

    def test_bad_input_exits_2_says_what_to_fix_and_stores_nothing(self):
        cases = [
            (["--level", "4"], "--level must be 1"),
            (["--level", "1", "--gpu", "99"], "no GPU '99'"),
            (["--level", "3", "--duration", "0s"], "--duration takes a positive duration"),
            (["--level", "3", "--duration", "soon"], "--duration takes a positive duration"),
            (["--level", "2", "--memtest-fraction", "1.5"], "--memtest-fraction: the memory test covers"),
            ([], "--level is required"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                proc = self.gpuherd("burnin", "--sim", "2", *args)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertEqual(proc.stdout, "")
        self.assertFalse(os.path.exists(os.path.join(self.home, "state.db")))

    def test_without_gpus_or_sim_it_could_not_run(self):
        env = dict(os.environ, NO_COLOR="1", GPUHERD_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
        proc = subprocess.run([GPUHERD, "--home", self.home, "burnin", "--level", "1"], capture_output=True,
                              text=True, timeout=60, env=env)
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("--sim N", proc.stderr)
        self.assertEqual(stored_runs(self.home), [])


class HealthTest(HomeTestCase):
    def test_fleet_and_gpu_views_show_the_stored_history(self):
        self.assertEqual(self.gpuherd("health").returncode, 1)  # nothing stored yet: says so
        self.gpuherd("burnin", "--sim", "2", "--level", "1", check=0)
        self.gpuherd("burnin", "--sim", "2", "--gpu", "1", "--level", "2", check=0)

        fleet = self.gpuherd("health", check=0).stdout
        self.assertTrue(fleet.startswith("GPU  MODEL"), fleet)
        self.assertEqual(len(fleet.splitlines()), 3)
        self.assertEqual(fleet.count("healthy"), 2)

        history = json.loads(self.gpuherd("health", "1", "--json", check=0).stdout)["runs"]
        self.assertEqual([r["level"] for r in history], [2, 1])  # newest first
        self.assertGreater(history[0]["id"], history[1]["id"])
        uuid = history[0]["gpu_uuid"]
        by_uuid = json.loads(self.gpuherd("health", uuid, "--json", check=0).stdout)["runs"]
        self.assertEqual([r["id"] for r in by_uuid], [r["id"] for r in history])

        text = self.gpuherd("health", "1", check=0).stdout
        self.assertIn("FINISHED (UTC)", text)
        self.assertIn("CHECK", text)
        self.assertIn("Score factors", text)
        self.assertIn("memtest.", text)

        report = os.path.join(self.home, "gpu1.html")
        self.gpuherd("health", "1", "--report", report, check=0)
        with open(report) as f:
            html = f.read()
        self.assertIn("<svg", html)
        self.assertIn(uuid, html)

        missing = self.gpuherd("health", "7")
        self.assertEqual(missing.returncode, 1)
        self.assertIn("no burn-in of a GPU '7'", missing.stderr)


class DaemonTest(HomeTestCase):
    def test_a_simulated_burnin_by_hand_stays_out_of_the_daemons_store(self):
        # A --sim fleet run by hand is not the daemon's GPUs, even when its
        # simulated UUIDs match: its results never reach the daemon.
        self.start_daemon("--sim", "2", "--interval", "200ms")
        out = json.loads(self.gpuherd("burnin", "--sim", "2", "--level", "1", "--json", check=0).stdout)
        self.assertEqual(len(out["runs"]), 2)
        latest = json.loads(self.gpuherd("health", "--json", check=0).stdout)
        self.assertEqual(latest["runs"], [])
        events = json.loads(self.gpuherd("events", "--json", "--kind", "burnin.", check=0).stdout)
        self.assertEqual(events, [])
        self.daemon.terminate()
        self.daemon.wait(timeout=10)
        self.assertEqual(len(stored_runs(self.home)), 0)

    def job(self, job_id):
        return json.loads(self.gpuherd("show", str(job_id), "--json", check=0).stdout)

    def test_burnin_through_the_daemon_waits_for_the_gpu_and_keeps_new_work_off_it(self):
        self.start_daemon("--sim", "1", "--interval", "200ms")
        def submit(*args):  # as the jobs' user
            return int(cli_e2e_test.run("submit", *args, home=self.home, user=JOB_USER).stdout)

        before = submit("--gpus", "1", "--", "sleep", "3")
        deadline = time.time() + 20
        while self.job(before)["state"] != "running":
            self.assertLess(time.time(), deadline, "the first job never started")
            time.sleep(0.1)
        burnin = subprocess.Popen([GPUHERD, "--home", self.home, "burnin", "--level", "1", "--gpu", "0", "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, NO_COLOR="1"))
        # The burn-in job is queued ahead of later work: a job submitted now
        # waits for it although it could have the GPU when the first ends.
        deadline = time.time() + 20
        while True:
            listed = json.loads(self.gpuherd("ps", "--json", check=0).stdout)
            names = [j["name"] for j in listed]
            if any(n.startswith("burnin-L1") for n in names):
                break
            self.assertLess(time.time(), deadline, "no burn-in job appeared")
            time.sleep(0.1)
        after = submit("--gpus", "1", "--", "true")
        out, err = burnin.communicate(timeout=60)
        self.assertEqual(burnin.returncode, 0, err)
        self.assertIn("starts once no job holds", err)
        result = json.loads(out)
        self.assertEqual(len(result["runs"]), 1)
        self.assertEqual(result["runs"][0]["verdict"] if "verdict" in result["runs"][0]
                         else result["runs"][0]["health"]["verdict"], "healthy")
        burnin_job = self.job(result["job"])
        self.assertEqual(burnin_job["state"], "completed")
        self.assertGreaterEqual(burnin_job["started"], self.job(before)["ended"])
        deadline = time.time() + 20
        while self.job(after)["state"] != "completed":
            self.assertLess(time.time(), deadline, "the later job never ran")
            time.sleep(0.1)
        self.assertGreaterEqual(self.job(after)["started"], burnin_job["ended"])
        # Recorded by the job through the daemon, naming the job.
        runs = json.loads(self.gpuherd("health", "--json", check=0).stdout)["runs"]
        self.assertEqual([r["job_id"] for r in runs], [result["job"]])

    def test_a_passing_burnin_returns_a_gpu_gpuherd_drained_but_not_one_a_person_drained(self):
        rules = os.path.join(self.home, "rules.yaml")
        with open(rules, "w") as f:
            f.write("rules:\n  - name: drain_gpu0\n    expr: temp_c > 0\n    action: drain\n"
                    "    summary: test rule that drains a GPU at once\n")
        self.start_daemon("--sim", "2", "--interval", "200ms", "--alert-rules", rules)
        deadline = time.time() + 20
        while True:
            gpus = json.loads(self.gpuherd("gpus", "--json", check=0).stdout)["gpus"]
            if all(g.get("drained") for g in gpus):
                break
            self.assertLess(time.time(), deadline, "the alert did not drain the GPUs")
            time.sleep(0.1)
        self.assertTrue(gpus[0]["drain_reason"].startswith("alert drain_gpu0"), gpus[0])
        # GPU 1 drained by a person instead (the alert keeps its reason).
        self.gpuherd("undrain", "1", check=0)
        self.gpuherd("drain", "1", "--reason", "fan replaced, watching it", check=0)
        out = self.gpuherd("burnin", "--level", "1", "--json", check=0, timeout=90)
        self.assertEqual(len(json.loads(out.stdout)["runs"]), 2)
        gpus = json.loads(self.gpuherd("gpus", "--json", check=0).stdout)["gpus"]
        self.assertFalse(gpus[0].get("drained", False), gpus[0])
        self.assertTrue(gpus[1].get("drained"), gpus[1])
        self.assertIn("fan replaced", gpus[1]["drain_reason"])
        events = json.loads(self.gpuherd("events", "--json", "--kind", "gpu.undrained", check=0).stdout)
        self.assertTrue(any("burn-in job" in e["message"] and "passed" in e["message"] for e in events), events)

    def test_a_burnin_request_with_bad_input_is_refused_and_queues_nothing(self):
        self.start_daemon("--sim", "2", "--interval", "200ms")
        bad = self.gpuherd("burnin", "--level", "1", "--gpu", "7")
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("not a GPU of this machine", bad.stderr)
        listed = json.loads(self.gpuherd("ps", "--all", "--json", check=0).stdout)
        self.assertEqual(listed, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
