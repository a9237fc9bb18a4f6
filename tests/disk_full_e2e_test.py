#!/usr/bin/env python3
"""End-to-end: the daemon's home on a file system that fills up (a small
tmpfs mounted for the test; root only, skipped otherwise). Requests refused
because nothing could be committed leave no trace in the queue or among the
pipeline runs; a job that
ends while the disk is full keeps its exit code; once space is freed the
daemon goes on without a restart. The jobs and the pipeline are nobody's
(JOB_USER)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import JOB_USER, Home  # noqa: E402

IS_ROOT = os.geteuid() == 0


def fill(path):
    """Writes zeros into `path` until the file system refuses."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 16, 4096, 512):  # then the pages the big writes could not take
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


@unittest.skipUnless(IS_ROOT, "needs root to mount a small tmpfs as the daemon's home")
class DiskFullTest(unittest.TestCase):
    def setUp(self):
        self.mount = tempfile.mkdtemp(prefix="gpuherd-full-")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m,mode=0711", "tmpfs", self.mount],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            os.rmdir(self.mount)
            self.skipTest("cannot mount a tmpfs here: " + proc.stderr.strip())
        self.home = Home(user=JOB_USER)
        shutil.rmtree(self.home.dir)
        self.home.dir = os.path.join(self.mount, "home")
        os.mkdir(self.home.dir, 0o700)
        self.filler = os.path.join(self.mount, "filler")

    def tearDown(self):
        self.home.close()
        subprocess.run(["umount", "-l", self.mount], check=False)
        os.rmdir(self.mount)

    def gh(self, *args, check=True):
        """The CLI as the jobs' user (nobody where the test runs as root)."""
        return self.home.run(*args, check=check, timeout=60)

    def jobs(self):
        return json.loads(self.gh("ps", "--all", "--json").stdout)

    def wait_state(self, jid, states, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = json.loads(self.gh("show", str(jid), "--json").stdout)
            if j["state"] in states:
                return j
            time.sleep(0.2)
        self.fail(f"job {jid} did not reach {states}: {j}")

    def test_refused_requests_leave_no_trace_and_exits_survive(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        ending = int(self.gh("submit", "--", "sh", "-c", "sleep 3; exit 3").stdout)
        self.wait_state(ending, ["running"])
        fill(self.filler)
        refused = 0
        for _ in range(10):
            proc = self.gh("submit", "--", "true", check=False)
            self.assertNotEqual(proc.returncode, 0, proc.stdout)
            refused += 1
        self.assertEqual([j["id"] for j in self.jobs()], [ending], "a refused submission became a job")
        pipeline = self.home.file("p.yaml", "name: full\ndefaults: {gpus: 0}\nsteps:\n  s: {run: 'true'}\n")
        proc = self.gh("run", pipeline, check=False)
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        self.assertEqual(json.loads(self.gh("pipelines", "--all", "--json").stdout), [],
                         "a refused pipeline run is listed")
        time.sleep(0.5)  # a folder worker asked for the refused run would have made its folders
        self.assertFalse(os.path.exists(os.path.join(self.home.dir, "pipelines", "1")),
                         "a refused pipeline run's folders were made")
        time.sleep(4)  # the job ends meanwhile, on the full disk
        self.assertIsNone(self.home.daemon.poll(), "the daemon died on a full disk")
        os.unlink(self.filler)
        j = self.wait_state(ending, ["failed", "completed"])
        self.assertEqual(j["exit_code"], 3, j)
        self.assertNotIn("supervisor", j.get("reason", ""), j)
        after = int(self.gh("submit", "--", "true").stdout)
        self.wait_state(after, ["completed"])
        self.assertEqual(sorted(j["id"] for j in self.jobs()), [ending, after])
        self.assertEqual(refused, 10)
        # The refused run's id is skipped; the next run works.
        done = json.loads(self.gh("run", "--wait", "--json", pipeline).stdout)
        self.assertEqual((done["id"], done["state"]), (2, "completed"), done)
        self.assertTrue(os.path.isdir(os.path.join(self.home.dir, "pipelines", "2", "s")))


if __name__ == "__main__":
    unittest.main()
