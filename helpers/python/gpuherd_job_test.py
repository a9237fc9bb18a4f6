#!/usr/bin/env python3
"""Tests of gpuherd_job.py. Signal behaviour is process-wide, so it is tested in child
processes; the rest in this one, with the environment set per test."""
import contextlib
import io
import json
import math
import os
import pickle
import random
import subprocess
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpuherd_job as job  # noqa: E402


class Scalar:
    """Stands in for a tensor or numpy scalar: only __float__."""

    def __init__(self, v):
        self.v = v

    def __float__(self):
        return self.v


class HelperTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="gpuherd_job_test.")
        self.tmp = self._tmp.name
        self.env = mock.patch.dict(os.environ, {}, clear=False)
        self.env.start()
        for k in [k for k in os.environ if k.startswith("GPUHERD_")]:
            del os.environ[k]

    def tearDown(self):
        self.env.stop()
        self._tmp.cleanup()

    def lines(self, path):
        with open(path) as f:
            return [json.loads(line) for line in f]

    def test_log_metrics_appends_one_line_per_call(self):
        path = os.path.join(self.tmp, "m.jsonl")
        os.environ["GPUHERD_METRICS_FILE"] = path
        job.log_metrics(step=1, loss=0.5, acc=0.25)
        job.log_metrics(phase="eval", done=True, loss=Scalar(0.125))
        lines = self.lines(path)
        self.assertEqual(len(lines), 2)
        self.assertEqual({k: v for k, v in lines[0].items() if k != "time"},
                         {"step": 1, "loss": 0.5, "acc": 0.25})
        self.assertEqual({k: v for k, v in lines[1].items() if k != "time"},
                         {"phase": "eval", "done": True, "loss": 0.125})
        self.assertLessEqual(lines[0]["time"], lines[1]["time"])

    def test_log_metrics_writes_nan_and_infinity_tokens(self):
        path = os.path.join(self.tmp, "m.jsonl")
        os.environ["GPUHERD_METRICS_FILE"] = path
        job.log_metrics(step=3, loss=float("nan"), grad=float("inf"), low=float("-inf"))
        with open(path) as f:
            text = f.read()
        self.assertIn('"loss":NaN', text)
        self.assertIn('"grad":Infinity', text)
        self.assertIn('"low":-Infinity', text)
        self.assertTrue(math.isnan(json.loads(text)["loss"]))

    def test_log_metrics_refuses_bad_values(self):
        os.environ["GPUHERD_METRICS_FILE"] = os.path.join(self.tmp, "m.jsonl")
        with self.assertRaisesRegex(TypeError, "not a number"):
            job.log_metrics(step=1, model=object())
        with self.assertRaisesRegex(ValueError, "'time' is added by log_metrics"):
            job.log_metrics(step=1, time=3.0)

    def test_log_metrics_without_gpuherd_warns_once(self):
        err = io.StringIO()
        with mock.patch.object(job, "_warned_no_metrics", False), contextlib.redirect_stderr(err):
            job.log_metrics(step=1, loss=1.0)
            job.log_metrics(step=2, loss=1.0)
        self.assertEqual(err.getvalue().count("GPUHERD_METRICS_FILE is not set"), 1)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_checkpoint_round_trip_restores_random_state(self):
        os.environ["GPUHERD_CHECKPOINT_DIR"] = os.path.join(self.tmp, "ckpt", "deep")
        self.assertIsNone(job.load_checkpoint())
        random.seed(11)
        state = {"model": [0.1, 0.2], "cursor": {"epoch": 2, "pos": 17}}
        path = job.save_checkpoint(state)
        expected_next = [random.random() for _ in range(3)]
        random.seed(99)
        self.assertEqual(job.load_checkpoint(), state)
        self.assertEqual([random.random() for _ in range(3)], expected_next)
        self.assertEqual(os.listdir(os.path.dirname(path)), [job.CHECKPOINT_FILE])

    def test_load_without_restoring_random(self):
        job.save_checkpoint({"a": 1}, self.tmp)
        random.seed(5)
        expected = random.random()
        random.seed(5)
        self.assertEqual(job.load_checkpoint(self.tmp, restore_random=False), {"a": 1})
        self.assertEqual(random.random(), expected)

    def test_failed_save_keeps_previous_checkpoint_and_no_temp_file(self):
        job.save_checkpoint({"step": 1}, self.tmp)
        with self.assertRaises((pickle.PicklingError, AttributeError, TypeError)):
            job.save_checkpoint({"step": 2, "bad": lambda: 0}, self.tmp)
        with mock.patch.object(job.os, "replace", side_effect=OSError("disk full")):
            with self.assertRaisesRegex(OSError, "disk full"):
                job.save_checkpoint({"step": 3}, self.tmp)
        self.assertEqual(job.load_checkpoint(self.tmp), {"step": 1})
        self.assertEqual(os.listdir(self.tmp), [job.CHECKPOINT_FILE])

    def test_save_replaces_the_checkpoint(self):
        job.save_checkpoint({"step": 1}, self.tmp)
        job.save_checkpoint({"step": 2}, self.tmp)
        self.assertEqual(job.load_checkpoint(self.tmp), {"step": 2})

    def test_foreign_or_torn_file_is_a_clear_error(self):
        path = os.path.join(self.tmp, job.CHECKPOINT_FILE)
        with open(path, "wb") as f:
            f.write(pickle.dumps({"step": 3})[:5])
        with self.assertRaisesRegex(ValueError, "is not a readable checkpoint.*delete it"):
            job.load_checkpoint(self.tmp)
        with open(path, "wb") as f:
            pickle.dump({"step": 3}, f)
        with self.assertRaisesRegex(ValueError, "not written by save_checkpoint"):
            job.load_checkpoint(self.tmp)

    def test_no_checkpoint_dir_is_a_clear_error(self):
        with self.assertRaisesRegex(RuntimeError, "GPUHERD_CHECKPOINT_DIR is not set"):
            job.save_checkpoint({})
        with self.assertRaisesRegex(RuntimeError, "GPUHERD_CHECKPOINT_DIR is not set"):
            job.load_checkpoint()

    def test_restart_count_and_resuming(self):
        self.assertEqual(job.restart_count(), 0)
        self.assertFalse(job.resuming())
        os.environ["GPUHERD_RESTART_COUNT"] = "2"
        os.environ["GPUHERD_RESUME"] = "1"
        self.assertEqual(job.restart_count(), 2)
        self.assertTrue(job.resuming())
        os.environ["GPUHERD_RESTART_COUNT"] = "two"
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(job.restart_count(), 0)
        self.assertIn("not an integer", err.getvalue())


class SignalTest(unittest.TestCase):
    def run_child(self, body):
        script = "import os, signal, sys, time\nsys.path.insert(0, %r)\nimport gpuherd_job as job\n" % HERE
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, GPUHERD_CHECKPOINT_DIR=tmp)
            p = subprocess.run([sys.executable, "-c", script + textwrap.dedent(body)], env=env,
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.split()

    def test_sigusr1_requests_a_checkpoint_until_one_is_saved(self):
        out = self.run_child("""
            print(job.should_checkpoint(), job.should_exit())
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.01)
            print(job.should_checkpoint(), job.should_exit())
            print(job.should_checkpoint())
            job.save_checkpoint({"step": 1})
            print(job.should_checkpoint())
        """)
        self.assertEqual(out, ["False", "False", "True", "False", "True", "False"])

    def test_sigterm_requests_checkpoint_and_exit_and_stays(self):
        out = self.run_child("""
            job.install_signal_handlers()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)
            print(job.should_checkpoint(), job.should_exit())
            job.save_checkpoint({"step": 1})
            print(job.should_checkpoint(), job.should_exit(), job.EXIT_STOPPED)
        """)
        self.assertEqual(out, ["True", "True", "True", "True", "143"])

    def test_handlers_need_the_main_thread(self):
        out = self.run_child("""
            import threading
            def f():
                try:
                    job.should_checkpoint()
                    print("installed")
                except RuntimeError as e:
                    print("refused" if "main thread" in str(e) else str(e))
            t = threading.Thread(target=f); t.start(); t.join()
        """)
        self.assertEqual(out, ["refused"])


if __name__ == "__main__":
    unittest.main()
