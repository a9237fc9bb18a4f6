#!/usr/bin/env python3
"""End-to-end tests of the pipeline commands: the real CLI against a real daemon on a
simulated fleet, running the example sweep (examples/pipelines/sweep.yaml) with the toy
trainer, and the report's numbers checked against what the trainer itself wrote. The
pipeline's jobs, and the commands of its owner, run as nobody (JOB_USER) wherever the
test runs as root."""

import csv
import io
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import JOB_USER, Home, run  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "pipelines")
STEPS = "40"  # a short run of the same sweep: 12 points, 40 steps each
# Each point's job writes the parameters it was given into its own folder.
PARAMS_FILE = """name: params-file
steps:
  train:
    matrix: {lr: [0.1, 0.3], seed: [1]}
    run: ["sh", "-c", "printf '%s' \\"$GPUHERD_PARAMS\\" > \\"$GPUHERD_WORKSPACE/params.json\\""]
    gpus: 0.1
    gpu_mem: 64MiB
"""


def embedded_data(html):
    m = re.search(r'<script type="application/json" id="gpuherd-report-data">(.*?)</script>', html, re.S)
    assert m, "the report has no embedded chart data"
    return json.loads(m.group(1))


class PipelineCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.home = Home(user=JOB_USER)
        # The user's own copy of the examples: sweep.yaml runs ../trainers/toy_trainer.py.
        cls.examples = os.path.join(cls.home.checkout(), "examples", "pipelines")
        cls.sweep = os.path.join(cls.examples, "sweep.yaml")
        cls.home.start("--sim", "4", "--interval", "200ms")
        # One run of the sweep shared by the tests that read its results.
        proc = cls.home.run("run", cls.sweep, "-p", f"steps={STEPS}", "--wait", check=False, timeout=240)
        cls.wait_proc = proc
        cls.pid = int(proc.stdout.split("\n", 1)[0]) if proc.stdout[:1].isdigit() else None

    @classmethod
    def tearDownClass(cls):
        cls.home.close()

    def gh(self, *args, check=True, timeout=30):
        """The CLI as the pipeline's owner (nobody where the test runs as root)."""
        return self.home.run(*args, check=check, timeout=timeout)

    def detail(self):
        return json.loads(self.gh("pipeline", "show", str(self.pid), "--json").stdout)

    def results(self, detail):
        """The toy trainer's own result.json of every train point, by node id."""
        out = {}
        for node in detail["nodes"]:
            if node["step"] == "train":
                path = os.path.join(detail["run_dir"], node["key"], "result.json")
                self.assertEqual(os.stat(path).st_uid, self.home.uid, "written by the pipeline's owner")
                with open(path) as f:
                    out[node["id"]] = json.load(f)
        return out

    # --- validation ---------------------------------------------------------

    def test_invalid_file_exits_2_with_file_and_line(self):
        proc = self.gh("run", os.path.join(self.examples, "invalid", "cycle.yaml"), check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertRegex(proc.stderr, r"cycle\.yaml:\d+: .*cycle")
        self.assertEqual(proc.stdout, "")

    def test_undefined_parameter_exits_2(self):
        proc = self.gh("run", self.sweep, "-p", "stepz=10", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("stepz", proc.stderr)
        proc = self.gh("run", self.sweep, "-p", "steps", check=False)
        self.assertEqual(proc.returncode, 2, proc.stderr)

    def test_missing_file_exits_2(self):
        proc = self.gh("run", "/nonexistent/p.yaml", check=False)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("/nonexistent/p.yaml", proc.stderr)

    def test_run_without_a_daemon_says_the_file_was_not_checked(self):
        # The daemon checks and expands the file; without one nothing was checked.
        home = Home()
        try:
            proc = run("run", os.path.join(EXAMPLES, "invalid", "cycle.yaml"), home=home.dir, check=False)
        finally:
            home.close()
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("no daemon answered", proc.stderr)
        self.assertIn("cycle.yaml was neither checked nor run", proc.stderr)
        self.assertIn("gpuherd daemon", proc.stderr)
        self.assertEqual(proc.stdout, "")

    # --- run --wait, pipelines, show ------------------------------------------

    def test_run_wait_completes_the_sweep(self):
        proc = self.wait_proc
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIsNotNone(self.pid)
        # Not a terminal: one line per change, then the final table.
        self.assertRegex(proc.stdout, r"train\[lr=0\.3,seed=1\] completed after ")
        self.assertIn("NODE", proc.stdout)
        self.assertIn(f"pipeline {self.pid} succeeded", proc.stdout)

    def test_run_prints_the_id_alone_and_the_commands_that_follow_it(self):
        proc = self.wait_proc
        self.assertEqual(proc.stdout.split("\n", 1)[0], str(self.pid))  # ID=$(gpuherd run f) stays a script's
        self.assertIn(f"pipeline {self.pid}: 13 nodes\n", proc.stderr)
        self.assertIn(f"follow it:   gpuherd pipeline show {self.pid}\n", proc.stderr)
        self.assertIn(f"its report:  gpuherd report {self.pid}\n", proc.stderr)

    def test_pipelines_and_show(self):
        listing = json.loads(self.gh("pipelines", "--all", "--json").stdout)
        mine = [p for p in listing if p["id"] == self.pid]
        self.assertEqual(len(mine), 1, listing)
        self.assertEqual(mine[0]["name"], "toy-sweep")
        self.assertEqual(mine[0]["outcome"], "succeeded")
        self.assertEqual(mine[0]["nodes"]["total"], 13)
        self.assertEqual(mine[0]["nodes"]["completed"], 13)
        # Finished today: listed without --all; by its state, of any age.
        self.assertIn(self.pid, [p["id"] for p in json.loads(self.gh("pipelines", "--json").stdout)])
        self.assertIn(self.pid, [p["id"] for p in json.loads(self.gh("pipelines", "--state", "succeeded", "--json").stdout)])
        self.assertNotIn(self.pid, [p["id"] for p in json.loads(self.gh("pipelines", "--state", "failed", "--json").stdout)])
        self.assertEqual(self.gh("pipelines", "--state", "stopped", check=False).returncode, 2)
        table = self.gh("pipelines", "--all").stdout
        self.assertRegex(table, rf"(?m)^\s*{self.pid}\s+toy-sweep\s+\S+\s+succeeded\s+13/13 done")

        detail = self.detail()
        self.assertEqual(len(detail["nodes"]), 13)
        shown = self.gh("pipeline", "show", str(self.pid)).stdout
        self.assertRegex(shown, r"NODE\s+STATE\s+JOB\s+GPU")
        for node in detail["nodes"]:
            self.assertGreater(node["job_id"], 0)
            self.assertRegex(shown, re.escape(node["id"]) + rf"\s+completed\s+{node['job_id']}\s")
        self.assertIn(f"run folder: {detail['run_dir']}", shown)
        # Its latest metric is the trainer's last step.
        self.assertRegex(shown, rf"train\[lr=0\.1,seed=2\]\s+completed.*step {STEPS} ")

    def test_each_point_is_told_its_parameters_and_writes_them_as_its_user(self):
        path = os.path.join(self.home.folder("params-file"), "p.yaml")
        with open(path, "w") as f:
            f.write(PARAMS_FILE)
        proc = self.gh("run", path, "--wait", check=False, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        pid = int(proc.stdout.split("\n", 1)[0])
        detail = json.loads(self.gh("pipeline", "show", str(pid), "--json").stdout)
        written = {}
        for node in detail["nodes"]:
            params_json = os.path.join(detail["run_dir"], node["key"], "params.json")
            self.assertEqual(os.stat(params_json).st_uid, self.home.uid, "written by the job, as its user")
            with open(params_json) as f:
                written[node["id"]] = json.load(f)
        self.assertEqual(written, {"train[lr=0.1,seed=1]": {"lr": "0.1", "seed": "1"},
                                   "train[lr=0.3,seed=1]": {"lr": "0.3", "seed": "1"}})

    def test_show_unknown_pipeline_fails(self):
        proc = self.gh("pipeline", "show", "9999", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("9999", proc.stderr)

    # --- report -------------------------------------------------------------

    def test_report_csv_numbers_match_the_trainer(self):
        detail = self.detail()
        results = self.results(detail)
        rows = list(csv.DictReader(io.StringIO(self.gh("report", str(self.pid), "--format", "csv").stdout)))
        self.assertEqual(len(rows), 13)
        by_node = {r["node"]: r for r in rows}
        nodes = {n["id"]: n for n in detail["nodes"]}
        for node_id, result in results.items():
            row = by_node[node_id]
            self.assertEqual(float(row["lr"]), result["lr"])
            self.assertEqual(int(row["seed"]), result["seed"])
            self.assertAlmostEqual(float(row["acc_final"]), result["final_acc"], places=12)
            self.assertAlmostEqual(float(row["acc_best"]), result["best_acc"], places=12)
            # GPU-hours: a tenth of a GPU for the node's elapsed time.
            node = nodes[node_id]
            elapsed = (node["ended"] - node["started"]) / 1000.0
            self.assertAlmostEqual(float(row["elapsed_s"]), elapsed, places=6)
            self.assertAlmostEqual(float(row["gpus"]), 0.1)
            self.assertAlmostEqual(float(row["gpu_hours"]), 0.1 * elapsed / 3600, places=12)
        for row in rows:
            self.assertAlmostEqual(float(row["gpu_hours"]), float(row["gpus"]) * float(row["elapsed_s"]) / 3600)

    def test_report_markdown_ranks_the_points_by_the_objective(self):
        results = self.results(self.detail())
        md = self.gh("report", str(self.pid), "--format", "md").stdout
        header = next(line for line in md.splitlines() if line.startswith("| rank | point |"))
        columns = [c.strip() for c in header.strip("|").split("|")]
        # Ranked by the value at each point's last step (summary: last, the default).
        last = columns.index("acc last (max)")
        self.assertIn("loss last", columns)
        ranked = []
        for node_id, result in results.items():
            row = next(line for line in md.splitlines() if f"| {node_id} |" in line)
            cells = [c.strip() for c in row.strip("|").split("|")]
            self.assertAlmostEqual(float(cells[last]), result["final_acc"], delta=1e-5)
            ranked.append((int(cells[0]), result["final_acc"]))
        # Rank 1 has the highest final accuracy, and ranks follow it.
        ranked.sort()
        self.assertEqual([acc for _, acc in ranked], sorted((acc for _, acc in ranked), reverse=True))
        top = max(results, key=lambda n: results[n]["final_acc"])
        self.assertIn("**Best of step train by acc (max):", md)
        self.assertEqual(ranked[0][1], results[top]["final_acc"])
        self.assertIn("## Step timings", md)

    def test_report_html_goes_to_the_run_folder_with_the_curves(self):
        detail = self.detail()
        results = self.results(detail)
        proc = self.gh("report", str(self.pid))
        path = proc.stdout.strip()
        self.assertEqual(path, os.path.join(detail["run_dir"], "report.html"))
        with open(path) as f:
            html = f.read()
        data = embedded_data(html)
        self.assertEqual(data["metrics"], ["acc", "loss"])
        points = {p["node"]: p for p in data["points"]}
        self.assertEqual(set(points), set(results))
        for node_id, result in results.items():
            steps, accs = points[node_id]["curves"]["acc"]
            self.assertEqual(steps, list(range(1, int(STEPS) + 1)))
            self.assertEqual(accs[-1], result["final_acc"])
            self.assertEqual(max(accs), result["best_acc"])
        self.assertTrue("new uPlot(" in html or "No charts" in html)
        self.assertNotIn("<script src=", html)  # self-contained
        # The run's parameters: one table, its header and its values together.
        self.assertIn('<h2>Parameters</h2>\n<table class="params"><thead><tr><th>parameter</th><th>value</th></tr>'
                      '</thead><tbody>\n<tr><td>batch</td><td>16</td></tr>\n<tr><td>steps</td><td>40</td></tr>\n'
                      '</tbody></table>', html)
        self.assertNotRegex(html, r"(?<![-\w])\.params\s*\{[^}]*display")
        # -o writes elsewhere (a folder of the user's).
        out = os.path.join(self.home.folder("report-out"), "r.html")
        self.assertEqual(self.gh("report", str(self.pid), "-o", out).stdout.strip(), out)
        self.assertTrue(os.path.getsize(out) > 0)

    def test_report_of_unknown_pipeline_fails(self):
        proc = self.gh("report", "9999", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("9999", proc.stderr)


ASHA_NINE = os.path.join(EXAMPLES, "asha_nine.yaml")
JOBS = os.path.abspath(os.path.join(EXAMPLES, "..", "jobs"))
MISSPELLED = """name: misspelled
steps:
  train:
    matrix: {lr: [0.1, 0.3]}
    objective: {metric: accuracy, mode: max}
    run: python3 JOBS/lr_curve.py --lr ${{ matrix.lr }} --steps 40 --step-seconds 0.05 --metric acc
    gpus: 0.1
    gpu_mem: 256MiB
"""


class AshaSweepCliTest(unittest.TestCase):
    """examples/pipelines/asha_nine.yaml: nine points started together on one GPU."""

    @classmethod
    def setUpClass(cls):
        cls.home = Home()
        cls.home.start("--sim", "1", "--interval", "200ms")
        proc = run("run", ASHA_NINE, "--wait", home=cls.home.dir, check=False, timeout=240)
        cls.wait_proc = proc
        cls.pid = int(proc.stdout.split("\n", 1)[0]) if proc.stdout[:1].isdigit() else None

    @classmethod
    def tearDownClass(cls):
        cls.home.close()

    def gh(self, *args, check=True, timeout=30):
        return run(*args, home=self.home.dir, check=check, timeout=timeout)

    def test_nine_points_started_together_cost_about_successive_halving(self):
        self.assertEqual(self.wait_proc.returncode, 0, self.wait_proc.stdout + self.wait_proc.stderr)
        detail = json.loads(self.gh("pipeline", "show", str(self.pid), "--json").stdout)
        steps = {n["id"]: n["latest_metrics"].get("step", 0) for n in detail["nodes"]}
        print(f"\nasha_nine: {sum(steps.values())} steps: {steps}", file=sys.stderr)
        # Synchronous successive halving: 6 x 10 + 2 x 30 + 90 = 210; 1.3 x 210 = 273.
        self.assertLessEqual(sum(steps.values()), 275, steps)
        self.assertEqual(steps["train[lr=0.1]"], 90)
        md = self.gh("report", str(self.pid), "--format", "md").stdout
        self.assertIn("**Best of step train by val_loss (min): train[lr=0.1]", md)

    def test_stopped_points_say_so_and_count_as_done(self):
        detail = json.loads(self.gh("pipeline", "show", str(self.pid), "--json").stdout)
        stopped = [n for n in detail["nodes"] if n["state"] == "stopped"]
        completed = [n for n in detail["nodes"] if n["state"] == "completed"]
        self.assertGreaterEqual(len(stopped), 6, detail["nodes"])
        shown = self.gh("pipeline", "show", str(self.pid)).stdout
        self.assertIn(f"9/9 done: {len(completed)} completed, {len(stopped)} stopped early", shown)
        self.assertRegex(shown, r"stopped early by ASHA at rung 10 \(rank [4-9] of 9 on val_loss\)")
        self.assertNotIn("cancelled by", shown)
        md = self.gh("report", str(self.pid), "--format", "md").stdout
        self.assertRegex(md, r"stopped early by ASHA at rung 10 \(rank [4-9] of 9 on val_loss\)")
        self.assertNotIn("cancelled by", md)
        job = self.gh("show", str(stopped[0]["job_id"])).stdout
        self.assertIn("stopped early by ASHA at rung", job)
        self.assertNotIn("cancelled by", job)

    def test_a_misspelled_objective_is_said(self):
        # A job that logs acc and loss, ranked by "accuracy".
        folder = tempfile.mkdtemp(prefix="gpuherd-misspelled-")
        try:
            path = os.path.join(folder, "p.yaml")
            with open(path, "w") as f:
                f.write(MISSPELLED.replace("JOBS", JOBS))
            proc = self.gh("run", path, "--wait", check=False, timeout=120)
            pid = int(proc.stdout.split("\n", 1)[0])
        finally:
            shutil.rmtree(folder)
        said = "objective 'accuracy' not logged; seen: acc, loss"
        self.assertIn(said, self.gh("pipeline", "show", str(pid)).stdout)
        self.assertIn(said, self.gh("report", str(pid), "--format", "md").stdout)
        events = json.loads(self.gh("events", "--json", "--kind", "pipeline.objective_missing").stdout)
        self.assertEqual(len(events), 1, events)
        self.assertEqual(events[0]["severity"], "warning")
        self.assertIn(said, events[0]["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
