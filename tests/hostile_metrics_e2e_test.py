#!/usr/bin/env python3
"""A metric flood against the real daemon (issue 29, item 7): the daemon runs
as root in the test's own home with --sim, and 10 jobs of `nobody` each
append 190,000 short metric lines to their GPUHERD_METRICS_FILE as fast as
they can. Meanwhile /v1/health must keep answering quickly (the intake reads
on a budget per round, shared between jobs); afterwards state.db has grown by
a few MB at most (lines past a job's first are thinned) and `show` says how
many lines were read and kept. Root only: skipped, saying so, otherwise."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, Home, run  # noqa: E402

NOBODY = 65534
CAN_RUN = os.geteuid() == 0 and shutil.which("setpriv") is not None
WHY_NOT = "needs root (the daemon runs as root, the jobs as nobody) and setpriv"
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

JOBS = 10
LINES = 190_000
# Appends LINES short lines, then stays a few seconds so that most of the
# intake's reading happens while it runs.
FLOOD = ("import os, time\n"
         "with open(os.environ['GPUHERD_METRICS_FILE'], 'a') as f:\n"
         f"    for i in range(1, {LINES + 1}):\n"
         "        f.write('{\"step\": %d, \"loss\": %.5f}\\n' % (i, 1.0 / i))\n"
         "time.sleep(5)\n")
MAX_HEALTH_MS = 100
MAX_DB_GROWTH = 5 << 20


def get(sock_path, target):
    """One GET over the unix socket: (milliseconds to the whole reply, status, body)."""
    start = time.monotonic()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(sock_path)
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    s.close()
    elapsed = (time.monotonic() - start) * 1000
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    if b"transfer-encoding: chunked" in head.lower():
        body = unchunk(body)
    return elapsed, status, body


def unchunk(body):
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2:]
    return out


@unittest.skipUnless(CAN_RUN, WHY_NOT)
class MetricFloodTest(unittest.TestCase):
    def setUp(self):
        self.home = Home()
        os.chmod(self.home.dir, 0o755)
        self.home.start("--sim", str(JOBS), "--interval", "200ms")

    def tearDown(self):
        self.home.close()

    def db_bytes(self):
        return os.path.getsize(os.path.join(self.home.dir, "state.db"))

    def show(self, jid, *args):
        return run("show", str(jid), *args, home=self.home.dir)

    def test_flood_keeps_the_daemon_responsive_and_the_store_small(self):
        # The daemon's first commits are done once it answers; stopped and
        # started again, its state file has its checkpointed size.
        self.home.daemon.terminate()
        self.home.daemon.wait(timeout=20)
        before = self.db_bytes()
        self.home.start("--sim", str(JOBS), "--interval", "200ms")

        ids = []
        for _ in range(JOBS):
            proc = subprocess.run(AS_NOBODY + [GPUHERD, "--home", self.home.dir, "submit", "--gpus", "1", "--",
                                               "python3", "-c", FLOOD],
                                  capture_output=True, text=True, timeout=30, cwd="/tmp")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            ids.append(int(proc.stdout))

        sock_path = os.path.join(self.home.dir, "gpuherd.sock")
        latencies = []
        started = time.time()
        done = set()
        while time.time() - started < 50 and len(done) < JOBS:
            for _ in range(5):
                ms, status, _ = get(sock_path, "/v1/health")
                self.assertEqual(status, 200)
                latencies.append(ms)
                time.sleep(0.05)
            for jid in ids:
                if jid in done:
                    continue
                job = json.loads(self.show(jid, "--json").stdout)
                m = job.get("metrics", {})
                if job["state"] == "completed" and m.get("lines_read") == LINES and not m.get("behind"):
                    done.add(jid)
        took = time.time() - started
        latencies.sort()
        print(f"\n{JOBS} jobs x {LINES} lines read in {took:.1f} s; /v1/health over {len(latencies)} requests: "
              f"median {latencies[len(latencies) // 2]:.1f} ms, max {latencies[-1]:.1f} ms", file=sys.stderr)
        self.assertEqual(len(done), JOBS, f"jobs not read to the end in 50 s: {sorted(set(ids) - done)}")
        self.assertGreater(len(latencies), 50)
        self.assertLess(latencies[-1], MAX_HEALTH_MS, f"/v1/health took {latencies[-1]:.1f} ms under the flood")

        for jid in ids:
            m = json.loads(self.show(jid, "--json").stdout)["metrics"]
            self.assertEqual(m["lines_read"], LINES)
            self.assertLess(m["lines_kept"], 20_000)
            self.assertEqual(m["lines_thinned"], LINES - m["lines_kept"])
            self.assertFalse(m["behind"])
        text = self.show(ids[0]).stdout
        self.assertRegex(text, r"metrics +190,000 lines read, [\d,]+ kept \(thinned\)")
        # The last line is among the kept ones, the first 1,000 lines whole.
        _, status, body = get(sock_path, f"/v1/jobs/{ids[0]}/metrics")
        self.assertEqual(status, 200)
        steps = [m["step"] for m in json.loads(body)["metrics"]]
        self.assertEqual(steps[:1000], list(range(1, 1001)))
        self.assertEqual(steps[-1], LINES)

        self.home.daemon.terminate()
        self.home.daemon.wait(timeout=20)
        growth = self.db_bytes() - before
        print(f"state.db grew by {growth / (1 << 20):.2f} MiB", file=sys.stderr)
        self.assertLess(growth, MAX_DB_GROWTH)


if __name__ == "__main__":
    unittest.main()
