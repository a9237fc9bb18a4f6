#!/usr/bin/env python3
"""The same pipeline of trivial steps through the local backend and through the
Slurm backend, in one run on one machine.

    bench/pipeline/slurm_vs_local.py [--gpuherd build/gpuherd] [--steps 1000] [--gpus 1]

Starts a private single-node Slurm on localhost (bench/queue/slurm_up.sh: munged,
slurmctld and slurmd as root, 8 GPUs as gres, tuned for throughput) and one gpuherd
daemon on a simulated fleet of 8 GPUs with the Slurm backend enabled. Then runs a
sweep of STEPS points of `true` (each asking for GPUS GPUs) with `backend: local`,
then the same with `backend: slurm`, and prints a Markdown table: wall time from the
POST to the run's end, steps per second, and the ratio local / Slurm. Stops Slurm at
the end, also on failure. Needs root, slurm-wlm and munge. Standard library only.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def pipeline(backend, steps, gpus):
    points = ", ".join(str(i) for i in range(steps))
    return (f"name: trivial-{backend}\nbackend: {backend}\n"
            f"steps:\n  t:\n    gpus: {gpus}\n    matrix: {{i: [{points}]}}\n    run: [\"true\"]\n")


class Daemon:
    def __init__(self, binary, home, shared):
        self.log = open(os.path.join(home, "daemon.out"), "w")
        self.proc = subprocess.Popen([binary, "--home", home, "daemon", "--sim", "8", "--port", "0",
                                      "--interval", "1s", "--slurm-shared-dir", shared, "--slurm-poll", "250ms"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(home, "api-port")):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the daemon did not start; see {home}/daemon.out")
            time.sleep(0.1)
        with open(os.path.join(home, "api-port")) as f:
            self.port = int(f.read())
        with open(os.path.join(home, "api-token")) as f:
            self.token = f.read().strip()

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def measure(daemon, backend, steps, gpus, timeout):
    start = time.monotonic()
    run_id = daemon.call("POST", "/v1/pipelines", {"yaml": pipeline(backend, steps, gpus), "source": "bench.yaml",
                                                   "base_dir": "/tmp"})["id"]
    posted = time.monotonic() - start
    while True:
        run = daemon.call("GET", f"/v1/pipelines/{run_id}")
        if run["state"] != "running":
            break
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"{backend}: not done after {timeout} s ({run['nodes']})")
        time.sleep(0.25)
    wall = time.monotonic() - start
    if run["state"] != "completed":
        raise RuntimeError(f"{backend}: the run ended {run['state']}: {run['nodes']}")
    print(f"{backend}: {steps} steps in {wall:.1f} s (POST {posted:.2f} s)", file=sys.stderr)
    return wall, posted


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpuherd", default=os.environ.get("GPUHERD", os.path.join(ROOT, "build", "gpuherd")))
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--gpus", default="1", help="GPUs per step: 1, or 0.1 for a shard")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per backend")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("slurm_vs_local: run as root (slurmd starts the jobs); needs slurm-wlm and munge")
    work = tempfile.mkdtemp(prefix="gpuherd-slurm-bench-")
    os.chmod(work, 0o755)  # munged (user munge) must reach its socket below
    slurm_dir = os.path.join(work, "slurm")
    home = os.path.join(work, "home")
    os.makedirs(home)
    env = dict(os.environ, QBENCH_SLURM_PORT=os.environ.get("QBENCH_SLURM_PORT", "16917"))
    daemon = None
    try:
        subprocess.run([os.path.join(ROOT, "bench", "queue", "slurm_up.sh"), slurm_dir], env=env, check=True,
                       timeout=180)
        os.environ["SLURM_CONF"] = os.path.join(slurm_dir, "slurm.conf")
        daemon = Daemon(args.gpuherd, home, os.path.join(work, "shared"))
        local_wall, local_post = measure(daemon, "local", args.steps, args.gpus, args.timeout)
        slurm_wall, slurm_post = measure(daemon, "slurm", args.steps, args.gpus, args.timeout)
    finally:
        if daemon:
            daemon.stop()
        subprocess.run([os.path.join(ROOT, "bench", "queue", "slurm_down.sh"), slurm_dir], timeout=300)
        shutil.rmtree(work, ignore_errors=True)
    print(f"| backend | steps | POST (s) | wall (s) | steps/s |")
    print(f"|---|---:|---:|---:|---:|")
    print(f"| local | {args.steps} | {local_post:.2f} | {local_wall:.1f} | {args.steps / local_wall:.1f} |")
    print(f"| slurm | {args.steps} | {slurm_post:.2f} | {slurm_wall:.1f} | {args.steps / slurm_wall:.2f} |")
    print(f"\nlocal / Slurm: {slurm_wall / local_wall:.1f}x (gpus per step: {args.gpus}, "
          f"{os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
