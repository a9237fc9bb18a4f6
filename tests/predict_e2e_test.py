#!/usr/bin/env python3
"""End-to-end tests of failure prediction through the binary: `gpuherd predict
train` writes a versioned model into the state directory, `gpuherd predict
eval` judges it on a held-out simulated history against the threshold alert
rules, the same seeds give the same figures, and bad input is refused."""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import run  # noqa: E402

SMALL = ["--gpus", "32", "--days", "5", "--rounds", "100", "--no-stored"]
HELD_OUT = ["--seed", "77", "--gpus", "16", "--days", "5"]


class PredictTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.home = tempfile.mkdtemp(prefix="gpuherd-predict-e2e-")
        cls.train = json.loads(run("predict", "train", *SMALL, "--json", home=cls.home, timeout=240).stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.home, ignore_errors=True)

    def test_model_file_has_its_header(self):
        path = os.path.join(self.home, "predict", "risk-model.json")
        self.assertEqual(self.train["model"], path)
        with open(path) as f:
            doc = json.load(f)
        self.assertEqual(doc["format"], "gpuherd-risk-model")
        self.assertEqual(doc["version"], 2)
        self.assertIn("fan_wobble", doc["features"])
        self.assertEqual(doc["horizon_minutes"], 60)
        self.assertAlmostEqual(doc["threshold"], self.train["threshold"])
        self.assertGreater(self.train["positives"], 0)
        self.assertTrue(self.train["simulated"])

    def test_eval_beats_the_threshold_rules_and_is_deterministic(self):
        first = run("predict", "eval", *HELD_OUT, "--json", home=self.home, timeout=240)
        second = run("predict", "eval", *HELD_OUT, "--json", home=self.home, timeout=240)
        a, b = json.loads(first.stdout), json.loads(second.stdout)
        self.assertEqual(a["model_metrics"], b["model_metrics"])
        self.assertEqual(a["baseline_metrics"], b["baseline_metrics"])
        self.assertTrue(a["history"]["simulated"])
        m, base = a["model_metrics"], a["baseline_metrics"]
        self.assertGreater(m["faults"], 0)
        self.assertEqual(m["faults"], base["faults"])
        self.assertGreater(m["f1"], base["f1"])
        self.assertGreater(m["roc_auc"], 0.8)
        text = run("predict", "eval", *HELD_OUT, home=self.home, timeout=240).stdout
        self.assertIn("THRESHOLD RULES", text)
        self.assertIn("simulated", text)

    def test_training_is_deterministic_for_a_seed(self):
        other = tempfile.mkdtemp(prefix="gpuherd-predict-e2e-")
        try:
            again = json.loads(run("predict", "train", *SMALL, "--json", home=other, timeout=240).stdout)
            self.assertEqual(again["threshold"], self.train["threshold"])
            self.assertEqual(again["validation"], self.train["validation"])
            with open(os.path.join(self.home, "predict", "risk-model.json")) as f1, \
                 open(os.path.join(other, "predict", "risk-model.json")) as f2:
                self.assertEqual(json.load(f1)["booster"], json.load(f2)["booster"])
        finally:
            shutil.rmtree(other, ignore_errors=True)

    def test_bad_input_is_refused(self):
        empty = tempfile.mkdtemp(prefix="gpuherd-predict-e2e-")
        try:
            proc = run("predict", "eval", home=empty, check=False)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("gpuherd predict train", proc.stderr)
            proc = run("predict", "train", "--gpus", "0", home=empty, check=False)
            self.assertNotEqual(proc.returncode, 0)
            with open(os.path.join(empty, "model.json"), "w") as f:
                f.write('{"format": "gpuherd-risk-model", "version": 99}')
            proc = run("predict", "eval", "--model", os.path.join(empty, "model.json"), check=False)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("version 99", proc.stderr)
        finally:
            shutil.rmtree(empty, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
