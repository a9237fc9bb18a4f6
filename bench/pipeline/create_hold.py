#!/usr/bin/env python3
"""How long creating a 10,000-node pipeline holds the daemon's event loop.

    bench/pipeline/create_hold.py [--gpuherd build/gpuherd] [--points 9999] [--rounds 3]

A fresh --home with a simulated fleet. While one thread POSTs a pipeline of a
`prepare` step and a sweep of POINTS points that need it (POINTS + 1 nodes, so
only `prepare` is submitted at once), another sends GET /v1/jobs, which runs on
the event loop, back to back. A probe's time is how long the loop kept it
waiting (a probe on an idle loop answers in about a millisecond), so the longest
probe during the POST is the loop's longest hold. The folders of every node
(workspace, artifacts, checkpoints) are made while it runs; the script checks
that they all exist before the next round. The run's folder is found from
--home, not asked of the daemon: reading a 10,000-node run back (GET
/v1/pipelines/ID) is measured apart, after the folders are made, with its
time and the longest probe while it ran. Prints a Markdown table per round.
Standard library only.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_bench import Daemon  # noqa: E402


def sweep_yaml(n):
    points = ", ".join(str(i) for i in range(n))
    return (f"name: hold\ndefaults: {{gpus: 0}}\nsteps:\n  prepare: {{run: 'sleep 600'}}\n"
            f"  work:\n    needs: [prepare]\n    matrix: {{i: [{points}]}}\n    run: 'true'\n")


def one_round(daemon, yaml, points):
    probes = []
    done = threading.Event()

    def probe():
        while not done.is_set():
            t = time.monotonic()
            daemon.call("GET", "/v1/jobs")
            probes.append((t, time.monotonic() - t))

    prober = threading.Thread(target=probe)
    prober.start()
    time.sleep(0.3)  # a few probes of the idle loop first
    t0 = time.monotonic()
    created = daemon.call("POST", "/v1/pipelines", {"yaml": yaml, "source": "hold.yaml", "base_dir": "/"})
    post_s = time.monotonic() - t0
    # Until every folder is made (off the loop, it may outlast the POST).
    run_dir = os.path.join(daemon.home, "pipelines", str(created["id"]))
    deadline = time.monotonic() + 600
    while not os.path.isdir(os.path.join(run_dir, "work", str(points - 1))) and time.monotonic() < deadline:
        time.sleep(0.05)
    folders_s = time.monotonic() - t0
    time.sleep(0.3)
    created_probes = [d for _, d in probes]
    t = time.monotonic()
    shown = daemon.call("GET", f"/v1/pipelines/{created['id']}")
    show_end = time.monotonic()
    time.sleep(0.1)
    done.set()
    prober.join()
    # The probes that were waiting at some time during the GET.
    show_hold = max([d for start, d in probes if start < show_end and start + d > t] or [0])
    missing = [i for i in range(points) if not os.path.isdir(os.path.join(run_dir, "work", str(i)))]
    if missing:
        sys.exit(f"{len(missing)} workspaces were not made (the first: work/{missing[0]})")
    if shown["run_dir"] != run_dir or len(shown["nodes"]) != points + 1:
        sys.exit(f"the run read back has {len(shown['nodes'])} nodes in {shown['run_dir']}")
    daemon.call("POST", f"/v1/pipelines/{created['id']}/cancel", {})
    return (created["nodes"], post_s, folders_s, max(created_probes), statistics.median(created_probes),
            len(created_probes), show_end - t, show_hold)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpuherd", default=os.environ.get("GPUHERD", "build/gpuherd"))
    p.add_argument("--points", type=int, default=9999, help="sweep points (default 9999: 10,000 nodes)")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    home = tempfile.mkdtemp(prefix="gpuherd-create-hold-")
    daemon = Daemon(os.path.abspath(a.gpuherd), home)
    rows = []
    try:
        yaml = sweep_yaml(a.points)
        for _ in range(a.rounds):
            rows.append(one_round(daemon, yaml, a.points))
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)
    print("| round | nodes | POST answered | every folder made | longest loop hold (probe) | median probe | probes "
          "| GET of the run | longest probe during the GET |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, (nodes, post_s, folders_s, longest, median, count, show_s, show_hold) in enumerate(rows, 1):
        print(f"| {i} | {nodes:,} | {post_s * 1e3:.0f} ms | {folders_s * 1e3:.0f} ms | {longest * 1e3:.0f} ms "
              f"| {median * 1e3:.1f} ms | {count} | {show_s * 1e3:.0f} ms | {show_hold * 1e3:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
