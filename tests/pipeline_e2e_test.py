#!/usr/bin/env python3
"""End-to-end tests of pipelines on the queue: the real daemon on a simulated
fleet, the toy trainer as real job processes, the HTTP API over the unix socket
as the jobs' user (nobody wherever the test runs as root), and over loopback
TCP with the API token (as the daemon's user) in one test."""

import json
import os
import sys
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import JOB_USER, Home  # noqa: E402


# Twelve points; `fail` names the point indexes that fail once before step 40
# (the trainer checkpoints every 25 steps, so they resume from step 25).
SWEEP = """\
name: sweep12
params: {steps: 80, fail: none}
defaults: {gpus: 0.1, gpu_mem: 512MiB, retries: 1}
steps:
  train:
    matrix: {lr: [0.3, 0.1, 0.03, 0.01], seed: [1, 2, 3]}
    run:
      - sh
      - -c
      - >-
        case ",${{ params.fail }}," in *,${{ point.index }},*) extra="--fail-at 40";; *) extra="";; esac;
        exec python3 toy_trainer.py --lr ${{ matrix.lr }} --seed ${{ matrix.seed }}
        --steps ${{ params.steps }} --out ${{ workspace }} $extra
"""

# A job that logs a NaN loss for five steps, then finite values again; it
# counts the SIGUSR1s it gets (the "checkpoint" action).
NAN_JOB = r"""
import json, os, signal, time
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
with open(os.environ["GPUHERD_METRICS_FILE"], "a") as f:
    for step in range(1, 31):
        loss = "NaN" if 10 <= step < 15 else str(1.0 / step)
        f.write('{"step": %d, "loss": %s}\n' % (step, loss))
        f.flush()
        time.sleep(0.1)
time.sleep(0.5)
with open(os.path.join(os.environ["GPUHERD_WORKSPACE"], "usr1"), "w") as out:
    out.write(str(len(got)))
"""


class PipelineTest(unittest.TestCase):
    def setUp(self):
        self.home = Home(user=JOB_USER)
        self.trainers = os.path.join(self.home.checkout(), "examples", "trainers")  # the user's copy
        self.by_token = False  # True: over TCP with the API token, as the daemon's user

    def tearDown(self):
        if self.home.daemon:
            for j in self.api("GET", "/v1/jobs")["jobs"]:
                self.api("POST", f"/v1/jobs/{j['id']}/cancel", expect=None)
            deadline = time.time() + 30
            while self.api("GET", "/v1/jobs")["jobs"] and time.time() < deadline:
                time.sleep(0.2)
        self.home.close()

    def start(self):
        self.home.start("--sim", "4", "--interval", "200ms")

    def api(self, method, path, body=None, expect=200):
        """A request over the unix socket as the jobs' user (the owner of what it
        creates), or with the API token over TCP where the test says so."""
        data = json.dumps(body).encode() if body is not None else None
        if not self.by_token:
            status, _, raw = self.home.request(method, path, data or b"", {"Content-Type": "application/json"},
                                               timeout=30)
            text = raw.decode()
        else:
            with open(os.path.join(self.home.dir, "api-port")) as f:
                port = int(f.read())
            with open(os.path.join(self.home.dir, "api-token")) as f:
                token = f.read().strip()
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    status, text = r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                status, text = e.code, e.read().decode()
        if expect is not None:
            self.assertEqual(status, expect, f"{method} {path}: {text}")
        return json.loads(text) if text else {}

    def run_pipeline(self, yaml, params=None, base_dir=None):
        body = {"yaml": yaml, "source": "test.yaml", "base_dir": base_dir or self.trainers, "params": params or {}}
        return self.api("POST", "/v1/pipelines", body, expect=201)["id"]

    def show(self, run_id):
        return self.api("GET", f"/v1/pipelines/{run_id}")

    def wait(self, run_id, states, timeout=240):
        deadline = time.time() + timeout
        while time.time() < deadline:
            run = self.show(run_id)
            if run["state"] in states:
                return run
            time.sleep(0.3)
        self.fail(f"pipeline {run_id} is {self.show(run_id)['state']}, not {states}, after {timeout} s")

    def node(self, run, node_id):
        return next(n for n in run["nodes"] if n["id"] == node_id)

    def results(self, run):
        out = {}
        for n in run["nodes"]:
            with open(os.path.join(run["run_dir"], n["key"], "result.json")) as f:
                out[n["id"]] = json.load(f)
        return out

    def events(self, kind):
        return self.api("GET", f"/v1/events?kind={kind}&limit=1000")["events"]

    def test_sweep_with_two_failures_finishes_with_the_results_of_a_run_without_them(self):
        self.start()
        clean = self.run_pipeline(SWEEP)
        faulty = self.run_pipeline(SWEEP, {"fail": "3,7"})
        clean_run = self.wait(clean, ["completed", "failed"])
        faulty_run = self.wait(faulty, ["completed", "failed"])
        self.assertEqual(clean_run["state"], "completed", clean_run)
        self.assertEqual(faulty_run["state"], "completed", faulty_run)
        self.assertEqual(len(faulty_run["nodes"]), 12)
        attempts = {n["key"]: n["attempts"] for n in faulty_run["nodes"]}
        self.assertEqual(attempts.pop("train/3"), 2)
        self.assertEqual(attempts.pop("train/7"), 2)
        self.assertEqual(set(attempts.values()), {1})
        # Point by point, the weights and metrics are bit-identical.
        clean_results, faulty_results = self.results(clean_run), self.results(faulty_run)
        self.assertEqual(faulty_results, clean_results)
        self.assertEqual(len({r["weights_sha256"] for r in clean_results.values()}), 12)

        failed = self.node(faulty_run, "train[lr=0.1,seed=1]")  # point 3
        node = urllib.parse.quote(failed["id"], safe="")
        metrics = self.api("GET", f"/v1/pipelines/{faulty}/metrics?node={node}")["metrics"]
        self.assertEqual([m["step"] for m in metrics], list(range(1, 81)))  # repeated steps kept once
        by_step = {m["step"]: m for m in metrics}
        self.assertEqual(by_step[20]["attempt"], 1)
        self.assertEqual(by_step[30]["attempt"], 2)  # redone after resuming from step 25
        self.assertEqual(failed["latest_metrics"]["step"], 80)
        self.assertAlmostEqual(failed["best"]["acc"], max(m["values"]["acc"] for m in metrics))
        self.assertAlmostEqual(failed["latest_metrics"]["loss"], by_step[80]["values"]["loss"])
        listing = self.api("GET", "/v1/pipelines?all=1")["pipelines"]
        self.assertEqual([p["id"] for p in listing], [faulty, clean])
        self.assertEqual(listing[0]["nodes"]["completed"], 12)

    def test_nan_check_fires_once_and_asks_for_one_checkpoint(self):
        self.start()
        self.home.file("nan_job.py", NAN_JOB)
        yaml = ("name: nan\ndefaults: {gpus: 0}\nanomalies: {nan: checkpoint}\n"
                "steps:\n  train: {run: python3 nan_job.py}\n")
        run_id = self.run_pipeline(yaml, base_dir=self.home.work)
        run = self.wait(run_id, ["completed", "failed"], timeout=60)
        self.assertEqual(run["state"], "completed", run)
        with open(os.path.join(run["run_dir"], "train", "usr1")) as f:
            self.assertEqual(f.read(), "1")
        anomalies = self.events("pipeline.anomaly")
        self.assertEqual(len(anomalies), 1, anomalies)
        self.assertIn("at step 10", anomalies[0]["message"])
        self.assertIn("action: checkpoint", anomalies[0]["message"])
        metrics = self.api("GET", f"/v1/pipelines/{run_id}/metrics")["metrics"]
        self.assertEqual(len(metrics), 30)
        self.assertIsNone(metrics[9]["values"]["loss"])  # NaN is stored as null

    def test_cancel_then_retry_of_failed_nodes(self):
        self.start()
        marker = os.path.join(self.home.work, "ready")
        yaml = ("name: twice\ndefaults: {gpus: 0}\nsteps:\n"
                "  check: {run: [sh, -c, 'test -e ready']}\n"
                "  after: {needs: [check], run: 'true'}\n"
                "  slow: {run: 'sleep 60', gpus: 1}\n")
        run_id = self.run_pipeline(yaml, base_dir=self.home.work)
        run = self.wait(run_id, ["running"])
        deadline = time.time() + 30
        while self.node(self.show(run_id), "slow")["state"] != "running" and time.time() < deadline:
            time.sleep(0.2)
        while self.node(self.show(run_id), "check")["state"] != "failed" and time.time() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.node(self.show(run_id), "after")["state"], "skipped")
        self.assertEqual(self.api("POST", f"/v1/pipelines/{run_id}/cancel")["state"], "cancelled")
        run = self.wait(run_id, ["cancelled"])
        deadline = time.time() + 30
        while self.node(self.show(run_id), "slow")["state"] != "cancelled" and time.time() < deadline:
            time.sleep(0.2)
        run = self.show(run_id)
        self.assertEqual(self.node(run, "slow")["state"], "cancelled")
        job = self.api("GET", f"/v1/jobs/{self.node(run, 'slow')['job_id']}")
        self.assertEqual(job["state"], "cancelled")
        self.assertEqual(job["user"], self.home.user_name)  # the run's jobs are its submitter's

        open(marker, "w").close()
        self.assertEqual(self.api("POST", f"/v1/pipelines/{run_id}/retry")["state"], "running")
        run = self.wait(run_id, ["completed", "failed", "cancelled"])
        self.assertEqual(self.node(run, "check")["state"], "completed")
        self.assertEqual(self.node(run, "check")["attempts"], 2)
        self.assertEqual(self.node(run, "after")["state"], "completed")
        self.assertEqual(self.node(run, "slow")["state"], "cancelled")  # a person's cancel is final
        self.assertEqual(run["state"], "cancelled")

    def test_daemon_killed_mid_pipeline_finishes_after_a_restart(self):
        # Over TCP with the API token: the run and its jobs are the daemon's own
        # user's (root's in CI), who runs jobs too; the other tests' are nobody's.
        self.by_token = True
        self.start()
        # Half a GPU each: 8 of the 12 points at a time, so that some have
        # completed while others wait or run (at a tenth of a GPU all 12 ran at
        # once and could end between two looks, and the kill came 120 s later).
        yaml = SWEEP.replace("--steps ${{ params.steps }}", "--steps ${{ params.steps }} --step-seconds 0.03")
        yaml = yaml.replace("defaults: {gpus: 0.1,", "defaults: {gpus: 0.5,")
        run_id = self.run_pipeline(yaml, {"steps": "60"})
        deadline = time.time() + 120
        while time.time() < deadline:
            run = self.show(run_id)
            states = [n["state"] for n in run["nodes"]]
            if "completed" in states and ("running" in states or "pending" in states):
                break
            time.sleep(0.2)
        self.home.kill9()
        self.start()
        run = self.wait(run_id, ["completed", "failed"])
        self.assertEqual(run["state"], "completed", run)
        for n in run["nodes"]:
            self.assertEqual(n["state"], "completed", n)
        for result in self.results(run).values():
            self.assertEqual(result["steps"], 60)


if __name__ == "__main__":
    unittest.main()
