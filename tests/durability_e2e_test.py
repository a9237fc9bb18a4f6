#!/usr/bin/env python3
"""End-to-end tests of what the daemon never does twice: reuse a job's or a
pipeline's id after its database was moved aside (issue: ids never reused),
and act on one request twice when its client timed out and retried
(Idempotency-Key). The real daemon, real jobs, a simulated fleet; the jobs and
their requests are nobody's (JOB_USER) wherever the test runs as root."""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, JOB_USER, Home  # noqa: E402


class DurabilityTest(unittest.TestCase):
    def setUp(self):
        self.home = Home(user=JOB_USER)

    def tearDown(self):
        if self.home.daemon and self.home.daemon.poll() is None:
            os.kill(self.home.daemon.pid, signal.SIGCONT)  # a failed test may leave it stopped
        self.home.close()

    def gh(self, *args, check=True, env=None, timeout=30):
        """The CLI as the jobs' user (nobody where the test runs as root)."""
        return self.home.run(*args, check=check, env=env, timeout=timeout)

    def job(self, job_id):
        return json.loads(self.gh("show", str(job_id), "--json").stdout)

    def wait_state(self, job_id, states, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = self.job(job_id)
            if j["state"] in states:
                return j
            time.sleep(0.1)
        self.fail(f"job {job_id} is {self.job(job_id)['state']}, not {states}, after {timeout} s")

    def stop_daemon(self):
        self.home.daemon.terminate()
        self.home.daemon.wait(timeout=20)
        self.home.daemon = None

    # --- ids never reused -----------------------------------------------------

    def test_a_moved_aside_database_does_not_reuse_old_ids(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        old = int(self.gh("submit", "--", "sh", "-c", "echo old job").stdout)
        self.wait_state(old, ["completed"])
        old_log = self.gh("logs", str(old)).stdout
        self.assertEqual(old_log, "old job\n")
        os.makedirs(os.path.join(self.home.dir, "pipelines", "4"))  # an earlier pipeline run's folder
        self.stop_daemon()
        aside = os.path.join(self.home.dir, "state.db.aside")
        os.rename(os.path.join(self.home.dir, "state.db"), aside)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(os.path.join(self.home.dir, "state.db" + suffix)):
                os.rename(os.path.join(self.home.dir, "state.db" + suffix), aside + suffix)

        refused = subprocess.run([GPUHERD, "--home", self.home.dir, "daemon", "--port", "0", "--sim", "1"],
                                 capture_output=True, text=True, timeout=30)
        self.assertNotEqual(refused.returncode, 0, refused.stdout)
        self.assertIn("--adopt-empty-state", refused.stderr)
        self.assertIn(f"up to id {old}", refused.stderr)

        self.home.start("--sim", "1", "--interval", "200ms", "--adopt-empty-state")
        new = int(self.gh("submit", "--", "sh", "-c", "echo new job").stdout)
        self.assertGreater(new, old)
        self.wait_state(new, ["completed"])
        self.assertEqual(self.gh("logs", str(new)).stdout, "new job\n")
        with open(os.path.join(self.home.dir, "jobs", str(old), "1", "stdout")) as f:
            self.assertEqual(f.read(), old_log)  # the old job's folder is untouched
        # The flag is needed once: this database has assigned ids now.
        self.stop_daemon()
        self.home.start("--sim", "1", "--interval", "200ms")
        self.assertEqual(int(self.gh("submit", "--", "true").stdout), new + 1)

    # --- idempotent submission ------------------------------------------------

    def test_the_same_key_returns_the_first_outcome(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        unix_request = self.home.request  # as the jobs' user
        # No cwd: the job runs in its own folder, <home>/jobs/<id>/<attempt>.
        body = json.dumps({"command": ["sh", "-c", "touch made-here && pwd"], "name": "once"}).encode()
        key = {"Idempotency-Key": "e2e-key-1"}
        s1, h1, b1 = unix_request("POST", "/v1/jobs", body, key)
        s2, h2, b2 = unix_request("POST", "/v1/jobs", body, key)
        self.assertIn(s1, (200, 201), b1)
        self.assertEqual((s2, b2), (s1, b1))
        self.assertNotIn("idempotent-replayed", h1)
        self.assertEqual(h2.get("idempotent-replayed"), "true")
        other, _, msg = unix_request("POST", "/v1/jobs", json.dumps({"command": ["false"]}).encode(), key)
        self.assertEqual(other, 422, msg)
        bad, _, msg = unix_request("POST", "/v1/jobs", body, {"Idempotency-Key": "x" * 129})
        self.assertEqual(bad, 400, msg)
        jobs = json.loads(self.gh("ps", "--all", "--json").stdout)
        self.assertEqual([j["name"] for j in jobs], ["once"])
        once = self.wait_state(jobs[0]["id"], ["completed", "failed"])
        self.assertEqual(once["state"], "completed", once)
        folder = os.path.join(self.home.dir, "jobs", str(once["id"]), "1")
        self.assertEqual(self.gh("logs", str(once["id"])).stdout, folder + "\n")
        self.assertTrue(os.path.exists(os.path.join(folder, "made-here")))
        # Kept across a restart.
        self.stop_daemon()
        self.home.start("--sim", "1", "--interval", "200ms")
        s3, h3, b3 = unix_request("POST", "/v1/jobs", body, key)
        self.assertEqual((s3, b3), (s1, b1))
        self.assertEqual(len(json.loads(self.gh("ps", "--all", "--json").stdout)), 1)

    def test_a_submit_that_timed_out_is_retried_with_its_key_and_runs_once(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        marker = os.path.join(self.home.work, "ran.txt")
        pid = self.home.daemon.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            cli = self.home.popen("submit", "--name", "stopped", "--", "sh", "-c", f"echo ran >> {marker}",
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={"GPUHERD_CLIENT_TIMEOUT": "3s"})
            # The first try times out after 3 s; the retry, with the same
            # key, is waiting when the daemon goes on.
            time.sleep(4.5)
            self.assertIsNone(cli.poll(), "the CLI gave up before its retry")
        finally:
            os.kill(pid, signal.SIGCONT)
        out, err = cli.communicate(timeout=30)
        self.assertEqual(cli.returncode, 0, err)
        jid = int(out)
        self.wait_state(jid, ["completed"])
        jobs = json.loads(self.gh("ps", "--all", "--json").stdout)
        self.assertEqual([(j["id"], j["name"]) for j in jobs], [(jid, "stopped")])
        time.sleep(0.5)
        with open(marker) as f:
            self.assertEqual(f.read(), "ran\n")

    def test_without_an_answer_the_cli_says_the_request_may_have_been_done(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        os.kill(self.home.daemon.pid, signal.SIGSTOP)
        try:
            proc = self.gh("submit", "--", "true", check=False, env={"GPUHERD_CLIENT_TIMEOUT": "1s"})
        finally:
            os.kill(self.home.daemon.pid, signal.SIGCONT)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("tried twice", proc.stderr)
        # Both tries reach the daemon once it goes on; one job results.
        deadline = time.time() + 10
        while time.time() < deadline and not json.loads(self.gh("ps", "--all", "--json").stdout):
            time.sleep(0.1)
        time.sleep(1)
        self.assertEqual(len(json.loads(self.gh("ps", "--all", "--json").stdout)), 1)


if __name__ == "__main__":
    unittest.main()
