#!/usr/bin/env python3
"""Connection floods against the real daemon (the hardening issue's item 6,
"File descriptors"): the daemon runs as root in the test's own home on a
simulated GPU, the attacker as `nobody` (setpriv), holding thousands of idle
connections on the daemon's unix socket and opening them again as they are
closed. Meanwhile root's commands must answer promptly and root's job must be
recorded as it ended. Root only: skipped, saying so, otherwise."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, Home, run  # noqa: E402

NOBODY = 65534
CAN_RUN = os.geteuid() == 0 and shutil.which("setpriv") is not None and shutil.which("prlimit") is not None
WHY_NOT = "needs root (the daemon runs as root, the attacker as nobody), setpriv and prlimit"
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

# Run as nobody: opens COUNT connections to the socket and sends nothing.
# Prints one JSON line once they are all open and the daemon has had a second
# to answer them ("settled"), then opens again every connection the daemon
# closes (at most RATE a second) until its stdin closes or SECONDS pass, and
# prints the totals.
ATTACKER = r"""
import json, resource, selectors, socket, sys, time
path, count, rate, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
sel = selectors.DefaultSelector()
stats = {"connects": 0, "connect_errors": 0, "refused_503": 0, "closed_silently": 0, "other": 0, "message": ""}
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    try:
        s.connect(path)
    except OSError:
        stats["connect_errors"] += 1
        s.close()
        return False
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    stats["connects"] += 1
    return True
def answered(s):
    try:
        data = s.recv(65536)
    except OSError:
        data = b""
    if data.startswith(b"HTTP/1.1 503"):
        stats["refused_503"] += 1
        if not stats["message"]:
            stats["message"] = data.decode("latin-1")
    elif not data:
        stats["closed_silently"] += 1
    else:
        stats["other"] += 1
    sel.unregister(s)
    s.close()
def pump(timeout):
    closed = 0
    for key, _ in sel.select(timeout):
        if key.fileobj is sys.stdin:
            return -1
        answered(key.fileobj)
        closed += 1
    return closed
start = time.time()
for _ in range(count):
    connect()
settle = time.time() + 1.0
while time.time() < settle:
    pump(0.05)
stats["held_after_settle"] = len(sel.get_map())
print(json.dumps(dict(stats, settled=True)), flush=True)
sel.register(sys.stdin, selectors.EVENT_READ)
missing = count - stats["held_after_settle"]
tokens, last = 0.0, time.time()
while time.time() - start < seconds:
    closed = pump(0.01)
    if closed < 0:
        break
    missing += closed
    now = time.time()
    tokens, last = min(tokens + (now - last) * rate, rate / 10), now
    again = min(missing, int(tokens))
    tokens -= again
    for _ in range(again):
        connect()
    missing -= again
stats["held_at_end"] = len(sel.get_map()) - 1
print(json.dumps(stats), flush=True)
"""


def metric(text, series):
    """The value of one series of the exposition, e.g.
    'gpuherd_http_connections_refused_total{limit="per_user"}'."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no series {series} in /metrics")


@unittest.skipUnless(CAN_RUN, WHY_NOT)
class HostileConnectionsTest(unittest.TestCase):
    def setUp(self):
        self.home = Home()
        self.attackers = []

    def tearDown(self):
        for proc in self.attackers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.home.close()

    # --- helpers ---------------------------------------------------------------

    def start(self, *flags):
        self.home.start("--sim", "1", "--interval", "200ms", *flags)
        self.socket = os.path.join(self.home.dir, "gpuherd.sock")
        with open(os.path.join(self.home.dir, "api-port")) as f:
            self.port = int(f.read())

    def attack(self, processes, per_process, rate=1000, seconds=45):
        """Starts the attackers and returns their "settled" reports."""
        for _ in range(processes):
            self.attackers.append(subprocess.Popen(
                AS_NOBODY + [sys.executable, "-c", ATTACKER, self.socket, str(per_process), str(rate),
                             str(seconds)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/tmp"))
        return [json.loads(proc.stdout.readline()) for proc in self.attackers]

    def stop_attack(self):
        """Ends the attackers and returns their totals."""
        totals = []
        for proc in self.attackers:
            out, _ = proc.communicate(input="", timeout=30)  # closes its stdin
            self.assertEqual(proc.returncode, 0)
            totals.append(json.loads(out.strip().splitlines()[-1]))
        return totals

    def root(self, *args, timeout=30):
        """A gpuherd command as root; returns (process, seconds it took)."""
        start = time.monotonic()
        proc = run(*args, home=self.home.dir, check=False, timeout=timeout)
        return proc, time.monotonic() - start

    def job(self, jid):
        return json.loads(run("show", str(jid), "--json", home=self.home.dir).stdout)

    def metrics(self):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/metrics", headers={"Host": "localhost"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.read().decode()

    def daemon_log(self):
        with open(os.path.join(self.home.dir, "daemon.out")) as f:
            return f.read()

    # --- attacks ------------------------------------------------------------------

    def test_idle_flood_is_held_to_the_per_user_limit(self):
        self.start()  # the defaults: 64 connections per user, 4,096 in all
        job, _ = self.root("submit", "--name", "root-job", "--", "sh", "-c", "sleep 7; exit 0")
        self.assertEqual(job.returncode, 0, job.stderr)
        jid = int(job.stdout)

        settled = self.attack(processes=3, per_process=1000)
        held = sum(r["held_after_settle"] for r in settled)
        refused = sum(r["refused_503"] for r in settled)
        closed = sum(r["closed_silently"] for r in settled)
        self.assertEqual(sum(r["connects"] for r in settled), 3000, settled)
        self.assertEqual(held + refused + closed, 3000, settled)
        # The per-user limit, over the 3 processes; a held one that reached
        # the 5 s head timeout before all were open lets one more in.
        self.assertLessEqual(held, 64, settled)
        self.assertGreater(held, 0, settled)
        self.assertGreaterEqual(refused, 3000 - 64 - closed, settled)
        message = next(r["message"] for r in settled if r["message"])
        self.assertIn(f"uid {NOBODY} already holds 64, the limit per user", message)

        # Root while nobody keeps the flood up.
        latencies = []
        for i in range(5):
            proc, took = self.root("submit", "--name", f"probe-{i}", "--", "true")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            latencies.append(took)
        self.assertLess(max(latencies), 1.0, latencies)
        proc, took = self.root("health")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertLess(took, 1.0)
        deadline = time.time() + 20
        while self.job(jid)["state"] not in ("completed", "failed") and time.time() < deadline:
            time.sleep(0.2)
        self.assertIsNone(self.attackers[0].poll(), "the flood ended before root's job did")
        ended = self.job(jid)
        self.assertEqual(ended["state"], "completed", ended)
        self.assertEqual(ended["exit_code"], 0, ended)

        totals = self.stop_attack()
        print(f"\nsubmit under the flood: {', '.join(f'{t * 1000:.0f}' for t in latencies)} ms; "
              f"attacker connects {sum(t['connects'] for t in totals)}, refused with 503 "
              f"{sum(t['refused_503'] for t in totals)}, closed idle {sum(t['closed_silently'] for t in totals)}",
              file=sys.stderr)
        self.assertEqual(sum(t["other"] for t in totals), 0, totals)
        self.assertGreater(sum(t["connects"] for t in totals), 3000, totals)  # the flood went on
        # Held connections that sent nothing were closed after the 5 s head timeout.
        self.assertGreater(sum(t["closed_silently"] for t in totals), 0, totals)
        # The daemon counted every refusal, and logged them once per 10 s, not once each.
        text = self.metrics()
        counted = metric(text, 'gpuherd_http_connections_refused_total{limit="per_user"}')
        self.assertGreaterEqual(counted, sum(t["refused_503"] for t in totals))
        self.assertEqual(metric(text, "gpuherd_http_accept_errors_total"), 0)
        log = self.daemon_log()
        self.assertNotIn("accept failed", log)
        self.assertLessEqual(log.count("HTTP connection refused"), 6)
        self.assertIsNone(self.home.daemon.poll(), "the daemon died")

    def test_total_limit_keeps_slots_for_root(self):
        self.start("--max-connections", "40", "--max-connections-per-user", "1000")
        settled = self.attack(processes=1, per_process=500)
        self.assertEqual(settled[0]["held_after_settle"], 32, settled)  # 40, less the 8 kept for admins
        self.assertIn("the last 8 kept for admins", settled[0]["message"])
        proc, took = self.root("submit", "--", "true")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertLess(took, 1.0)
        proc, _ = self.root("health")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.stop_attack()
        text = self.metrics()
        self.assertGreaterEqual(metric(text, 'gpuherd_http_connections_refused_total{limit="total"}'), 500 - 32)
        self.assertEqual(metric(text, "gpuherd_http_connections_limit"), 40)

    def test_accept_failures_are_counted_and_logged_once_per_interval(self):
        self.start()
        pid = self.home.daemon.pid
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        limits = subprocess.run(["prlimit", f"--pid={pid}", "--nofile", "--raw", "--noheadings", "-o", "SOFT,HARD"],
                                capture_output=True, text=True, check=True).stdout.split()
        # The daemon's own limit taken down below the connections it allows:
        # accept() fails with EMFILE.
        subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={fds + 20}:{limits[1]}"], check=True)
        try:
            self.attack(processes=1, per_process=300, seconds=6)
            time.sleep(3)  # about 30 retries of each listener's accept
        finally:
            subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limits[0]}:{limits[1]}"], check=True)
        self.stop_attack()
        proc, took = self.root("health")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertGreater(metric(self.metrics(), "gpuherd_http_accept_errors_total"), 10)
        failures = re.findall(r"HTTP accept failed: Too many open files \((\d+) time", self.daemon_log())
        self.assertTrue(failures)
        self.assertLessEqual(len(failures), 2, failures)  # 4 s of failures: one line, maybe two


if __name__ == "__main__":
    unittest.main()
