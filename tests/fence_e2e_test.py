#!/usr/bin/env python3
"""End-to-end tests of the memory fence (README "Fractional GPUs: the memory
fence"): the real daemon and shim on a simulated fleet. A fractional job gets
the fence preloaded; with no GPU driver it stays out of the way and `show`
says so; a job that brings the fake driver is fenced at exactly the share the
scheduler gave it. Run as root, the daemon is root and the jobs are nobody's
(the fence is for the lab's users), but for one test that keeps root's own
jobs covered; the shim, the fence library, the probe and the fake driver are
copied where nobody can read them, as an installed gpuherd is."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, Home, run  # noqa: E402

PROBE = os.environ.get("FENCE_PROBE", "")
FAKE_LIBCUDA_DIR = os.environ.get("FAKE_LIBCUDA_DIR", "")
MIB = 1 << 20
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
JOBS_AS_NOBODY = os.geteuid() == 0 and shutil.which("setpriv") is not None


class Installed:
    """The shim with the fence library beside it, the probe and the fake
    driver, in a folder every user can read (the build tree may not be)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpuherd-fence-install-")
        os.chmod(self.dir, 0o755)
        build = os.path.dirname(os.path.realpath(GPUHERD))
        for name in ("gpuherd-shim", "libgpuherd-fence.so"):
            shutil.copy(os.path.join(build, name), os.path.join(self.dir, name))
        self.shim = os.path.join(self.dir, "gpuherd-shim")
        self.probe = self.libcuda = ""
        if PROBE and FAKE_LIBCUDA_DIR:
            self.probe = os.path.join(self.dir, "fence_probe")
            shutil.copy(PROBE, self.probe)
            self.libcuda = os.path.join(self.dir, "fake-libcuda")
            shutil.copytree(FAKE_LIBCUDA_DIR, self.libcuda)
        for top, dirs, files in os.walk(self.dir):
            for d in dirs:
                os.chmod(os.path.join(top, d), 0o755)
            for f in files:
                os.chmod(os.path.join(top, f), 0o755)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class FenceTest(unittest.TestCase):
    # The user whose jobs a test submits: nobody where the test is root.
    as_nobody = JOBS_AS_NOBODY

    def setUp(self):
        self.installed = Installed()
        self.home = Home()
        old = os.environ.get("GPUHERD_SHIM")
        os.environ["GPUHERD_SHIM"] = self.installed.shim
        try:
            self.home.start("--sim", "1", "--interval", "200ms")
        finally:
            if old is None:
                del os.environ["GPUHERD_SHIM"]
            else:
                os.environ["GPUHERD_SHIM"] = old

    def tearDown(self):
        self.home.close()
        self.installed.close()

    def gh(self, *args, check=True):
        """The CLI as the jobs' user."""
        if not self.as_nobody:
            return run(*args, home=self.home.dir, check=check)
        proc = subprocess.run(AS_NOBODY + [GPUHERD, "--home", self.home.dir] + list(args), capture_output=True,
                              text=True, timeout=30, cwd="/tmp", env=dict(os.environ, NO_COLOR="1"))
        if check and proc.returncode != 0:
            raise AssertionError(f"nobody: gpuherd {args} exited {proc.returncode}: {proc.stderr}")
        return proc

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
        jid = self.submit("--gpus", "0.5", "--gpu-mem", "2GiB", "--env", f"LD_LIBRARY_PATH={self.installed.libcuda}",
                          "--", self.installed.probe, "procaddress", "alloc", "1536", "alloc", "1024", "info",
                          "sleep", "3")
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


    @unittest.skipUnless(PROBE and FAKE_LIBCUDA_DIR and JOBS_AS_NOBODY, "needs root, setpriv and the test driver")
    def test_a_job_of_another_user_past_its_share_is_refused_and_show_says_so(self):
        # The job's user owns its ledger: a 1 GiB share, 2,000 MiB asked for.
        jid = self.submit("--gpus", "0.5", "--gpu-mem", "1GiB", "--env", f"LD_LIBRARY_PATH={self.installed.libcuda}",
                          "--", self.installed.probe, "dlsym", "alloc", "600", "alloc", "2000", "sleep", "3")
        j = self.wait_for(jid, lambda j: j.get("memory_fence", {}).get("state") == "active", "active fence")
        self.assertEqual(j["memory_fence"]["used_bytes"], 600 * MIB, j)
        self.assertIn("gpu memory 600 MiB used of 1024 MiB (fence active", self.gh("show", str(jid)).stdout)
        done = self.wait_for(jid, lambda j: j["state"] in ("completed", "failed"), "end")
        self.assertEqual(done["state"], "completed", done)
        # The second allocation was refused (CUDA_ERROR_OUT_OF_MEMORY, 2).
        self.assertEqual(self.gh("logs", str(jid)).stdout.split("\n")[:2], ["alloc 600 0", "alloc 2000 2"])
        self.assertEqual(self.gh("logs", str(jid), "--stderr").stdout, "")
        ledger = os.stat(os.path.join(self.home.dir, "jobs", str(jid), "1", "fence.ledger"))
        self.assertEqual((ledger.st_uid, ledger.st_mode & 0o777), (NOBODY, 0o600))


class RootJobsFenceTest(FenceTest):
    """The daemon's own user runs fractional jobs too."""
    as_nobody = False

    # The other tests of FenceTest run again here as root but for this one,
    # which is about another user.
    def test_a_job_of_another_user_past_its_share_is_refused_and_show_says_so(self):
        self.skipTest("about a user other than the daemon's")


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
