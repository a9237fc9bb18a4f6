#!/usr/bin/env python3
"""A 10,000-step pipeline of trivial steps, planned and driven to completion
through a real gpuherd daemon: the overhead per step.

    bench/pipeline/pipeline_bench.py [--gpuherd build/gpuherd] [--fanout 9998] [--chain 100]

Two pipelines run one after the other on a fresh --home with a simulated fleet:

- fan-out: `prepare`, then a sweep of FANOUT points of `true` (gpus 0) that all
  need it, then `report`, which needs every point: FANOUT + 2 nodes;
- chain: CHAIN steps of `true`, each needing the one before: every step waits
  for the previous job's exit, so this measures the latency of one hop.

Prints a Markdown table: nodes, the POST (parse, validate, expand, make the
folders, store the plan), the wall time to the last node's end, both per
step, and the daemon's own CPU time per step (its jobs' processes excluded). Standard library only; talks to the daemon over loopback TCP with its
API token.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


class Daemon:
    def __init__(self, binary, home, sim=4):
        self.home = home
        self.log = open(os.path.join(home, "daemon.out"), "w")
        self.proc = subprocess.Popen([binary, "--home", home, "daemon", "--sim", str(sim), "--port", "0",
                                      "--interval", "1s"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(home, "api-port")):
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"the daemon did not start; see {home}/daemon.out")
            time.sleep(0.1)
        with open(os.path.join(home, "api-port")) as f:
            self.port = int(f.read())
        with open(os.path.join(home, "api-token")) as f:
            self.token = f.read().strip()

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def cpu_seconds(self):
        """User + system CPU of the daemon process itself (not its jobs)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.close()


def fanout_yaml(n):
    points = ", ".join(str(i) for i in range(n))
    return (f"name: fanout\ndefaults: {{gpus: 0}}\nsteps:\n  prepare: {{run: 'true'}}\n"
            f"  work:\n    needs: [prepare]\n    matrix: {{i: [{points}]}}\n    run: 'true'\n"
            f"  report: {{needs: [work], run: 'true'}}\n")


def chain_yaml(n):
    lines = ["name: chain", "defaults: {gpus: 0}", "steps:"]
    for i in range(n):
        needs = f", needs: [s{i - 1}]" if i > 0 else ""
        lines.append(f"  s{i}: {{run: 'true'{needs}}}")
    return "\n".join(lines) + "\n"


def measure(daemon, name, yaml, timeout):
    cpu0 = daemon.cpu_seconds()
    t0 = time.monotonic()
    created = daemon.call("POST", "/v1/pipelines", {"yaml": yaml, "source": f"{name}.yaml", "base_dir": "/"})
    t1 = time.monotonic()
    while True:
        runs = daemon.call("GET", "/v1/pipelines?all=1")["pipelines"]
        run = next(r for r in runs if r["id"] == created["id"])
        if run["state"] != "running":
            break
        if time.monotonic() - t0 > timeout:
            sys.exit(f"{name}: not done after {timeout} s: {run['nodes']}")
        time.sleep(0.2)
    t2 = time.monotonic()
    if run["state"] != "completed":
        sys.exit(f"{name}: the run ended {run['state']}: {run['nodes']}")
    return created["nodes"], t1 - t0, t2 - t0, daemon.cpu_seconds() - cpu0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpuherd", default=os.environ.get("GPUHERD", "build/gpuherd"))
    p.add_argument("--fanout", type=int, default=9998, help="sweep points (default 9998: 10,000 nodes)")
    p.add_argument("--chain", type=int, default=100, help="steps of the chain (default 100)")
    p.add_argument("--timeout", type=float, default=1800)
    a = p.parse_args(argv)
    home = tempfile.mkdtemp(prefix="gpuherd-pipeline-bench-")
    daemon = Daemon(os.path.abspath(a.gpuherd), home)
    try:
        rows = []
        for name, yaml in (("fan-out", fanout_yaml(a.fanout)), ("chain", chain_yaml(a.chain))):
            print(f"running {name} ...", file=sys.stderr)
            rows.append((name, *measure(daemon, name, yaml, a.timeout)))
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)
    print("| pipeline | nodes | POST (plan, store) | to the end | plan per step | wall per step "
          "| daemon CPU per step |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, nodes, plan_s, total_s, cpu_s in rows:
        print(f"| {name} | {nodes:,} | {plan_s:.2f} s | {total_s:.1f} s | {plan_s / nodes * 1e3:.3f} ms "
              f"| {total_s / nodes * 1e3:.2f} ms | {cpu_s / nodes * 1e3:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
