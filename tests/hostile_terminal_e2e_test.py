#!/usr/bin/env python3
"""Terminal escapes from a hostile user (issue 29, item 8): the daemon runs as
root with --sim in the test's own home; `nobody` (setpriv) submits, over the
API and the CLI, jobs whose cwd, name and labels carry ESC and C1 sequences
and a pipeline whose job writes metric names with SGR and OSC sequences. Then
root reads every text view of them, and no output may hold ESC, BEL or any
other C0 or C1 control character but a line feed or a tab, while the text
itself is there, escaped (README, Security > Terminal output). Root only:
skipped, saying so, otherwise."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, Home  # noqa: E402
import hostile_user_e2e_test as hostile  # noqa: E402  (the module: its tests are not run here)
from hostile_user_e2e_test import AS_NOBODY, CAN_RUN, NOBODY, WHY_NOT  # noqa: E402

HIDDEN_CWD = "/x\x1b[8m\x1b[30;40mHIDDEN"       # hides the rest of the line
C1_NAME = "quiet\u009b8mjob"                     # CSI as one code point
C1_LABEL = "v\u009b2J\u0090"                     # erase display; DCS
RED, TITLE = "loss\x1b[31m", "acc\x1b]0;T\x07"   # SGR; OSC window title
METRICS_JOB = (
    "import json, os\n"
    "with open(os.environ['GPUHERD_METRICS_FILE'], 'a') as f:\n"
    "    for step in (1, 2):\n"
    f"        f.write(json.dumps({{'step': step, {RED!r}: 0.5 / step, {TITLE!r}: 0.4 * step,\n"
    "                             'lr\\u009b2J': 0.1, 'x|y\\n': 1.0}) + '\\n')\n")


def control_characters(data):
    """The control characters in `data` (bytes): C0 but LF and TAB, DEL, C1."""
    text = data.decode("utf-8", "replace")
    return sorted({hex(ord(c)) for c in text
                   if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f})


@unittest.skipUnless(CAN_RUN, WHY_NOT)
class HostileTerminalTest(unittest.TestCase):
    def setUp(self):
        self.home = Home()
        self.home.start("--sim", "2", "--interval", "200ms")
        self.base = tempfile.mkdtemp(prefix="gpuherd-escape-")  # the pipeline's folder, nobody's
        os.chown(self.base, NOBODY, NOBODY)
        os.chmod(self.base, 0o755)

    def tearDown(self):
        self.home.close()
        shutil.rmtree(self.base, ignore_errors=True)

    # --- helpers, borrowed from the hostile user's test -----------------------

    request = hostile.HostileUserTest.request  # one request as nobody
    port = hostile.HostileUserTest.port

    @property
    def served(self):  # request() keeps every body it got; not needed here
        return []

    def root(self, *args, ok=True):
        """`gpuherd ARGS` as root, on a pipe (no colour): its stdout and stderr as bytes."""
        proc = subprocess.run([GPUHERD, "--home", self.home.dir] + list(args), capture_output=True,
                              timeout=60, env=dict(os.environ, NO_COLOR="1"))
        if ok:
            self.assertEqual(proc.returncode, 0, f"gpuherd {args}: {proc.stderr!r}")
        return proc.stdout + proc.stderr

    def api(self, method, target, body):
        reply = self.request(method, target, json.dumps(body).encode(), {"Content-Type": "application/json"})
        return reply["status"], json.loads(reply["body"]) if reply["body"].startswith("{") else reply["body"]

    def job(self, jid):
        return json.loads(self.root("show", str(jid), "--json"))

    def wait_job(self, jid, states, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.job(jid)["state"] in states:
                return
            time.sleep(0.2)
        self.fail(f"job {jid} is {self.job(jid)['state']}, not {states}")

    def assert_clean(self, what, data, *visible):
        self.assertEqual(control_characters(data), [], f"{what} printed control characters: {data!r}")
        for text in visible:
            self.assertIn(text.encode(), data, f"{what} does not show {text!r}: {data!r}")

    # --- the attack ------------------------------------------------------------

    def test_no_escape_sequence_reaches_roots_terminal(self):
        # Over the API: a cwd that hides the line (refused by no check: only
        # NUL is), a name and a label with C1 controls.
        status, reply = self.api("POST", "/v1/jobs", {"command": ["true"], "cwd": HIDDEN_CWD, "name": C1_NAME,
                                                      "labels": {"team": C1_LABEL}})
        self.assertEqual(status, 201, reply)
        hidden = reply["id"]
        # Over the CLI: ESC in a name is refused, and the refusal, which
        # quotes it, is escaped too.
        refused = subprocess.run(AS_NOBODY + [GPUHERD, "--home", self.home.dir, "submit", "--name",
                                              "a\x1b[8mb", "--", "true"], capture_output=True, timeout=60, cwd="/tmp")
        self.assertNotEqual(refused.returncode, 0)
        self.assertEqual(control_characters(refused.stdout + refused.stderr), [], refused.stderr)
        # A pipeline whose job writes metric names with SGR, OSC and C1.
        spec = {"name": "escapes", "defaults": {"gpus": 0},
                "steps": {"train": {"run": ["python3", "-c", METRICS_JOB]}}}
        status, reply = self.api("POST", "/v1/pipelines", {"yaml": json.dumps(spec), "source": "escapes.yaml",
                                                           "base_dir": self.base})
        self.assertEqual(status, 201, reply)
        run_id = reply["id"]
        deadline = time.time() + 60
        while time.time() < deadline:
            run = json.loads(self.root("pipeline", "show", str(run_id), "--json"))
            if run["state"] in ("completed", "failed", "succeeded", "cancelled"):
                break
            time.sleep(0.3)
        self.assertIn(run["state"], ("completed", "succeeded"), run)
        self.wait_job(hidden, ["completed", "failed"])
        metrics = json.loads(self.request("GET", f"/v1/pipelines/{run_id}/metrics")["body"])["metrics"]
        self.assertIn(RED, metrics[-1]["values"], metrics)  # the names reached the daemon as written

        # Root reads every view. The escaped text is there; the raw bytes not.
        escaped_cwd = "/x\\e[8m\\e[30;40mHIDDEN"  # in the reason of the job that could not enter it
        self.assert_clean("ps --all", self.root("ps", "--all"), "quiet\\u009b8mjob", escaped_cwd)
        self.assert_clean("show", self.root("show", str(hidden)), "/x\\e[8m\\e[30;40mHIDDEN", "quiet\\u009b8mjob",
                          "v\\u009b2J\\u0090")
        self.assert_clean("events", self.root("events", "--limit", "1000"), escaped_cwd)
        self.assert_clean("pipelines", self.root("pipelines", "--all"), "escapes")
        self.assert_clean("pipeline show", self.root("pipeline", "show", str(run_id)), "loss\\e[31m")
        md = self.root("report", str(run_id), "--format", "md")
        self.assert_clean("report --format md", md, "loss\\e[31m", "acc\\e]0;T\\x07", "x\\|y\\n")
        csv = self.root("report", str(run_id), "--format", "csv")
        self.assert_clean("report --format csv", csv, "loss\\e[31m_final", "acc\\e]0;T\\x07_best")
        self.assertEqual(len(csv.decode().strip().split("\n")), 2, csv)  # a header and one node: no line broken
        html = self.root("report", str(run_id), "--format", "html", "-o", "-")
        self.assertEqual(control_characters(html.replace(b"\n", b"")), [], "report --format html")
        self.assertNotIn(b"\x1b", html)
        # The other listings (`gpuherd logs` prints a job's output raw, like cat).
        for view in (["acct"], ["acct", "--format", "csv"], ["alerts", "--all"], ["gpus"], ["gpus", "--format", "csv"],
                     ["top", "--iterations", "1"], ["wait", str(hidden)]):
            self.assert_clean(" ".join(view), self.root(*view, ok=view[0] != "wait"))
        # JSON stays JSON: the text comes back exactly as written.
        shown = self.job(hidden)
        self.assertEqual(shown["name"], C1_NAME)
        if "spec" in shown and "cwd" in shown["spec"]:
            self.assertEqual(shown["spec"]["cwd"], HIDDEN_CWD)
        self.assertIsNone(self.home.daemon.poll(), "the daemon died")


if __name__ == "__main__":
    unittest.main()
