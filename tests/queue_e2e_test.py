#!/usr/bin/env python3
"""End-to-end tests of the job queue: the real daemon, real job processes, a
simulated fleet, the unix socket only. The daemon runs as this process's user
(root in CI) and the jobs as nobody (JOB_USER) wherever the test runs as root;
a few tests say why theirs run as root."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, JOB_USER, NOBODY, PYTHON, Home  # noqa: E402



class QueueTest(unittest.TestCase):
    def setUp(self):
        self.home = Home(user=JOB_USER)
        self.count = os.path.join(self.home.checkout(), "examples", "jobs", "count_steps.py")

    def tearDown(self):
        self.home.close()

    def gh(self, *args, check=True):
        """The CLI as the jobs' user (nobody where the test runs as root)."""
        return self.home.run(*args, check=check)

    def admin(self, *args, check=True):
        """The CLI as the daemon's user: drain, undrain and burnin are an admin's."""
        return self.home.admin(*args, check=check)

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

    def runs(self, job_id):
        path = os.path.join(self.home.dir, "checkpoints", str(job_id), "runs.log")
        with open(path) as f:
            return [line.split() for line in f]

    def assert_never_overlapped(self, runs):
        """Each start is followed by its own end before the next start."""
        open_pid = None
        for kind, pid, *_ in runs:
            if kind == "start":
                self.assertIsNone(open_pid, f"a second run started while {open_pid} ran: {runs}")
                open_pid = pid
            else:
                self.assertEqual(pid, open_pid)
                open_pid = None

    def final_count(self, job_id):
        with open(os.path.join(self.home.dir, "checkpoints", str(job_id), "count.json")) as f:
            return json.load(f)["count"]

    # --- basics -------------------------------------------------------------

    def test_submit_run_logs_and_protocol_environment(self):
        self.home.start("--sim", "2", "--interval", "200ms")
        jid = self.submit("--gpus", "1", "--name", "hello", "--", "sh", "-c",
                          "echo out $GPUHERD_JOB_ID $CUDA_VISIBLE_DEVICES $GPUHERD_CHECKPOINT_DIR; echo err >&2; "
                          "echo uid $(id -u) in $(pwd); echo '{\"step\": 1, \"loss\": 0.5}' >> $GPUHERD_METRICS_FILE")
        j = self.wait_state(jid, ["completed", "failed"])
        self.assertEqual(j["state"], "completed", j)
        self.assertEqual(j["exit_code"], 0)
        self.assertEqual(j["user"], self.home.user_name)
        out = self.gh("logs", str(jid)).stdout
        self.assertEqual(len(j["gpu_uuids"]), 1)
        self.assertIn(f"out {jid} {j['gpu_uuids'][0]} ", out)
        self.assertIn(f"uid {self.home.uid} in {self.home.work}\n", out)  # as its submitter, in its folder
        self.assertIn(os.path.join(self.home.dir, "checkpoints", str(jid)), out)
        self.assertEqual(self.gh("logs", str(jid), "--stderr").stdout, "err\n")
        # Its metric line, written by the job as its user, read back by its owner.
        deadline, metrics = time.time() + 10, []
        while not metrics and time.time() < deadline:
            status, _, body = self.home.request("GET", f"/v1/jobs/{jid}/metrics")
            self.assertEqual(status, 200, body)
            metrics = json.loads(body)["metrics"]
            time.sleep(0 if metrics else 0.2)
        self.assertEqual([(m["step"], m["values"]) for m in metrics], [(1, {"step": 1, "loss": 0.5})])
        ps = json.loads(self.gh("ps", "--all", "--json").stdout)
        self.assertEqual([p["id"] for p in ps], [jid])
        self.assertEqual(json.loads(self.gh("ps", "--json").stdout), [])

    def test_cpus_and_mem_count_against_the_machine(self):
        # The daemon reads the machine's CPUs and memory; a job that does not
        # fit waits with a reason, and a finished one is listed from the store.
        self.home.start("--sim", "2", "--interval", "200ms")
        cpus = os.cpu_count()
        too_many = self.submit("--cpus", str(cpus + 1), "--", "true")
        hog = self.submit("--cpus", str(cpus), "--", "sleep", "30")
        self.wait_state(hog, ["running"])
        waiting = self.submit("--cpus", "1", "--", "true")
        deadline = time.time() + 10
        while time.time() < deadline:
            j, w = self.job(too_many), self.job(waiting)
            if "this machine has" in j.get("reason", "") and "CPU" in w.get("reason", ""):
                break
            time.sleep(0.2)
        self.assertEqual(j["state"], "pending", j)
        self.assertIn(f"asks for {cpus + 1} CPUs but this machine has {cpus}", j["reason"])
        self.assertEqual(w["state"], "pending", w)
        self.assertIn(f"waiting for 1 CPU: 0 of {cpus} free", w["reason"])
        self.gh("cancel", str(hog))
        self.assertEqual(self.wait_state(waiting, ["completed"])["state"], "completed")
        shown = self.gh("show", str(hog)).stdout
        self.assertIn("cancelled", shown)
        listed = [p["id"] for p in json.loads(self.gh("ps", "--all", "--json").stdout)]
        self.assertEqual(listed, [too_many, hog, waiting])

    def scenario(self, text):
        path = os.path.join(self.home.dir + ".scenario.yaml")
        with open(path, "w") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def test_a_multi_gpu_job_gets_one_model_unless_mixed_models(self):
        # 4 H100s and 4 3090s: a 5-GPU job cannot start on one model and says
        # so; with --mixed-models it runs across both.
        self.home.start("--scenario", self.scenario(
            "gpus:\n  - {model: h100-sxm, count: 4}\n  - {model: rtx3090, count: 4}\n"), "--interval", "200ms")
        one = self.submit("--gpus", "5", "--", "sleep", "30")
        deadline = time.time() + 10
        while time.time() < deadline and "one model" not in self.job(one).get("reason", ""):
            time.sleep(0.2)
        j = self.job(one)
        self.assertEqual(j["state"], "pending", j)
        self.assertIn("needs 5 GPUs of one model", j["reason"])
        self.assertIn("mixed_models", j["reason"])
        mixed = self.submit("--gpus", "5", "--mixed-models", "--", "sleep", "30")
        j = self.wait_state(mixed, ["running"])
        models = {g["name"] for g in json.loads(self.gh("gpus", "--json").stdout)["gpus"]
                  if g["index"] in j["assigned_gpus"]}
        self.assertEqual(len(models), 2, models)
        self.gh("cancel", str(one), str(mixed))

    def test_gpus_of_stopping_jobs_stay_reserved_for_the_first_in_line(self):
        # 4 fractions hold the 4 H100s; the first in line wants all 4. When
        # the fractions are cancelled and take their time to stop (they trap
        # SIGTERM), a later job without a time limit must not take the GPUs.
        self.home.start("--scenario", self.scenario("gpus:\n  - {model: h100-sxm, count: 4}\n"),
                        "--interval", "200ms")
        trap = "trap 'sleep 3; exit 0' TERM; while true; do sleep 0.1; done"
        fractions = [self.submit("--gpus", "0.5", "--gpu-mem", "1GiB", "--", "sh", "-c", trap)
                     for _ in range(4)]
        for f in fractions:
            self.wait_state(f, ["running"])
        big = self.submit("--gpus", "4", "--priority", "10", "--", "sleep", "30")
        self.gh("cancel", *[str(f) for f in fractions])
        later = self.submit("--gpus", "1", "--", "sleep", "30")
        j = self.wait_state(big, ["running"], timeout=60)
        self.assertEqual(sorted(j["assigned_gpus"]), [0, 1, 2, 3])
        self.assertEqual(self.job(later)["state"], "pending")
        self.assertEqual(self.job(later).get("started", 0), 0)
        self.gh("cancel", str(big), str(later))

    def test_ids_are_monotonic_and_failures_are_recorded(self):
        # As root: the daemon's own user runs jobs too (the other tests submit as nobody).
        self.home.start("--sim", "1", "--interval", "200ms")
        a = int(self.admin("submit", "--", "false").stdout)
        b = int(self.admin("submit", "--", "sh", "-c", "exit 3").stdout)
        c = int(self.admin("submit", "--", "no-such-command-xyz").stdout)
        self.assertEqual([b, c], [a + 1, a + 2])
        self.assertEqual(self.wait_state(a, ["failed"])["exit_code"], 1)
        self.assertEqual(self.wait_state(b, ["failed"])["exit_code"], 3)
        failed = self.wait_state(c, ["failed"])
        self.assertIn("no-such-command-xyz", failed["reason"])

    def test_array_prints_every_id_and_each_task_sees_its_index(self):
        self.home.start("--sim", "2", "--interval", "200ms")
        out = self.gh("submit", "--array", "3", "--name", "sweep", "--", "sh", "-c",
                      "echo $GPUHERD_ARRAY_INDEX of $GPUHERD_ARRAY_SIZE").stdout.split()
        ids = [int(x) for x in out]
        self.assertEqual(ids, [ids[0], ids[0] + 1, ids[0] + 2])
        for i, jid in enumerate(ids):
            j = self.wait_state(jid, ["completed", "failed"])
            self.assertEqual(j["state"], "completed", j)
            self.assertEqual(j["name"], f"sweep[{i}]")
            # The first id is the whole array's (README, "Arrays as units"): its
            # task 0 is ID_0; the other tasks' own ids name them alone.
            self.assertEqual(self.gh("logs", f"{ids[0]}_{i}").stdout, f"{i} of 3\n")
            if i > 0:
                self.assertEqual(self.gh("logs", str(jid)).stdout, f"{i} of 3\n")
        refused = self.gh("submit", "--array", "0", "--", "true", check=False)
        self.assertEqual(refused.returncode, 2, refused.stderr)  # a usage error
        self.assertEqual(len(json.loads(self.gh("ps", "--all", "--json").stdout)), 3)

    def test_ps_table_lists_the_jobs_of_ps_json(self):
        # The table reads the compact listing (?view=table), --json the full one.
        self.home.start("--sim", "1", "--interval", "200ms")
        blocker = self.submit("--gpus", "1", "--name", "blocker", "--", "sleep", "30")
        self.wait_state(blocker, ["running"])
        done = self.submit("--gpus", "0", "--name", "quick", "--", "true")
        self.wait_state(done, ["completed"])
        ids = [int(x) for x in self.gh("submit", "--array", "5", "--gpus", "1", "--priority", "7", "--name", "sweep",
                                       "--", "true").stdout.split()]
        for args in ([], ["--all"], ["--state", "pending"], ["--state", "completed"]):
            listed = json.loads(self.gh("ps", *args, "--json").stdout)
            rows = [line.split() for line in self.gh("ps", *args).stdout.splitlines()[1:]]
            # A task of an array is listed as ARRAY_INDEX, as Slurm writes it.
            self.assertEqual([r[0] for r in rows],
                             [f"{j['array_id']}_{j['array_index']}" if "array_id" in j else str(j["id"]) for j in listed],
                             args)
            for row, j in zip(rows, listed):
                self.assertEqual(row[1:4], [j["name"], j["user"], j["state"]], args)
        table = self.gh("ps").stdout.splitlines()
        self.assertEqual(table[0].split()[:4], ["ID", "NAME", "USER", "STATE"])
        sweep = [line.split() for line in table if line.split()[1].startswith("sweep[")]
        self.assertEqual([r[0] for r in sweep], [f"{ids[0]}_{i}" for i in range(5)])
        self.assertTrue(all(r[3] == "pending" and r[4] == "1" and r[5] == "-" and r[6] == "7" for r in sweep), sweep)
        self.gh("cancel", "--quiet", str(blocker), *map(str, ids))

    def test_fractional_jobs_share_a_gpu(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        ids = [self.submit("--gpus", "0.5", "--gpu-mem", "2GiB", "--", "sleep", "2") for _ in range(2)]
        for jid in ids:
            self.wait_state(jid, ["running"])
        env = self.submit("--gpus", "0.3", "--gpu-mem", "1GiB", "--", "sh", "-c",
                          "echo $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE $GPUHERD_GPU_MEM_LIMIT_MB")
        self.assertIn("waiting", self.job(env)["reason"])
        self.wait_state(env, ["completed"], timeout=20)
        self.assertEqual(self.gh("logs", str(env)).stdout.strip(), "30 1024")

    def test_cancel_hold_release(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        blocker = self.submit("--gpus", "1", "--", "sleep", "30")
        self.wait_state(blocker, ["running"])
        queued = self.submit("--gpus", "1", "--", "true")
        self.assertEqual(self.gh("hold", str(queued)).stdout.strip(), f"job {queued}: held")
        self.assertEqual(self.gh("release", str(queued)).stdout.strip(), f"job {queued}: pending")
        self.gh("cancel", str(blocker))
        self.assertEqual(self.wait_state(blocker, ["cancelled"])["state"], "cancelled")
        self.wait_state(queued, ["completed"])
        again = self.gh("cancel", str(blocker), check=False)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("already cancelled", again.stderr)

    def test_bad_input_is_refused_and_nothing_is_stored(self):
        self.home.start("--sim", "2", "--interval", "200ms")
        cases = [
            (["--gpus", "0.33", "--gpu-mem", "1GiB", "--", "true"], "0.33"),
            (["--gpus", "0.5", "--", "true"], "--gpu-mem is required for a fraction of a GPU (--gpus 0.5)"),
            (["--gpus", "3", "--", "true"], "3"),
            (["--gpus", "1", "--gpu-mem", "900GiB", "--", "true"], "900"),
            (["--gpus", "lots", "--", "true"], "lots"),
            (["--gpus", "1"], "command"),
        ]
        for args, needle in cases:
            proc = self.gh("submit", *args, check=False)
            self.assertNotEqual(proc.returncode, 0, args)
            self.assertIn(needle, proc.stderr, args)
        spec = self.home.file("job.yaml", "command: [true]\ngpus: 1\ncolour: blue\n")
        proc = self.gh("submit", "-f", spec, check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("colour", proc.stderr)
        self.assertEqual(json.loads(self.gh("ps", "--all", "--json").stdout), [])

    def test_users_act_only_on_their_own_jobs(self):
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv to act as another user")
        self.home.start("--sim", "1", "--interval", "200ms")

        def nobody(*args):
            return self.home.run(*args, user=NOBODY, check=False)

        root_job = int(self.admin("submit", "--gpus", "1", "--", "sleep", "30").stdout)  # root's, beside nobody's
        proc = nobody("submit", "--", "sh", "-c", "id -u; echo x > $GPUHERD_CHECKPOINT_DIR/mine")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        own = int(proc.stdout)
        j = self.wait_state(own, ["completed", "failed"])
        self.assertEqual(j["state"], "completed", j)
        self.assertEqual(j["user"], "nobody")
        self.assertEqual(self.gh("logs", str(own)).stdout.strip(), "65534")  # ran as the submitter
        denied = nobody("cancel", str(root_job))
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("belongs to root", denied.stderr)
        self.assertEqual(nobody("drain", "0").returncode, 1)
        self.assertEqual(self.job(root_job)["state"], "running")
        waiting = int(nobody("submit", "--gpus", "1", "--", "true").stdout)
        self.assertEqual(nobody("cancel", str(waiting)).returncode, 0)
        self.assertEqual(self.job(waiting)["state"], "cancelled")
        self.admin("cancel", str(root_job))  # an admin may

    def test_admin_group_members_act_on_any_job(self):
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv to act as another user")
        # nobody's primary group is nogroup (65534); the daemon user's is daemon (1).
        self.home.start("--sim", "2", "--interval", "200ms", "--admin-group", "nogroup")

        def as_user(uid, gid, *args):
            cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", GPUHERD, "--home", self.home.dir]
            return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=30, cwd="/tmp",
                                  env=dict(os.environ, NO_COLOR="1"))

        root_job = int(self.admin("submit", "--gpus", "1", "--", "sleep", "30").stdout)
        self.wait_state(root_job, ["running"])
        outsider = as_user(1, 1, "cancel", str(root_job))
        self.assertNotEqual(outsider.returncode, 0)
        self.assertIn("belongs to root", outsider.stderr)
        self.assertNotEqual(as_user(1, 1, "drain", "1").returncode, 0)
        member = as_user(65534, 65534, "cancel", str(root_job))
        self.assertEqual(member.returncode, 0, member.stderr)
        self.wait_state(root_job, ["cancelled"])
        drained = as_user(65534, 65534, "drain", "1")
        self.assertEqual(drained.returncode, 0, drained.stderr)
        fleet = json.loads(self.gh("gpus", "--json").stdout)
        self.assertTrue(fleet["gpus"][1]["drained"], fleet["gpus"][1])
        self.assertEqual(as_user(65534, 65534, "undrain", "1").returncode, 0)
        fleet = json.loads(self.gh("gpus", "--json").stdout)
        self.assertFalse(fleet["gpus"][1].get("drained", False), fleet["gpus"][1])

    # --- checkpoint and resume ----------------------------------------------

    def test_preempted_job_resumes_and_counts_exactly(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        low = self.submit("--gpus", "1", "--preemptible", "--priority", "-10", "--max-restarts", "3",
                          "--", PYTHON, self.count, "80", "5", "0.05")
        self.wait_state(low, ["running"])
        time.sleep(0.7)
        high = self.submit("--gpus", "1", "--priority", "50", "--", "sleep", "0.5")
        self.wait_state(high, ["completed"], timeout=30)
        j = self.wait_state(low, ["completed"], timeout=60)
        self.assertGreaterEqual(j["attempt"], 2)
        self.assertEqual(self.final_count(low), 80)
        runs = self.runs(low)
        self.assert_never_overlapped(runs)
        self.assertGreater(int(runs[2][4]), 0, "the second run resumed from a checkpoint")
        events = json.loads(self.gh("events", "--json", "--kind", "job.").stdout)
        self.assertTrue(any("preempted for job" in e["message"] for e in events), events)

    def test_urgent_job_stops_each_victim_once_and_starts_on_its_claim(self):
        # Eight checkpointing preemptible jobs fill eight GPUs; an urgent
        # two-GPU job arrives. Victims must not come back onto the GPUs being
        # freed for it (one victim used to start 82 times in 20 s).
        self.home.start("--sim", "8", "--interval", "200ms")
        out = self.gh("submit", "--array", "8", "--gpus", "1", "--priority", "-10", "--preemptible",
                      "--checkpoint-grace", "2s", "--", PYTHON, self.count, "100000", "5", "0.05").stdout
        low = [int(x) for x in out.split()]
        self.assertEqual(len(low), 8)
        for jid in low:
            self.wait_state(jid, ["running"])
        urgent = self.submit("--gpus", "2", "--priority", "50", "--", "sleep", "3")
        j = self.wait_state(urgent, ["running", "completed"], timeout=30)
        time.sleep(4)  # passes while the urgent job runs and after it ends
        attempts = {jid: self.job(jid)["attempt"] for jid in low}
        self.assertTrue(all(a <= 2 for a in attempts.values()), attempts)
        self.assertEqual(sum(1 for a in attempts.values() if a == 2), 2, attempts)
        events = json.loads(self.gh("events", "--json", "--kind", "job.stopping").stdout)
        preempted = [e for e in events if f"preempted for job {urgent}" in e["message"]]
        self.assertEqual(len(preempted), 2, preempted)
        self.assertEqual(len(j["assigned_gpus"]), 2)

    def test_restart_count_agrees_everywhere_and_a_new_attempt_has_no_exit_code(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        jid = self.submit("--gpus", "1", "--max-restarts", "1", "--checkpoint-grace", "2s", "--", "sh", "-c",
                          "echo restart=$GPUHERD_RESTART_COUNT; trap 'exit 7' TERM; sleep 60 & wait")
        self.wait_state(jid, ["running"])
        time.sleep(0.5)
        self.gh("requeue", str(jid))
        j = self.wait_state(jid, ["running"], timeout=30)
        deadline = time.time() + 20
        while j["attempt"] < 2 and time.time() < deadline:
            time.sleep(0.1)
            j = self.job(jid)
        self.assertEqual(j["attempt"], 2, j)
        self.assertEqual(j["restarts"], 1, j)
        self.assertEqual(j["fault_restarts"], 0, j)
        self.assertNotIn("exit_code", j)
        shown = self.gh("show", str(jid)).stdout
        self.assertIn("restarts 1; 0 after faults, of 1 allowed", shown)
        self.assertNotIn("exit code", shown)
        out, deadline = "", time.time() + 10
        while "restart=" not in out and time.time() < deadline:
            time.sleep(0.1)
            with open(os.path.join(self.home.dir, "jobs", str(jid), "2", "stdout")) as f:
                out = f.read()
        self.assertIn("restart=1", out)
        with open(os.path.join(self.home.dir, "jobs", str(jid), "1", "stdout")) as f:
            self.assertEqual(f.read(), "restart=0\n")  # the first attempt's log is kept
        self.assertEqual(self.gh("logs", str(jid)).stdout, "restart=1\n")  # the owner reads the current one
        self.gh("cancel", str(jid))

    def test_a_failed_commit_runs_nothing_of_its_turn(self):
        import sqlite3
        self.home.start("--sim", "1", "--interval", "200ms")
        db = sqlite3.connect(os.path.join(self.home.dir, "state.db"), timeout=10, isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")  # the daemon's commits fail (busy) while this holds
        try:
            refused = self.gh("submit", "--gpus", "1", "--", "touch", os.path.join(self.home.work, "ran"),
                              check=False)
        finally:
            db.execute("ROLLBACK")
            db.close()
        self.assertNotEqual(refused.returncode, 0, refused.stdout)
        time.sleep(2)  # later turns commit; nothing of the failed one may run
        self.assertFalse(os.path.exists(os.path.join(self.home.work, "ran")))
        self.assertEqual(json.loads(self.gh("ps", "--all", "--json").stdout), [])
        ok = self.submit("--gpus", "1", "--", "touch", os.path.join(self.home.work, "ran"))
        self.assertEqual(self.wait_state(ok, ["completed"])["state"], "completed")
        self.assertTrue(os.path.exists(os.path.join(self.home.work, "ran")))  # the job could have made it

    def test_an_operator_drain_survives_a_passing_burnin_whatever_its_reason(self):
        self.home.start("--sim", "2", "--interval", "200ms")
        self.admin("drain", "1", "--reason", "fault: fan noisy")
        out = self.admin("burnin", "--level", "1", "--gpu", "1", "--json", check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        gpus = json.loads(self.gh("gpus", "--json").stdout)["gpus"]
        self.assertTrue(gpus[1].get("drained"), gpus[1])
        self.assertEqual(gpus[1]["drain_origin"], "operator")
        self.assertIn("fan noisy", gpus[1]["drain_reason"])

    def test_xid79_moves_the_job_to_another_gpu(self):
        scenario = os.path.join(self.home.dir, "xid.yaml")
        with open(scenario, "w") as f:
            f.write("seed: 3\ngpus: [{model: a100-40gb, count: 2}]\n"
                    "faults:\n  - {at: 4s, gpu: 0, kind: xid, xid: 79}\n")
        self.home.start("--scenario", scenario, "--interval", "200ms")
        self.admin("drain", "1")  # so that the job lands on GPU 0
        jid = self.submit("--gpus", "1", "--max-restarts", "2", "--", PYTHON, self.count, "60", "5", "0.1")
        self.assertEqual(self.wait_state(jid, ["running"])["assigned_gpus"], [0])
        self.admin("undrain", "1")
        j = self.wait_state(jid, ["completed", "failed"], timeout=60)
        self.assertEqual(j["state"], "completed", j)
        self.assertEqual(j["assigned_gpus"], [1], j)  # where its last attempt ran
        self.assertEqual(j["restarts"], 1)
        self.assertEqual(self.final_count(jid), 60)
        runs = self.runs(jid)
        self.assert_never_overlapped(runs)
        fleet = json.loads(self.gh("gpus", "--json").stdout)
        self.assertTrue(runs[-2][-1].endswith(fleet["gpus"][1]["uuid"]), runs)
        self.assertEqual(fleet["gpus"][0]["state"], "lost")
        self.assertTrue(fleet["gpus"][0]["drained"])
        # A GPU off the bus is not returned to work on an operator's word.
        refused = self.admin("undrain", "0", check=False)
        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertIn("GPU 0 is lost (off the bus or not answering)", refused.stderr)

    def test_daemon_kill_9_readopts_running_job(self):
        self.home.start("--sim", "1", "--interval", "200ms")
        jid = self.submit("--gpus", "1", "--", PYTHON, self.count, "30", "5", "0.1")
        queued = self.submit("--gpus", "1", "--", "true")
        self.wait_state(jid, ["running"])
        time.sleep(0.5)
        self.home.kill9()
        time.sleep(0.5)
        self.home.start("--sim", "1", "--interval", "200ms")
        j = self.wait_state(jid, ["completed", "failed"], timeout=60)
        self.assertEqual(j["state"], "completed", j)
        self.assertEqual(j["attempt"], 1, "re-adopted, not restarted")
        self.assertEqual(self.final_count(jid), 30)
        self.assert_never_overlapped(self.runs(jid))
        self.assertEqual(len(self.runs(jid)), 2)  # one start, one end
        self.wait_state(queued, ["completed"])

    def test_memory_watchdog_stops_only_the_offender(self):
        self.home.start("--sim", "1", "--interval", "200ms", "--memory-grace", "1s")
        hog = self.submit("--gpus", "0.5", "--gpu-mem", "1GiB", "--", "sh", "-c",
                          "echo 3000 > $GPUHERD_SIM_GPU_MEM_FILE; sleep 30")
        neighbour = self.submit("--gpus", "0.5", "--gpu-mem", "1GiB", "--", "sleep", "4")
        j = self.wait_state(hog, ["failed"], timeout=20)
        self.assertIn("over its share", j["reason"])
        self.assertEqual(self.wait_state(neighbour, ["completed"], timeout=20)["state"], "completed")
        events = json.loads(self.gh("events", "--json", "--kind", "job.memory_over").stdout)
        self.assertEqual(len(events), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
