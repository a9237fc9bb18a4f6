#!/usr/bin/env python3
"""End-to-end tests of job containment: a job whose process leaves its session
(`setsid`) is still ended on cancel and at its time limit, in its control group
(cgroup v1 on the build machines; root only) and, where no control group can
be written, through its shim as a child subreaper; `--mem` is enforced. The jobs
run as nobody (JOB_USER) wherever the test runs as root."""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import JOB_USER, Home  # noqa: E402

IS_ROOT = os.geteuid() == 0


def processes_with(marker):
    """Live (not zombie) processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(name))
    return found


def uid_of_process(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))


class ContainmentTest(unittest.TestCase):
    cgroup_root = None  # the daemon's default, /sys/fs/cgroup

    def setUp(self):
        self.home = Home(user=JOB_USER)
        args = ["--sim", "1", "--interval", "200ms"]
        if self.cgroup_root is not None:
            args += ["--cgroup-root", self.cgroup_root]
        self.home.start(*args)
        self.counter = 0

    def tearDown(self):
        for pid in processes_with(self.marker_prefix()):
            os.kill(pid, 9)  # a failed test leaves nothing behind
        self.home.close()

    def marker_prefix(self):
        return f"1000.{os.getpid()}{id(self) % 1000:03d}"

    def marker(self):
        """A sleep duration no other process on the machine uses."""
        self.counter += 1
        return f"{self.marker_prefix()}{self.counter}"

    def gh(self, *args, check=True):
        """The CLI as the jobs' user (nobody where the test runs as root)."""
        return self.home.run(*args, check=check)

    def submit(self, *args):
        return int(self.gh("submit", *args).stdout.strip())

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

    def wait_escaped(self, marker):
        deadline = time.time() + 20
        while time.time() < deadline:
            pids = processes_with(marker)
            if pids:
                return pids
            time.sleep(0.05)
        self.fail(f"the job's setsid sleep {marker} never started")

    def assert_all_gone(self, marker):
        deadline = time.time() + 3
        while processes_with(marker) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(processes_with(marker), [], f"processes of the job outlived it ({marker})")

    def escaping_job(self, *args):
        marker = self.marker()
        jid = self.submit("--gpus", "1", *args, "--", "sh", "-c", f"setsid sleep {marker} & wait")
        for pid in self.wait_escaped(marker):
            self.assertEqual(uid_of_process(pid), self.home.uid, "the job runs as its submitter")
        self.assertEqual(self.job(jid)["state"], "running")
        return jid, marker

    def expected_containment(self):
        return "cgroup v1 (memory, cpu, pids, freezer)"

    def test_cancel_ends_a_process_that_left_the_session(self):
        jid, marker = self.escaping_job()
        show = self.gh("show", str(jid)).stdout
        self.assertIn("containment", show)
        self.assertIn(self.expected_containment(), show)
        self.gh("cancel", str(jid))
        self.wait_state(jid, ["cancelled"])
        self.assert_all_gone(marker)

    def test_time_limit_ends_a_process_that_left_the_session(self):
        jid, marker = self.escaping_job("--time-limit", "2s", "--checkpoint-grace", "1s")
        j = self.wait_state(jid, ["failed", "completed", "cancelled"])
        self.assertEqual(j["state"], "failed", j)
        self.assertIn("time limit", j["reason"])
        self.assert_all_gone(marker)


@unittest.skipUnless(IS_ROOT, "needs root: the daemon makes control groups under /sys/fs/cgroup only as root")
class CgroupContainmentTest(ContainmentTest):
    def setUp(self):
        super().setUp()
        if "cgroup v1" not in self.home_containment():
            self.home.close()
            self.skipTest("no writable cgroup v1 hierarchies here: " + self.home_containment())

    def home_containment(self):
        with open(os.path.join(self.home.dir, "daemon.out")) as f:
            for line in f:
                if "job containment:" in line:
                    return line.split("job containment:", 1)[1].strip()
        return "(not logged)"

    def test_memory_limit_is_enforced_and_the_end_says_so(self):
        jid = self.submit("--mem", "64MiB", "--", "python3", "-c",
                          "b = bytearray(b'x') * (200 << 20)\nprint('survived')")
        j = self.wait_state(jid, ["failed", "completed"])
        self.assertEqual(j["state"], "failed", j)
        self.assertIn("out of memory", j["reason"])
        self.assertIn("--mem 64 MiB", j["reason"])
        self.assertNotIn("survived", self.gh("logs", str(jid)).stdout)

    def test_cpus_sets_the_quota(self):
        marker = self.marker()
        jid = self.submit("--cpus", "1", "--", "sh", "-c", f"cat /proc/self/cgroup; exec sleep {marker}")
        self.wait_escaped(marker)
        cpu_line = [line for line in self.gh("logs", str(jid)).stdout.splitlines() if ":cpu:" in line]
        self.assertEqual(len(cpu_line), 1, self.gh("logs", str(jid)).stdout)
        group = cpu_line[0].split(":", 2)[2]
        self.assertTrue(group.endswith(f"/job-{jid}-1"), group)
        with open(f"/sys/fs/cgroup/cpu{group}/cpu.cfs_quota_us") as f:
            self.assertEqual(f.read().strip(), "100000")
        self.gh("cancel", str(jid))
        self.wait_state(jid, ["cancelled"])
        self.assert_all_gone(marker)
        self.assertFalse(os.path.exists(f"/sys/fs/cgroup/cpu{group}"), "the job's group was not removed")

    def test_processes_of_a_lost_shim_are_ended_when_the_daemon_restarts(self):
        jid, marker = self.escaping_job()
        self.home.kill9()
        # The shim, killed too, can no longer end its job: only the group can.
        with open(os.path.join(self.home.dir, "run", "jobs", str(jid), "1", "shim")) as f:
            os.kill(json.load(f)["pid"], 9)
        self.assertTrue(processes_with(marker), "the job died with its shim: nothing left to contain")
        self.home.start("--sim", "1", "--interval", "200ms")
        j = self.wait_state(jid, ["failed"])  # no restarts allowed
        self.assertIn("supervisor was lost", j["reason"])
        self.assert_all_gone(marker)


class SubreaperContainmentTest(ContainmentTest):
    """No control group can be written: the shim, a child subreaper, finds them."""

    cgroup_root = "/nonexistent/cgroup"

    def expected_containment(self):
        return "none (no cgroup file system at /nonexistent/cgroup), subreaper only"


del ContainmentTest  # the base runs through its two subclasses only

if __name__ == "__main__":
    unittest.main()
