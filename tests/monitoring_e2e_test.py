#!/usr/bin/env python3
"""End-to-end tests of monitoring: the real daemon on a simulated fleet with
rules of short durations, a webhook receiver on loopback, `gpuherd alerts`,
and /metrics as Prometheus' promtool reads it."""

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import Home, run  # noqa: E402

SCENARIO = """\
description: an XID on GPU 0 after 1 s; a burst of PCIe replays on GPU 1 after 1 s
seed: 4
gpus: [{model: h100-sxm, count: 2}, {model: rtx3090, count: 2}]
faults:
  - {at: 1s, gpu: 0, kind: xid, xid: 13}
  - {at: 1s, gpu: 1, kind: pcie_replay, count: 50}
"""

# The default rules' shapes, with durations a test can wait for.
RULES = """\
rules:
  - name: quick_xid
    expr: sum(xids[2s]) > 0
    severity: warning
    action: notify
    summary: an XID in the last 2 seconds
  - name: quick_replay
    expr: increase(pcie_replays[1s]) > 0
    for: 400ms
    severity: critical
    action: drain
    summary: PCIe replays in the last second
"""

# promtool flags dcgm-exporter's own camelCase labels and its PCIe replay
# counter's name; they are kept so that dcgm-exporter dashboards work.
ALLOWED_PROMTOOL = [
    re.compile(r"DCGM_FI_[A-Z_]+ label names should be written in 'snake_case' not 'camelCase'"),
    re.compile(r"DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'"),
]


class Receiver:
    """An HTTP server on loopback that keeps every JSON body POSTed to it."""

    def __init__(self):
        self.payloads = []
        received = self.payloads

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


class MonitoringTest(unittest.TestCase):
    def setUp(self):
        self.home = Home()
        self.receiver = Receiver()
        self.rules = os.path.join(self.home.dir, "rules.yaml")
        with open(self.rules, "w") as f:
            f.write(RULES)
        self.scenario = os.path.join(self.home.dir, "scenario.yaml")
        with open(self.scenario, "w") as f:
            f.write(SCENARIO)

    def tearDown(self):
        self.home.close()
        self.receiver.close()

    def gh(self, *args, check=True):
        return run(*args, home=self.home.dir, check=check)

    def api_port(self):
        with open(os.path.join(self.home.dir, "api-port")) as f:
            return int(f.read())

    def wait_for(self, what, predicate, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.1)
        self.fail(f"{what} within {timeout} s")

    def payload(self, rule, status):
        for p in self.receiver.payloads:
            for a in p["alerts"]:
                if a["labels"]["alertname"] == rule and a["status"] == status:
                    return p
        return None

    def test_bad_rules_file_refuses_to_start_with_its_line(self):
        bad = os.path.join(self.home.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("rules:\n  - name: hot\n    expr: temp_c >> 90\n")
        proc = subprocess.run([os.environ.get("GPUHERD_BIN", "build/gpuherd"), "--home", self.home.dir, "daemon",
                               "--sim", "1", "--port", "0", "--alert-rules", bad],
                              capture_output=True, text=True, timeout=30)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("bad.yaml:3", proc.stderr)

    def test_alerts_fire_notify_act_and_show(self):
        metrics_port = free_port()
        self.home.start("--scenario", self.scenario, "--interval", "200ms", "--alert-rules", self.rules,
                        "--webhook", self.receiver.url, "--metrics-port", str(metrics_port))

        # The webhook gets Alertmanager's payload for the firing, then the resolution.
        firing = self.wait_for("a firing quick_xid payload", lambda: self.payload("quick_xid", "firing"))
        self.assertEqual(firing["version"], "4")
        self.assertEqual(firing["status"], "firing")
        alert = next(a for a in firing["alerts"] if a["labels"]["alertname"] == "quick_xid")
        self.assertEqual(alert["labels"]["gpu"], "0")
        self.assertEqual(alert["labels"]["severity"], "warning")
        self.assertTrue(alert["labels"]["uuid"].startswith("GPU-"))
        self.wait_for("a firing quick_replay payload", lambda: self.payload("quick_replay", "firing"))

        # `gpuherd alerts` while they are active or just resolved.
        listed = json.loads(self.gh("alerts", "--all", "--json").stdout)
        rules = {(a["rule"], a["gpu"]) for a in listed}
        self.assertIn(("quick_xid", 0), rules)
        self.assertIn(("quick_replay", 1), rules)
        table = self.gh("alerts", "--all").stdout
        self.assertRegex(table, r"STATE\s+RULE\s+GPU\s+SINCE\s+VALUE\s+SEVERITY\s+ACTION")
        self.assertIn("quick_replay", table)

        # The drain action ran once for GPU 1.
        drained = json.loads(self.gh("events", "--kind", "gpu.drained", "--json").stdout)
        self.assertEqual([e["gpu_uuid"] for e in drained].count(alert["labels"]["uuid"]), 0)
        self.assertEqual(len(drained), 1, drained)
        self.assertIn("alert quick_replay", drained[0]["message"])

        # Both resolve: the XID leaves its 2 s window, the card cools.
        self.wait_for("quick_xid resolved", lambda: self.payload("quick_xid", "resolved"))
        self.wait_for("quick_replay resolved", lambda: self.payload("quick_replay", "resolved"))
        self.wait_for("no active alerts", lambda: json.loads(self.gh("alerts", "--json").stdout) == [])
        self.assertEqual(len(json.loads(self.gh("events", "--kind", "gpu.drained", "--json").stdout)), 1)
        firings = json.loads(self.gh("events", "--kind", "alert.firing", "--json").stdout)
        self.assertEqual(sorted(e["data"]["rule"] for e in firings), ["quick_replay", "quick_xid"])

        # /metrics without a token on the API port and on the metrics port.
        for port in (self.api_port(), metrics_port):
            status, content_type, body = fetch(f"http://127.0.0.1:{port}/metrics")
            self.assertEqual(status, 200)
            self.assertIn("version=0.0.4", content_type)
            self.assertIn('DCGM_FI_DEV_XID_ERRORS{', body)
            self.assertIn('gpuherd_alerts_firing{rule="quick_replay",severity="critical"} 0', body)
        with self.assertRaises(urllib.error.HTTPError) as refused:
            fetch(f"http://127.0.0.1:{metrics_port}/v1/health")
        self.assertEqual(refused.exception.code, 404)
        self.check_with_promtool(body)

        # Without the daemon, `gpuherd alerts` reads the store.
        self.home.daemon.terminate()
        self.assertEqual(self.home.daemon.wait(timeout=10), 0)
        offline = json.loads(self.gh("alerts", "--all", "--json").stdout)
        self.assertEqual({(a["rule"], a["state"]) for a in offline},
                         {("quick_xid", "resolved"), ("quick_replay", "resolved")})

    def check_with_promtool(self, exposition):
        promtool = shutil.which("promtool")
        if not promtool:
            self.skipTest("promtool not found; install Debian's 'prometheus' package to lint /metrics")
        proc = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, text=True,
                              timeout=30)
        findings = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        unexpected = [line for line in findings if not any(p.fullmatch(line) for p in ALLOWED_PROMTOOL)]
        self.assertEqual(unexpected, [], "promtool found problems in /metrics")


if __name__ == "__main__":
    unittest.main()
