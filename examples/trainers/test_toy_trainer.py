#!/usr/bin/env python3
"""Runs toy_trainer.py as a real process, the way gpuherd runs it (environment variables,
signals, restarts), and checks that every interrupted-and-resumed run ends with the same
result.json and the same metrics as a run that was never interrupted."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

TRAINER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toy_trainer.py")
STEPS = 120
ARGS = ["--lr", "0.5", "--steps", str(STEPS), "--seed", "7", "--checkpoint-every", "20"]


class ToyTrainerTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="toy_trainer_test.")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def job_env(self, name, restart=None):
        """The environment gpuherd gives attempt `restart` (None: the first) of job `name`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHERD_")}
        env["GPUHERD_CHECKPOINT_DIR"] = os.path.join(self.tmp, name, "ckpt")
        env["GPUHERD_METRICS_FILE"] = os.path.join(self.tmp, name, "metrics.jsonl")
        if restart is not None:
            env["GPUHERD_RESTART_COUNT"] = str(restart)
            env["GPUHERD_RESUME"] = "1"
        os.makedirs(os.path.join(self.tmp, name), exist_ok=True)
        return env

    def start(self, name, extra=(), restart=None):
        return subprocess.Popen([sys.executable, TRAINER, *ARGS, *extra], env=self.job_env(name, restart),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run_trainer(self, name, extra=(), restart=None, expect=0):
        p = self.start(name, extra, restart)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, expect, f"stdout:\n{out}\nstderr:\n{err}")
        return out, err

    def result(self, name):
        with open(os.path.join(self.tmp, name, "ckpt", "result.json")) as f:
            return json.load(f)

    def metric_lines(self, name):
        with open(os.path.join(self.tmp, name, "metrics.jsonl")) as f:
            return [json.loads(line) for line in f]

    def wait_for_step(self, name, proc, step):
        """Waits until the job has logged `step`; fails if it ends first."""
        path = os.path.join(self.tmp, name, "metrics.jsonl")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.assertIsNone(proc.poll(), "the trainer ended before it could be interrupted")
            if os.path.exists(path):
                with open(path) as f:
                    if sum(1 for _ in f) >= step:
                        return
            time.sleep(0.01)
        self.fail(f"step {step} was never logged")

    def reference(self):
        """An uninterrupted run: its result and its per-step metrics without the times."""
        self.run_trainer("reference")
        return self.result("reference"), self.without_time(self.metric_lines("reference"))

    @staticmethod
    def without_time(lines):
        return [{k: v for k, v in line.items() if k != "time"} for line in lines]

    def assert_same_metrics(self, name, reference_lines, expect_duplicates):
        """The last line logged for each step equals the reference's; steps repeated after a
        restart from an older checkpoint must repeat the same values."""
        lines = self.without_time(self.metric_lines(name))
        by_step = {}
        for line in lines:
            if line["step"] in by_step:
                self.assertEqual(by_step[line["step"]], line, f"step {line['step']} differed on rerun")
            by_step[line["step"]] = line
        self.assertEqual([by_step[s] for s in sorted(by_step)], reference_lines)
        if expect_duplicates:
            self.assertGreater(len(lines), len(reference_lines))
        else:
            self.assertEqual(lines, reference_lines)

    def test_uninterrupted_run_logs_every_step_and_writes_result(self):
        result, lines = self.reference()
        self.assertEqual([line["step"] for line in lines], list(range(1, STEPS + 1)))
        for line in self.metric_lines("reference"):
            self.assertEqual(set(line), {"time", "step", "loss", "acc"})
            self.assertGreater(line["time"], 1e9)
        self.assertEqual(result["steps"], STEPS)
        self.assertEqual(result["lr"], 0.5)
        self.assertLessEqual(result["final_acc"], result["best_acc"])
        self.assertGreater(result["best_acc"], lines[0]["acc"], "training did not improve the accuracy")
        self.assertLess(result["final_loss"], lines[0]["loss"], "training did not reduce the loss")
        self.assertRegex(result["weights_sha256"], "^[0-9a-f]{64}$")

    def test_same_seed_repeats_and_other_seed_differs(self):
        result, _ = self.reference()
        self.run_trainer("again")
        self.assertEqual(self.result("again"), result)
        p = subprocess.run([sys.executable, TRAINER, "--lr", "0.5", "--steps", str(STEPS), "--seed", "8"],
                           env=self.job_env("other"), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotEqual(self.result("other")["weights_sha256"], result["weights_sha256"])

    def test_sigterm_checkpoints_and_resume_is_exact(self):
        result, lines = self.reference()
        p = self.start("term", ["--step-seconds", "0.01"])
        self.wait_for_step("term", p, 33)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 143, err)
        self.assertIn("stopped at step", out)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "term", "ckpt", "result.json")))
        out, _ = self.run_trainer("term", restart=1)
        self.assertIn("resuming at step", out)
        self.assertEqual(self.result("term"), result)
        # SIGTERM checkpoints the step it stopped at, so no step runs twice.
        self.assert_same_metrics("term", lines, expect_duplicates=False)

    def test_sigkill_resumes_from_last_periodic_checkpoint(self):
        result, lines = self.reference()
        p = self.start("kill", ["--step-seconds", "0.01"])
        self.wait_for_step("kill", p, 50)
        p.kill()
        p.communicate(timeout=60)
        out, _ = self.run_trainer("kill", restart=1)
        self.assertIn("resuming at step", out)
        self.assertEqual(self.result("kill"), result)
        self.assert_same_metrics("kill", lines, expect_duplicates=True)

    def test_sigusr1_checkpoints_and_goes_on(self):
        result, lines = self.reference()
        # Periodic checkpoints only at the end, so the file can only come from SIGUSR1.
        p = self.start("usr1", ["--step-seconds", "0.01", "--checkpoint-every", str(STEPS)])
        self.wait_for_step("usr1", p, 10)
        ckpt = os.path.join(self.tmp, "usr1", "ckpt", "checkpoint.pkl")
        self.assertFalse(os.path.exists(ckpt))
        p.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while not os.path.exists(ckpt) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertIsNone(p.poll(), "SIGUSR1 must not stop the job")
        self.assertTrue(os.path.exists(ckpt), "no checkpoint after SIGUSR1")
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(self.result("usr1"), result)
        self.assert_same_metrics("usr1", lines, expect_duplicates=False)

    def test_injected_failure_happens_once_then_resume_is_exact(self):
        result, lines = self.reference()
        _, err = self.run_trainer("fail", ["--fail-at", "50"], expect=1)
        self.assertIn("injected failure before step 50", err)
        logged = [line["step"] for line in self.metric_lines("fail")]
        self.assertEqual(logged, list(range(1, 50)))
        self.run_trainer("fail", ["--fail-at", "50"], restart=1)
        self.assertEqual(self.result("fail"), result)
        self.assert_same_metrics("fail", lines, expect_duplicates=True)

    def test_injected_failure_marker_survives_a_fresh_attempt(self):
        # A retry that arrives as a new first attempt (no restart count) must not fail again.
        result, _ = self.reference()
        self.run_trainer("marker", ["--fail-at", "10"], expect=1)
        self.run_trainer("marker", ["--fail-at", "10"])
        self.assertEqual(self.result("marker"), result)
        # Even with a new checkpoint directory, when --out stays the same.
        out = os.path.join(self.tmp, "shared-out")
        self.run_trainer("first-job", ["--fail-at", "10", "--out", out], expect=1)
        self.run_trainer("second-job", ["--fail-at", "10", "--out", out])
        with open(os.path.join(out, "result.json")) as f:
            self.assertEqual(json.load(f), result)

    def test_rerun_after_completion_keeps_the_result(self):
        result, _ = self.reference()
        out, _ = self.run_trainer("reference", restart=1)
        self.assertIn(f"resuming at step {STEPS}", out)
        self.assertEqual(self.result("reference"), result)

    def test_checkpoint_from_other_arguments_is_refused(self):
        self.run_trainer("mismatch")
        p = subprocess.run([sys.executable, TRAINER, "--lr", "0.25", "--steps", str(STEPS), "--seed", "7"],
                           env=self.job_env("mismatch", restart=1), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("delete checkpoint.pkl", p.stderr)

    def test_bad_arguments_exit_2_with_a_reason(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHERD_")}
        cases = [
            (["--lr", "-1", "--steps", "10", "--seed", "1", "--out", self.tmp], "--lr must be a positive"),
            (["--lr", "0.1", "--steps", "0", "--seed", "1", "--out", self.tmp], "--steps must be a positive"),
            (["--lr", "0.1", "--steps", "10", "--seed", "1"], "give --out DIR"),
        ]
        for argv, message in cases:
            p = subprocess.run([sys.executable, TRAINER, *argv], env=env, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(p.returncode, 2, argv)
            self.assertIn(message, p.stderr)

    def test_out_dir_without_gpuherd(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHERD_")}
        out = os.path.join(self.tmp, "plain")
        p = subprocess.run([sys.executable, TRAINER, *ARGS, "--out", out], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("GPUHERD_METRICS_FILE is not set", p.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["checkpoint.pkl", "result.json"])
        with open(os.path.join(out, "result.json")) as f:
            self.assertEqual(json.load(f), self.reference()[0])


if __name__ == "__main__":
    unittest.main()
