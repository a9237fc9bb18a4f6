#!/usr/bin/env python3
"""End-to-end tests of the fleet views over the real binary on simulated
fleets: `gpus` (-i, --format csv, jobs with used/share, health, drains, lost
GPUs), `top` (bars, sort, the pane of what matters) and `topo`. The jobs run as
nobody (JOB_USER) wherever the test runs as root."""
import csv
import io
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_e2e_test  # noqa: E402
from cli_e2e_test import JOB_USER, user_name  # noqa: E402

GPUHERD = os.path.abspath(os.environ.get("GPUHERD_BIN", "build/gpuherd"))

# GPU 5 falls off the bus after 1 s.
SCENARIO = """\
seed: 3
gpus: [{model: h100-sxm, count: 4}, {model: rtx3090, count: 4}]
faults:
  - {at: 1s, gpu: 5, kind: xid, xid: 79}
"""


def run(*args, home=None, check=True, timeout=30):
    cmd = [GPUHERD] + (["--home", home] if home else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, NO_COLOR="1"))
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}: {proc.stderr}")
    return proc


class Daemon:
    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="gpuherd-views-")
        with open(os.path.join(self.dir, "daemon.out"), "w") as out:
            self.proc = subprocess.Popen([GPUHERD, "--home", self.dir, "daemon", "--port", "0", *args],
                                         stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while run("status", home=self.dir, check=False).returncode != 0:
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise AssertionError("the daemon did not start")
            time.sleep(0.1)

    def run(self, *args, **kw):
        return run(*args, home=self.dir, **kw)

    def as_job_user(self, *args, **kw):
        """The CLI as the jobs' user (nobody where the test runs as root)."""
        return cli_e2e_test.run(*args, home=self.dir, user=JOB_USER, **kw)

    def wait(self, what, check, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def close(self):
        if self.proc.poll() is None:
            run("stop", home=self.dir, check=False)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class DirectViewsTest(unittest.TestCase):
    def test_csv_has_a_header_and_one_row_per_gpu(self):
        rows = list(csv.DictReader(io.StringIO(run("gpus", "--sim", "4", "--format", "csv").stdout)))
        self.assertEqual([r["index"] for r in rows], ["0", "1", "2", "3"])
        for r in rows:
            self.assertTrue(r["uuid"].startswith("GPU-"))
            self.assertEqual(r["state"], "ok")
            self.assertGreater(int(r["mem_total_mib"]), 0)
            self.assertGreater(float(r["temp_c"]), 0)
            self.assertEqual(r["drained"], "no")

    def test_gpu_selection(self):
        fleet = json.loads(run("gpus", "--sim", "4", "-i", "3,1", "--json").stdout)
        self.assertEqual([g["index"] for g in fleet["gpus"]], [1, 3])
        uuid = fleet["gpus"][1]["uuid"]
        rows = list(csv.DictReader(io.StringIO(run("gpus", "--sim", "4", "--gpu", uuid, "--format", "csv").stdout)))
        self.assertEqual([r["index"] for r in rows], ["3"])
        bad = run("gpus", "--sim", "4", "-i", "9", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("no GPU '9'", bad.stderr)
        self.assertEqual(run("gpus", "--sim", "4", "--format", "xml", check=False).returncode, 2)

    def test_topo_matrix_of_the_simulated_fleet(self):
        out = run("topo", "--sim", "8").stdout
        self.assertIn("SIMULATED FLEET", out)
        lines = [l.split() for l in out.splitlines() if l.startswith("GPU")]
        self.assertEqual(len(lines), 8)
        # GPU0: itself, NVLink to the other H100s, across the socket to the 3090s; then its CPUs and node.
        self.assertEqual(lines[0], ["GPU0", "X", "NV18", "NV18", "NV18", "SYS", "SYS", "SYS", "SYS", "0-31,64-95", "0"])
        self.assertEqual(lines[4][1:9], ["SYS", "SYS", "SYS", "SYS", "X", "PIX", "NODE", "NODE"])
        self.assertEqual(lines[4][9:], ["32-63,96-127", "1"])
        self.assertIn("NV#  = Connection traversing a bonded set of # NVLinks", out)
        topo = json.loads(run("topo", "--sim", "8", "--json").stdout)
        self.assertEqual(topo["matrix"][0][1], "NV18")
        self.assertEqual(topo["links"][4][5], "pcie-switch")
        self.assertEqual(topo["gpus"][7]["numa_node"], 1)

    def test_top_interval_usage_error(self):
        self.assertEqual(run("top", "--sim", "1", "--interval", "abc", check=False).returncode, 2)
        self.assertEqual(run("top", "--sim", "1", "--sort", "bogus", check=False).returncode, 2)


def top_on_a_terminal(env_extra, keys_after_first_frame):
    """Runs `top --sim 2` with a pseudo-terminal as stdin and stdout; sends
    `keys_after_first_frame` once a frame is drawn. Returns (exit code, output)."""
    leader, follower = pty.openpty()
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    env.update(env_extra)
    proc = subprocess.Popen([GPUHERD, "top", "--sim", "2", "--interval", "200ms"], stdin=follower, stdout=follower,
                            stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    out = b""
    sent = False
    deadline = time.time() + 15
    while time.time() < deadline and proc.poll() is None:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                out += os.read(leader, 65536)
            except OSError:
                break
        if not sent and b"gpuherd top" in out and b"IDX" in out:
            os.write(leader, keys_after_first_frame)
            sent = True
    if proc.poll() is None:
        proc.kill()
    code = proc.wait()
    os.close(leader)
    return code, out.decode("utf-8", "replace")


class TerminalTest(unittest.TestCase):
    def test_q_quits_and_colour_only_without_no_color(self):
        code, out = top_on_a_terminal({}, b"q")
        self.assertEqual(code, 0, out)
        self.assertIn("q quits", out)
        self.assertIn("\x1b[32m", out)  # coloured on a terminal
        code, out = top_on_a_terminal({"NO_COLOR": "1"}, b"sq")
        self.assertEqual(code, 0, out)
        self.assertNotIn("\x1b[32m", out)
        self.assertNotIn("\x1b[33m", out)
        self.assertIn("sorted by util", out)  # s moved to the next key before q

    def test_pipe_gets_no_colour(self):
        out = subprocess.run([GPUHERD, "top", "--sim", "2", "--iterations", "1"], capture_output=True, text=True,
                             timeout=30, env={k: v for k, v in os.environ.items() if k != "NO_COLOR"}).stdout
        self.assertNotIn("\x1b[", out)


class DaemonViewsTest(unittest.TestCase):
    def setUp(self):
        self.scenario = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        self.scenario.write(SCENARIO)
        self.scenario.close()
        self.d = Daemon("--scenario", self.scenario.name, "--interval", "200ms")

    def tearDown(self):
        self.d.close()
        os.unlink(self.scenario.name)

    def test_jobs_used_and_share_drain_reason_and_lost_gpu(self):
        d = self.d
        # After GPU 5 is lost, so that no job is placed there and moved.
        d.wait("GPU 5 lost", lambda: json.loads(d.run("gpus", "--json").stdout)["gpus"][5]["state"] == "lost")
        frac = d.as_job_user("submit", "--gpus", "0.5", "--gpu-mem", "4GiB", "--name", "half", "--",
                             "sleep", "60").stdout.strip()
        whole = d.as_job_user("submit", "--gpus", "1", "--name", "whole", "--", "sleep", "60").stdout.strip()
        d.run("drain", "7", "--reason", "fan rattles")  # an admin's

        def placed():
            fleet = json.loads(d.run("gpus", "--json").stdout)
            jobs = {j["id"]: (g["index"], j) for g in fleet["gpus"] for j in g["jobs"]}
            if (int(frac) in jobs and int(whole) in jobs and "used_bytes" in jobs[int(frac)][1]
                    and "used_bytes" in jobs[int(whole)][1]):
                return fleet, jobs
            return None
        fleet, jobs = d.wait("both jobs on their GPUs with memory readings", placed)
        gpu, half = jobs[int(frac)]
        self.assertEqual(half["share_bytes"], 4 << 30)
        self.assertEqual(half["user"], user_name(JOB_USER))
        self.assertEqual(half["user"], fleet["gpus"][gpu]["jobs"][0]["user"])
        # On the simulated fleet a fraction uses half its share unless it says otherwise.
        self.assertEqual(half["used_bytes"], 2 << 30)
        self.assertEqual(jobs[int(whole)][1]["share_bytes"], 0)
        # A whole-GPU job holds memory too (half the card on the simulated fleet), never nothing.
        whole_gpu, whole_job = jobs[int(whole)]
        self.assertEqual(whole_job["used_bytes"], fleet["gpus"][whole_gpu]["memory_total_bytes"] // 2)
        self.assertEqual(fleet["gpus"][7]["state"], "drained")
        self.assertTrue(fleet["gpus"][7]["drain_reason"].startswith("fan rattles"))

        lost = fleet["gpus"][5]
        self.assertNotIn("sample", lost)  # never its stale reading
        self.assertGreater(lost["last_seen"], 0)

        table = d.run("gpus").stdout
        self.assertIn(f"#{frac} ", table)
        self.assertIn("2.0/4.0G", table)
        self.assertIn("GPU 7 drained (operator): fan rattles", table)
        row5 = next(l for l in table.splitlines() if l.lstrip().startswith("5 "))
        self.assertIn("–", row5)
        self.assertNotIn("°C", row5)
        self.assertIn("GPU 5 lost", table)

        rows = {r["index"]: r for r in csv.DictReader(io.StringIO(d.run("gpus", "--format", "csv").stdout))}
        self.assertEqual(rows["5"]["temp_c"], "")
        self.assertTrue(rows["7"]["drain_reason"].startswith("fan rattles"))
        self.assertEqual(rows["7"]["drain_origin"], "operator")
        self.assertIn(f"{frac}:", rows[str(gpu)]["jobs"])
        self.assertIn(":2048:4096", rows[str(gpu)]["jobs"])

        # top: bars, a sort key, the lost GPU's fault in the pane, routine events left out.
        top = d.run("top", "--iterations", "1", "--interval", "200ms", "--sort", "mem").stdout
        self.assertIn("sorted by mem", top)
        self.assertIn("█", top)
        self.assertIn("Faults and warnings", top)
        self.assertIn("gpu.lost", top)
        self.assertNotIn("daemon.start", top)
        self.assertNotIn("job.started", top)
        order = [l.split()[0] for l in top.splitlines() if l.strip()[:1].isdigit() and ("H100" in l or "3090" in l)]
        self.assertEqual(order[-1], "5")  # lost: no reading, sorted last
        only = d.run("top", "--iterations", "1", "--interval", "200ms", "-i", "0").stdout
        self.assertEqual(sum(1 for l in only.splitlines() if "H100" in l or "3090" in l), 1)
        d.as_job_user("cancel", frac)
        d.as_job_user("cancel", whole)


if __name__ == "__main__":
    unittest.main(verbosity=2)
