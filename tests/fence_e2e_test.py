#!/usr/bin/env python3
"""End-to-end tests of the memory fence (README "Fractional GPUs: the memory
fence"): the real daemon and shim on a simulated fleet. A fractional job gets
the fence preloaded; with no GPU driver it stays out of the way and `show`
says so; a job that brings the fake driver is fenced at exactly the share the
scheduler gave it."""

import json
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, Home, run  # noqa: E402

PROBE = os.environ.get("FENCE_PROBE", "")
FAKE_LIBCUDA_DIR = os.environ.get("FAKE_LIBCUDA_DIR", "")
MIB = 1 << 20


class FenceTest(unittest.TestCase):
    def setUp(self):
        self.home = Home()
        self.home.start("--sim", "1", "--interval", "200ms")

    def tearDown(self):
        self.home.close()

    def gh(self, *args, check=True):
        return run(*args, home=self.home.dir, check=check)

    def submit(self, *args):
        return int(self.gh("submit", *args).stdout.strip())

    def job(self, job_id):
        return json.loads(self.gh("show", str(job_id), "--json").stdout)

    def wait_for(self, job_id, predicate, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = self.job(job_id)
            if predicate(j):
                return j
            time.sleep(0.1)
        self.fail(f"job {job_id}: no {what} after {timeout} s: {self.job(job_id)}")

    def test_without_a_driver_the_fence_stays_out_of_the_way_and_show_says_so(self):
        jid = self.submit("--gpus", "0.5", "--gpu-mem", "2GiB", "--", "sh", "-c",
                          'echo "$LD_PRELOAD|$GPUHERD_GPU_MEM_LIMIT_BYTES"; sleep 2')
        # The shim writes the status as it starts the job.
        j = self.wait_for(jid, lambda j: j.get("memory_fence", {}).get("state", "none") != "none", "fence status")
        self.assertEqual(j["memory_fence"]["state"], "preloaded", j)
        self.assertEqual(j["memory_fence"]["share_bytes"], 2048 * MIB)
        self.assertNotIn("used_bytes", j["memory_fence"])
        text = self.gh("show", str(jid)).stdout
        self.assertIn("gpu memory share 2048 MiB (fence preloaded, no CUDA call seen yet; "
                      "the memory watchdog enforces the share)", text)
        done = self.wait_for(jid, lambda j: j["state"] in ("completed", "failed"), "end")
        self.assertEqual(done["state"], "completed", done)
        preload, limit = self.gh("logs", str(jid)).stdout.strip().split("|")
        self.assertTrue(preload.endswith("/libgpuherd-fence.so"), preload)
        self.assertEqual(int(limit), 2048 * MIB)
        self.assertEqual(self.gh("logs", str(jid), "--stderr").stdout, "")

    def test_a_whole_gpu_job_is_not_fenced(self):
        jid = self.submit("--gpus", "1", "--", "sh", "-c", 'echo "[$LD_PRELOAD]"')
        j = self.wait_for(jid, lambda j: j["state"] in ("completed", "failed"), "end")
        self.assertEqual(j["state"], "completed", j)
        self.assertEqual(self.gh("logs", str(jid)).stdout, "[]\n")
        self.assertNotIn("memory_fence", j)

    @unittest.skipUnless(PROBE and FAKE_LIBCUDA_DIR, "FENCE_PROBE and FAKE_LIBCUDA_DIR name the test driver")
    def test_a_job_with_a_driver_is_held_to_its_share(self):
        jid = self.submit("--gpus", "0.5", "--gpu-mem", "2GiB", "--env", f"LD_LIBRARY_PATH={FAKE_LIBCUDA_DIR}",
                          "--", PROBE, "procaddress", "alloc", "1536", "alloc", "1024", "info", "sleep", "3")
        j = self.wait_for(jid, lambda j: j.get("memory_fence", {}).get("state") == "active", "active fence")
        self.assertEqual(j["memory_fence"]["used_bytes"], 1536 * MIB, j)
        self.assertEqual(j["memory_fence"]["share_bytes"], 2048 * MIB)
        self.assertNotIn("fence_share_bytes", j["memory_fence"], "the fence enforces the scheduler's share")
        self.assertIn("gpu memory 1536 MiB used of 2048 MiB (fence active", self.gh("show", str(jid)).stdout)
        done = self.wait_for(jid, lambda j: j["state"] in ("completed", "failed"), "end")
        self.assertEqual(done["state"], "completed", done)
        self.assertEqual(self.gh("logs", str(jid)).stdout.split("\n")[:3],
                         ["alloc 1536 0", "alloc 1024 2", f"info {512 * MIB} {2048 * MIB} 0"])
        self.assertEqual(done["memory_fence"]["used_bytes"], 0, "a job that ended holds nothing")


class MissingLibraryTest(unittest.TestCase):
    def test_without_the_library_the_job_runs_and_show_says_the_fence_is_off(self):
        shim_dir = tempfile.mkdtemp(prefix="gpuherd-shim-alone-")
        shim = os.path.join(shim_dir, "gpuherd-shim")
        shutil.copy(os.path.join(os.path.dirname(os.path.realpath(GPUHERD)), "gpuherd-shim"), shim)
        home = Home()
        old = os.environ.get("GPUHERD_SHIM")
        os.environ["GPUHERD_SHIM"] = shim
        try:
            home.start("--sim", "1", "--interval", "200ms")
            jid = int(run("submit", "--gpus", "0.5", "--gpu-mem", "1GiB", "--", "sh", "-c", 'echo "[$LD_PRELOAD]"',
                          home=home.dir).stdout)
            deadline = time.time() + 30
            while time.time() < deadline:
                j = json.loads(run("show", str(jid), "--json", home=home.dir).stdout)
                if j["state"] in ("completed", "failed"):
                    break
                time.sleep(0.1)
            self.assertEqual(j["state"], "completed", j)
            self.assertEqual(run("logs", str(jid), home=home.dir).stdout, "[]\n")
            self.assertEqual(j["memory_fence"]["state"], "off", j)
            self.assertIn("the fence library is not installed", j["memory_fence"]["detail"])
            self.assertIn("(fence off: the fence library is not installed",
                          run("show", str(jid), home=home.dir).stdout)
        finally:
            if old is None:
                del os.environ["GPUHERD_SHIM"]
            else:
                os.environ["GPUHERD_SHIM"] = old
            home.close()
            shutil.rmtree(shim_dir)


class MpsTest(unittest.TestCase):
    def test_mps_is_refused_on_a_simulated_fleet(self):
        home = Home()
        try:
            proc = run("daemon", "--sim", "1", "--port", "0", "--mps", home=home.dir, check=False)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertIn("--mps needs real GPUs; this fleet is simulated", proc.stderr)
        finally:
            home.close()


if __name__ == "__main__":
    unittest.main()
