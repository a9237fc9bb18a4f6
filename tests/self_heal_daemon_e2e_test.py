#!/usr/bin/env python3
"""End-to-end tests of self-healing GPUs in the real daemon on simulated
scenarios: a fault quarantines the GPU and moves its job, the daemon
requalifies the card by itself and returns it to service; the same card
failing again and again is retired; an application's XID drains nothing; an
operator's drain survives all of it; a kill -9 mid-requalification carries on;
XID 31 under three jobs on one GPU makes it suspect (new long jobs go
elsewhere while another GPU is free), a fourth quarantines it; an
application's XID alert outlives a daemon restart and resolves at its job's
end.
Real processes, the unix socket and loopback only. The jobs are submitted and
cancelled by nobody (JOB_USER) wherever the test runs as root; the operator's
commands (drain, undrain, health) are root's."""

import json
import os
import shutil
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import JOB_USER, PYTHON, Home  # noqa: E402



class SelfHealDaemonTest(unittest.TestCase):
    def setUp(self):
        self.home = Home(user=JOB_USER)
        self.count = os.path.join(self.home.checkout(), "examples", "jobs", "count_steps.py")

    def tearDown(self):
        self.home.close()

    def gh(self, *args, check=True, timeout=30):
        """The CLI as the operator (the daemon's user: an admin)."""
        return self.home.admin(*args, check=check, timeout=timeout)

    def owner(self, *args, check=True):
        """The CLI as the jobs' user (nobody where the test runs as root)."""
        return self.home.run(*args, check=check)

    def scenario(self, name, faults, count=2):
        path = os.path.join(self.home.dir, name)
        with open(path, "w") as f:
            f.write(f"seed: 3\ngpus: [{{model: a100-40gb, count: {count}}}]\n")
            f.write("faults:\n" + "".join(f"  - {x}\n" for x in faults) if faults else "faults: []\n")
        return path

    def submit(self, *args):
        return int(self.owner("submit", *args).stdout.strip())

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

    def gpus(self):
        return json.loads(self.gh("gpus", "--json").stdout)["gpus"]

    def wait_health(self, gpu, states, timeout=60):
        deadline = time.time() + timeout
        g = None
        while time.time() < deadline:
            g = self.gpus()[gpu]
            if g.get("health_state", {}).get("state") in states:
                return g
            time.sleep(0.2)
        self.fail(f"GPU {gpu} is {g.get('health_state')}, not {states}, after {timeout} s; events: "
                  + json.dumps(self.events("gpu.health"), indent=1))

    def events(self, kind):
        out = json.loads(self.gh("events", "--json", "--kind", kind).stdout)
        return [e for e in out if e["kind"] == kind]

    def path_of(self, gpu_index):
        uuid = self.gpus()[gpu_index]["uuid"]
        return [(e["data"]["from"], e["data"]["to"]) for e in self.events("gpu.health")
                if e.get("gpu_uuid") == uuid and not e["data"].get("shadow")]

    def http_get(self, path):
        with open(os.path.join(self.home.dir, "api-port")) as f:
            port = int(f.read().strip())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.read().decode()

    # --- the loop ---------------------------------------------------------------

    def test_xid48_quarantines_moves_the_job_requalifies_and_returns_the_gpu(self):
        path = self.scenario("xid48.yaml", ["{at: 4s, gpu: 0, kind: xid, xid: 48}"])
        self.home.start("--scenario", path, "--interval", "200ms", "--requalify-after", "2s")
        self.gh("drain", "1", "--reason", "keep the job on GPU 0")
        jid = self.submit("--gpus", "1", "--max-restarts", "2", "--", PYTHON, self.count, "60", "5", "0.1")
        self.assertEqual(self.wait_state(jid, ["running"])["assigned_gpus"], [0])
        self.gh("undrain", "1")

        g = self.wait_health(0, ["quarantined", "requalifying"], timeout=20)
        self.assertEqual(g["health_state"]["rule"] if g["health_state"]["state"] == "quarantined" else "fatal_fault",
                         "fatal_fault")
        # The job moved to GPU 1 from its checkpoint and finished there.
        j = self.wait_state(jid, ["completed", "failed"], timeout=60)
        self.assertEqual(j["state"], "completed", j)
        self.assertEqual(j["assigned_gpus"], [1], j)
        with open(os.path.join(self.home.dir, "checkpoints", str(jid), "count.json")) as f:
            self.assertEqual(json.load(f)["count"], 60)

        # No person involved: the requalification burn-in passes and the GPU is back.
        g = self.wait_health(0, ["in_service"], timeout=120)
        self.assertFalse(g.get("drained", False), g)
        self.assertEqual(g["health_state"]["requalifications"], 1)
        self.assertEqual(self.path_of(0), [("in_service", "quarantined"), ("quarantined", "requalifying"),
                                           ("requalifying", "in_service")])
        quarantine = [e for e in self.events("gpu.health") if e["data"]["to"] == "quarantined"][0]
        self.assertEqual(quarantine["severity"], "critical")
        self.assertEqual(quarantine["data"]["evidence"][0]["xid"], 48)
        self.assertEqual(quarantine["data"]["evidence"][0]["job_id"], str(jid))
        requalifying = [e for e in self.events("gpu.health") if e["data"]["to"] == "requalifying"][0]
        burnin_job = int(requalifying["data"]["evidence"][0]["job_id"])
        self.wait_state(burnin_job, ["completed"], timeout=20)
        runs = json.loads(self.gh("health", "0", "--json").stdout)["runs"]
        self.assertTrue(any(r["job_id"] == burnin_job and r["level"] == 2 for r in runs), runs)
        checks = {c["name"] for r in runs if r["job_id"] == burnin_job for c in r["checks"]}
        self.assertIn("power_transients", checks)
        self.assertIn("peer_clock", checks)

        # /metrics says so beside the DCGM names; the passport is on the API.
        metrics = self.http_get("/metrics")
        self.assertIn('gpuherd_gpu_state{gpu="0"', metrics)
        line = [l for l in metrics.splitlines()
                if l.startswith('gpuherd_gpu_state{gpu="0"') and 'state="in_service"' in l]
        self.assertEqual(line[0].split()[-1], "1", line)
        self.assertIn("DCGM_FI_DEV_XID_ERRORS", metrics)
        promtool = shutil.which("promtool")
        if promtool:
            lint = subprocess.run([promtool, "check", "metrics"], input=metrics, capture_output=True, text=True)
            problems = [l for l in (lint.stdout + lint.stderr).splitlines()
                        if "gpuherd_gpu_state" in l]
            self.assertEqual(problems, [], lint.stdout + lint.stderr)
        passport = json.loads(self.http_get("/v1/gpus/0/passport"))
        self.assertEqual([s["to"] for s in passport["states"]], ["quarantined", "requalifying", "in_service"])
        self.assertEqual(passport["requalifications_passed"], 1)

    def test_the_same_fault_three_times_retires_the_card(self):
        # Level 1 requalifies in about a second, so the card is back before each fault.
        path = self.scenario("thrice.yaml", ["{at: 3s, gpu: 0, kind: xid, xid: 48}",
                                             "{at: 16s, gpu: 0, kind: xid, xid: 48}",
                                             "{at: 29s, gpu: 0, kind: xid, xid: 48}"])
        self.home.start("--scenario", path, "--interval", "200ms", "--requalify-after", "1s",
                        "--requalify-level", "1")
        g = self.wait_health(0, ["retired"], timeout=60)
        self.assertTrue(g["drained"], g)
        self.assertIn("quarantined 3 times", g["health_state"]["reason"])
        self.assertEqual(self.path_of(0), [("in_service", "quarantined"), ("quarantined", "requalifying"),
                                           ("requalifying", "in_service")] * 2 + [("in_service", "retired")])
        # Retired stays retired: no requalification however long it idles.
        time.sleep(3)
        self.assertEqual(self.gpus()[0]["health_state"]["state"], "retired")
        alerts = json.loads(self.gh("alerts", "--json").stdout)
        self.assertTrue(any(a["rule"] == "gpu_retired" and a["severity"] == "critical" for a in alerts), alerts)
        self.assertEqual(self.gpus()[1]["health_state"]["state"], "in_service")
        # healthcheck judges the daemon's GPUs: the retired one is unhealthy.
        hc = self.gh("healthcheck", "--json", check=False)
        self.assertEqual(hc.returncode, 3, hc.stderr)
        verdict = json.loads(hc.stdout)
        self.assertEqual([g["unhealthy"] for g in verdict["gpus"]], [True, False], verdict)
        # Only an operator returns it.
        self.gh("undrain", "0")
        self.wait_health(0, ["in_service"], timeout=10)

    def test_xid31_from_jobs_on_two_gpus_is_the_applications(self):
        # Job a also hits XID 13: one alert per job and XID.
        path = self.scenario("xid31.yaml", ["{at: 5s, gpu: 0, kind: xid, xid: 31}",
                                            "{at: 5s, gpu: 1, kind: xid, xid: 31}",
                                            "{at: 6s, gpu: 0, kind: xid, xid: 13}"])
        self.home.start("--scenario", path, "--interval", "200ms", "--requalify-after", "1s")
        a = self.submit("--gpus", "1", "--name", "a", "--", "sleep", "120")
        b = self.submit("--gpus", "1", "--name", "b", "--", "sleep", "120")
        self.wait_state(a, ["running"])
        self.wait_state(b, ["running"])
        deadline = time.time() + 20
        while time.time() < deadline and len(self.events("job.xid")) < 3:
            time.sleep(0.2)
        told = self.events("job.xid")
        self.assertEqual(sorted((e["data"]["job_id"], e["data"]["xid"]) for e in told),
                         sorted([(str(a), 31), (str(a), 13), (str(b), 31)]), told)
        self.assertTrue(all(e["data"]["owner"] for e in told), told)
        time.sleep(1)
        for g in self.gpus():
            self.assertEqual(g["health_state"]["state"], "in_service", g)
            self.assertFalse(g.get("drained", False), g)
        self.assertEqual(self.job(a)["state"], "running")
        self.assertEqual(self.job(b)["state"], "running")
        judged = self.events("gpu.fault_judged")
        self.assertEqual({e["data"]["rule"] for e in judged}, {"application_xid"}, judged)
        both = sorted([f"job {a} xid 31", f"job {a} xid 13", f"job {b} xid 31"])
        self.assertEqual(self.xid_alerts(), both)

        # A restart keeps the owners' alerts firing while their jobs run
        # (the jobs outlive the daemon); a job's end resolves its own.
        self.home.daemon.terminate()
        self.home.daemon.wait(timeout=20)
        self.home.start("--scenario", self.scenario("calm.yaml", []), "--interval", "200ms")
        self.assertEqual(self.xid_alerts(), both)
        self.owner("cancel", str(b))
        self.wait_state(b, ["cancelled"])
        left = sorted([f"job {a} xid 31", f"job {a} xid 13"])
        deadline = time.time() + 10
        while time.time() < deadline and self.xid_alerts() != left:
            time.sleep(0.2)
        self.assertEqual(self.xid_alerts(), left)
        # The CLI's table: the GPU and what the owner was told.
        table = self.gh("alerts").stdout
        self.assertIn(f"job {a} hit XID 13", table)
        self.owner("cancel", str(a))
        self.wait_state(a, ["cancelled"])
        deadline = time.time() + 10
        while time.time() < deadline and self.xid_alerts():
            time.sleep(0.2)
        self.assertEqual(self.xid_alerts(), [])

    def xid_alerts(self):
        alerts = json.loads(self.gh("alerts", "--json").stdout)
        return sorted(x["subject"] for x in alerts if x["rule"] == "application_xid" and x["state"] == "firing")

    def test_xid31_on_one_gpu_from_three_jobs_makes_it_suspect_long_jobs_avoid_it_then_quarantine(self):
        # XID 31 on GPU 0 four times, 8 s apart, each time under another job.
        path = self.scenario("suspect.yaml", [f"{{at: {t}s, gpu: 0, kind: xid, xid: 31}}" for t in (4, 12, 20, 28)])
        self.home.start("--scenario", path, "--interval", "200ms", "--requalify-after", "0")
        self.gh("drain", "1", "--reason", "keep the jobs on GPU 0")
        jobs = []
        for n in range(1, 4):
            jid = self.submit("--gpus", "1", "--name", f"on-gpu0-{n}", "--", "sleep", "300")
            self.assertEqual(self.wait_state(jid, ["running"])["assigned_gpus"], [0])
            jobs.append(jid)
            deadline = time.time() + 15
            while time.time() < deadline and len(self.events("gpu.fault_judged")) < n:
                time.sleep(0.1)
            self.owner("cancel", str(jid))
            self.wait_state(jid, ["cancelled"])
        judged = self.events("gpu.fault_judged")
        self.assertEqual(sorted(e["data"]["job_id"] for e in judged), sorted(str(j) for j in jobs), judged)
        g = self.wait_health(0, ["suspect"], timeout=5)
        self.assertFalse(g.get("drained", False), g)
        self.assertEqual(self.path_of(0), [("in_service", "suspect")])

        # Suspect: a long job (no time limit) goes to the other GPU while it is
        # free; a short one (10 min, under 1 h) may use the suspect GPU.
        self.gh("undrain", "1")
        long_job = self.submit("--gpus", "1", "--name", "long", "--", "sleep", "300")
        self.assertEqual(self.wait_state(long_job, ["running"])["assigned_gpus"], [1])
        short = self.submit("--gpus", "1", "--time-limit", "10m", "--name", "short", "--", "sleep", "300")
        self.assertEqual(self.wait_state(short, ["running"])["assigned_gpus"], [0])

        # The fourth job to hit it: quarantined, drained, and no longer suspect.
        g = self.wait_health(0, ["quarantined"], timeout=20)
        self.assertTrue(g["drained"], g)
        self.assertEqual(self.path_of(0), [("in_service", "suspect"), ("suspect", "quarantined")])
        self.assertEqual(self.job(long_job)["state"], "running")
        for jid in (long_job, short):
            self.owner("cancel", str(jid), check=False)

    def test_an_operators_drain_survives_quarantine_and_requalification(self):
        path = self.scenario("op.yaml", ["{at: 4s, gpu: 0, kind: xid, xid: 48}"])
        self.home.start("--scenario", path, "--interval", "200ms", "--requalify-after", "1s",
                        "--requalify-level", "1")
        reason = "fault: XID 48 (looks automatic, is a person's)"
        self.gh("drain", "0", "--reason", reason)
        self.wait_health(0, ["quarantined", "requalifying"], timeout=20)
        deadline = time.time() + 60
        while time.time() < deadline and len(self.path_of(0)) < 3:
            time.sleep(0.2)
        self.assertEqual(self.path_of(0)[-1], ("requalifying", "in_service"))
        g = self.gpus()[0]
        self.assertTrue(g["drained"], g)
        self.assertTrue(g["drain_reason"].startswith(reason), g)  # the operator is named after it
        kept = self.events("gpu.requalify")
        self.assertTrue(any(e["data"].get("drain_kept") for e in kept), kept)
        # Still the operator's after a restart.
        self.home.daemon.terminate()
        self.home.daemon.wait(timeout=20)
        self.home.start("--scenario", self.scenario("calm.yaml", []), "--interval", "200ms")
        g = self.gpus()[0]
        self.assertTrue(g["drained"], g)
        self.assertTrue(g["drain_reason"].startswith(reason), g)  # the operator is named after it
        self.assertEqual(g["health_state"]["state"], "in_service", g)

    def test_kill_9_mid_requalification_carries_on(self):
        path = self.scenario("kill.yaml", ["{at: 3s, gpu: 0, kind: xid, xid: 48}"])
        self.home.start("--scenario", path, "--interval", "200ms", "--requalify-after", "1s")
        g = self.wait_health(0, ["requalifying"], timeout=30)
        burnin_job = g["health_state"]["requalify_job"]
        self.wait_state(burnin_job, ["running"], timeout=20)
        time.sleep(2)
        self.home.kill9()
        # The card is what it is: the restarted daemon reads the same GPUs
        # (same seed) without the fault striking again.
        calm = self.scenario("calm.yaml", [])
        self.home.start("--scenario", calm, "--interval", "200ms", "--requalify-after", "1s")
        g = self.gpus()[0]
        self.assertEqual(g["health_state"]["state"], "requalifying", g)
        self.assertEqual(g["health_state"]["requalify_job"], burnin_job)
        g = self.wait_health(0, ["in_service"], timeout=120)
        self.assertFalse(g.get("drained", False), g)
        self.wait_state(burnin_job, ["completed"], timeout=20)
        self.assertEqual(self.path_of(0), [("in_service", "quarantined"), ("quarantined", "requalifying"),
                                           ("requalifying", "in_service")])


if __name__ == "__main__":
    unittest.main()
