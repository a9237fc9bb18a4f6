#!/usr/bin/env python3
"""End-to-end tests of pipelines on a real Slurm: a private single-node cluster on
localhost (munged, slurmctld and slurmd started by bench/queue/slurm_up.sh, 8 GPUs as
gres on placeholder device files), the gpuherd daemon on a simulated fleet with the
Slurm backend, the toy trainer as the steps' command. A sweep with a failure that is
retried from its checkpoint, a requeue in Slurm that resumes from the checkpoint, and a
cancel that leaves Slurm's queue empty.

Needs root and the Debian packages slurm-wlm and munge (scripts/setup.sh installs them).
Where Slurm cannot start, every test is skipped with exit code 77 and says why."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import Home  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TRAINERS = os.path.join(ROOT, "examples", "trainers")
SLURM_UP = os.path.join(ROOT, "bench", "queue", "slurm_up.sh")
SLURM_DOWN = os.path.join(ROOT, "bench", "queue", "slurm_down.sh")
SKIP = 77

SWEEP = """\
name: slurm-sweep
backend: slurm
params: {fail: 1}
defaults: {gpus: 1, retries: 1, cpus: 1}
steps:
  train:
    matrix: {lr: [0.1, 0.03], seed: [1, 2]}
    run:
      - sh
      - -c
      - >-
        if [ ${{ point.index }} = ${{ params.fail }} ]; then extra="--fail-at 40"; else extra=""; fi;
        exec python3 toy_trainer.py --lr ${{ matrix.lr }} --seed ${{ matrix.seed }}
        --steps 60 --out ${{ workspace }} $extra
  report:
    needs: [train]
    gpus: 0.1
    gpu_mem: 512MiB
    run: [sh, -c, 'ls ${{ run.workspace }}/train > ${{ workspace }}/listing']
"""

# Writes a checkpoint file, then waits to be requeued; a resumed attempt records what it
# was told and finishes.
REQUEUE = """\
name: slurm-requeue
backend: slurm
steps:
  long:
    gpus: 1
    run:
      - sh
      - -c
      - >-
        echo "restart=$GPUHERD_RESTART_COUNT resume=${GPUHERD_RESUME:-0} job=$GPUHERD_JOB_ID" >> ${{ workspace }}/seen;
        if [ -f $GPUHERD_CHECKPOINT_DIR/ckpt ]; then exit 0; fi;
        echo 1 > $GPUHERD_CHECKPOINT_DIR/ckpt; echo '{"step": 1, "loss": 0.5}' >> $GPUHERD_METRICS_FILE;
        sleep 120
"""

CANCEL = """\
name: slurm-cancel
backend: slurm
steps:
  wait:
    matrix: {i: [1, 2, 3]}
    gpus: 1
    run: [sleep, '300']
"""


def free_port_base():
    """The first of 17817, 17917, ... whose five ports (slurmctld's four and slurmd's)
    are free on loopback, so that two runs of the tests do not meet."""
    for base in range(17817, 27817, 100):
        try:
            for port in range(base, base + 5):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    return 17817


def slurm_unavailable():
    if os.geteuid() != 0:
        return "not root: slurmd must run as root to start the jobs"
    for program in ("munged", "slurmctld", "slurmd", "sbatch", "squeue"):
        if not shutil.which(program):
            return f"'{program}' not found: install slurm-wlm and munge (scripts/setup.sh)"
    return None


class SlurmPipelineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.slurm_dir = tempfile.mkdtemp(prefix="gpuherd-slurm-")
        env = dict(os.environ, QBENCH_SLURM_PORT=str(free_port_base()))
        up = subprocess.run([SLURM_UP, cls.slurm_dir], env=env, capture_output=True, text=True, timeout=120)
        if up.returncode != 0:
            subprocess.run([SLURM_DOWN, cls.slurm_dir], capture_output=True)
            shutil.rmtree(cls.slurm_dir, ignore_errors=True)
            raise SlurmCannotStart(up.stderr.strip().splitlines()[-5:])
        os.environ["SLURM_CONF"] = os.path.join(cls.slurm_dir, "slurm.conf")
        cls.home = Home()
        cls.shared = os.path.join(cls.home.dir, "slurm-shared")
        try:
            cls.home.start("--sim", "4", "--interval", "200ms", "--slurm-shared-dir", cls.shared,
                           "--slurm-poll", "300ms")
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.home.close()
        subprocess.run([SLURM_DOWN, cls.slurm_dir], capture_output=True, timeout=120)

    def api(self, method, path, body=None, expect=200):
        with open(os.path.join(self.home.dir, "api-port")) as f:
            port = int(f.read())
        with open(os.path.join(self.home.dir, "api-token")) as f:
            token = f.read().strip()
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        if expect is not None:
            self.assertEqual(status, expect, f"{method} {path}: {text}")
        return json.loads(text) if text else {}

    def run_pipeline(self, yaml):
        body = {"yaml": yaml, "source": "test.yaml", "base_dir": TRAINERS}
        return self.api("POST", "/v1/pipelines", body, expect=201)["id"]

    def show(self, run_id):
        return self.api("GET", f"/v1/pipelines/{run_id}")

    def wait(self, run_id, done, what, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            run = self.show(run_id)
            if done(run):
                return run
            time.sleep(0.3)
        self.fail(f"pipeline {run_id}: {what} not reached in {timeout} s: {json.dumps(self.show(run_id))[:2000]}")

    def squeue(self, *args):
        out = subprocess.run(["squeue", "-h", "-o", "%i|%T|%j", *args], capture_output=True, text=True,
                             check=True).stdout
        return [line.split("|") for line in out.splitlines() if line.strip()]

    def job_output(self, slurm_id):
        with open(os.path.join(self.shared, f"job-{slurm_id}.out")) as f:
            return f.read()

    def test_sweep_with_a_failure_resumes_from_its_checkpoint(self):
        run_id = self.run_pipeline(SWEEP)
        run = self.wait(run_id, lambda r: r["state"] != "running", "the end")
        self.assertEqual(run["state"], "completed", json.dumps(run)[:2000])
        self.assertEqual(run["backend"], "slurm")
        trains = [n for n in run["nodes"] if n["step"] == "train"]
        self.assertEqual(len(trains), 4)
        failed_once = trains[1]
        self.assertEqual(failed_once["attempts"], 2)
        self.assertTrue(all(n["attempts"] == 1 for i, n in enumerate(trains) if i != 1))
        for n in run["nodes"]:
            self.assertEqual(n["state"], "completed", n)
            self.assertIsNotNone(n["slurm_job_id"], n)
        # The retry was a new Slurm job told to resume, and it did.
        out = self.job_output(failed_once["slurm_job_id"])
        self.assertIn("resuming at step 25", out)
        self.assertIn("GPUHERD_RESUME=1", out)
        # Its result is the one an uninterrupted run gets.
        m = dict(failed_once["matrix"])
        with tempfile.TemporaryDirectory() as clean:
            subprocess.run([sys.executable, os.path.join(TRAINERS, "toy_trainer.py"), "--lr", m["lr"], "--seed",
                            m["seed"], "--steps", "60", "--out", clean],
                           env={k: v for k, v in os.environ.items() if not k.startswith("GPUHERD_")},
                           check=True, capture_output=True, timeout=60)
            with open(os.path.join(clean, "result.json")) as f:
                expected = json.load(f)
        with open(os.path.join(run["run_dir"], failed_once["key"], "result.json")) as f:
            self.assertEqual(json.load(f), expected)
        # Metrics came in from the shared folder, both attempts of the failed point.
        metrics = self.api("GET", f"/v1/pipelines/{run_id}/metrics?node={failed_once['id']}")["metrics"]
        self.assertEqual({m["attempt"] for m in metrics}, {1, 2})
        self.assertEqual(max(m["step"] for m in metrics), 60)
        with open(os.path.join(run["run_dir"], "report", "listing")) as f:
            self.assertEqual(len(f.read().split()), 4)

    def test_a_requeue_in_slurm_resumes_from_the_checkpoint(self):
        run_id = self.run_pipeline(REQUEUE)
        run = self.wait(run_id, lambda r: r["nodes"][0]["state"] == "running", "a running job")
        node = run["nodes"][0]
        seen = os.path.join(run["run_dir"], node["key"], "seen")
        deadline = time.time() + 30
        while not os.path.exists(seen) and time.time() < deadline:
            time.sleep(0.2)
        slurm_id = str(node["slurm_job_id"])
        # As after a node failure: Slurm puts the job back in its queue. It holds a
        # requeued job back for two minutes; the test does not wait for that.
        subprocess.run(["scontrol", "requeue", slurm_id], check=True)
        # The begin time can be moved once the old attempt is cleaned up (the
        # reason turns to BeginTime); a job started while slurmd still kills its
        # old step fails to launch.
        deadline = time.time() + 30
        while time.time() < deadline:
            out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%T|%r", "-j", slurm_id], capture_output=True,
                                 text=True).stdout.strip()
            if out == "PENDING|BeginTime":
                time.sleep(1)
                subprocess.run(["scontrol", "update", f"jobid={slurm_id}", "starttime=now"], check=True)
                break
            time.sleep(0.2)
        run = self.wait(run_id, lambda r: r["state"] != "running", "the end")
        self.assertEqual(run["state"], "completed", json.dumps(run)[:2000])
        node = run["nodes"][0]
        self.assertEqual(node["attempts"], 1)  # the same job, not a retry
        with open(seen) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines, [f"restart=0 resume=0 job={slurm_id}", f"restart=1 resume=1 job={slurm_id}"])
        events = self.api("GET", "/v1/events?limit=1000")["events"]
        del events  # the daemon answered throughout

    def test_cancel_leaves_slurm_queue_empty(self):
        run_id = self.run_pipeline(CANCEL)
        # Two of the three run (the node has 2 CPUs), the third waits in Slurm.
        self.wait(run_id, lambda r: sum(n["state"] == "running" for n in r["nodes"]) >= 1, "a running job")
        ours = [j for j in self.squeue() if j[2].startswith("slurm-cancel/")]
        self.assertEqual(len(ours), 3, ours)
        self.assertEqual(self.api("POST", f"/v1/pipelines/{run_id}/cancel")["state"], "cancelled")
        run = self.wait(run_id, lambda r: all(n["state"] == "cancelled" for n in r["nodes"]), "every node cancelled")
        self.assertEqual(run["state"], "cancelled")
        deadline = time.time() + 30
        while time.time() < deadline:
            left = [j for j in self.squeue("-t", "pending,running,completing") if j[2].startswith("slurm-cancel/")]
            if not left:
                break
            time.sleep(0.3)
        self.assertEqual(left, [])


    def node_state(self):
        out = subprocess.run(["scontrol", "show", "node", "localhost"], capture_output=True, text=True,
                             check=True).stdout
        state = next(w.split("=", 1)[1] for w in out.split() if w.startswith("State="))
        reason = next((line.strip()[len("Reason="):] for line in out.splitlines()
                       if line.strip().startswith("Reason=")), "")
        return state, reason

    def healthcheck(self, *fleet):
        started = time.monotonic()
        done = subprocess.run([os.environ["GPUHERD_BIN"], "--home", self.home.dir, "healthcheck", "--slurm",
                               "--node", "localhost", "--json", *fleet], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertLess(time.monotonic() - started, 10)  # well inside Slurm's 60 s
        return json.loads(done.stdout)

    def test_healthcheck_drains_a_sick_node_and_resumes_only_its_own_drain(self):
        faults = os.path.join(ROOT, "examples", "scenarios", "burnin-faults.yaml")
        try:
            self.assertEqual(self.healthcheck("--sim", "4")["action"], "none")
            self.assertNotIn("DRAIN", self.node_state()[0])
            # GPU 7 of the scenario has a double-bit ECC error: level 1 fails it.
            result = self.healthcheck("--scenario", faults)
            self.assertEqual(result["action"], "drain")
            state, reason = self.node_state()
            self.assertIn("DRAIN", state)
            self.assertTrue(reason.startswith("gpuherd: GPU 7 unhealthy (ecc_dbe"), reason)
            self.assertEqual(self.healthcheck("--scenario", faults)["action"], "none")  # already drained
            # Well again: gpuherd resumes its own drain.
            self.assertEqual(self.healthcheck("--sim", "4")["action"], "resume")
            self.assertNotIn("DRAIN", self.node_state()[0])
            # Someone else's drain stays, whatever the GPUs say.
            subprocess.run(["scontrol", "update", "nodename=localhost", "state=drain", "reason=new PSU, ticket 7"],
                           check=True)
            self.assertEqual(self.healthcheck("--sim", "4")["action"], "none")
            self.assertEqual(self.healthcheck("--scenario", faults)["action"], "none")
            state, reason = self.node_state()
            self.assertIn("DRAIN", state)
            self.assertEqual(reason.split(" [")[0], "new PSU, ticket 7")
        finally:
            subprocess.run(["scontrol", "update", "nodename=localhost", "state=resume"], capture_output=True)


class SlurmCannotStart(unittest.SkipTest):
    def __init__(self, lines):
        super().__init__("Slurm cannot start here: " + " / ".join(lines))


def main():
    why = slurm_unavailable()
    if why:
        print(f"SKIPPED: the Slurm end-to-end tests need a Slurm: {why}", file=sys.stderr)
        return SKIP
    result = unittest.main(exit=False, verbosity=2).result
    if result.skipped and not result.testsRun - len(result.skipped):
        print("SKIPPED: " + result.skipped[0][1], file=sys.stderr)
        return SKIP
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
