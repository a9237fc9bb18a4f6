#!/usr/bin/env python3
"""Finished jobs leave the daemon's memory.

    bench/queue/finished_memory.py [--batches N] [--jobs-per-batch M] [--gpuherd PATH]

A daemon on a fresh home with `--sim 8` runs N batches (default 6) of one
`submit --array M --gpus 1 -- true` each (default 2,000), waits after each
batch until nothing is unfinished, and reads the daemon's resident memory
(VmRSS) then. The first batch warms up the allocator, the SQLite page cache
and the telemetry rings; the growth from the end of the first batch to the
end of the last, over the jobs finished in between, is the memory each
finished job keeps. A daemon that kept finished jobs would grow by the size
of a job's record each time (2.7 KB before the queue kept only unfinished
jobs); one that does not stays flat, within the allocator's noise.

Prints a Markdown table on stdout, progress on stderr. Exits 1 when the
daemon could not be started or a command failed, 2 on bad usage.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import deep_queue  # its daemon start and stop, its run and its RSS reading


def log(msg):
    print(f"[finished_memory {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(binary, home, *args, timeout=600):
    return deep_queue.run(binary, home, *args, timeout=timeout)[0]


def wait_until_idle(binary, home, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if run(binary, home, "ps", "--json").strip() == "[]":
            return
        time.sleep(0.5)
    raise RuntimeError(f"jobs still unfinished after {timeout} s")


def measure(binary, batches, per_batch):
    work = tempfile.mkdtemp(prefix="finished_memory.")
    home = os.path.join(work, "home")
    log_path = os.path.join(work, "daemon.log")
    daemon = deep_queue.start_daemon(binary, home, log_path, "--sim", "8")
    try:
        rows = []
        finished = 0
        for b in range(batches):
            t0 = time.time()
            ids = run(binary, home, "submit", "--array", str(per_batch), "--gpus", "1", "--", "true").split()
            if len(ids) != per_batch:
                raise RuntimeError(f"submit --array {per_batch} printed {len(ids)} ids")
            wait_until_idle(binary, home, timeout=max(120, per_batch // 10))
            finished += per_batch
            time.sleep(1)  # the last exits' bookkeeping
            rows.append((finished, deep_queue.rss_kib(daemon.pid), time.time() - t0))
            log(f"batch {b + 1}: {finished} finished, RSS {rows[-1][1]} KiB, {rows[-1][2]:.1f} s")
        completed = run(binary, home, "ps", "--all", "--state", "completed", "--json")
        return rows, len(json.loads(completed))
    finally:
        deep_queue.stop_daemon(binary, home, daemon)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--gpuherd", default=os.path.join(here, "..", "..", "build", "gpuherd"))
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--jobs-per-batch", type=int, default=2000)
    args = parser.parse_args()
    if args.batches < 2 or args.jobs_per_batch < 1:
        parser.error("--batches takes 2 or more, --jobs-per-batch a positive number")
    if not os.access(args.gpuherd, os.X_OK):
        parser.error(f"no gpuherd binary at '{args.gpuherd}'")
    try:
        rows, listed = measure(args.gpuherd, args.batches, args.jobs_per_batch)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        log(str(e))
        return 1
    print(f"8 simulated GPUs; batches of {args.jobs_per_batch:,} `true` jobs; the daemon's RSS once each "
          f"batch has finished. Load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    print("| jobs finished | daemon RSS | batch took |")
    print("|---:|---:|---:|")
    for finished, rss, seconds in rows:
        print(f"| {finished:,} | {rss / 1024:.1f} MiB | {seconds:.1f} s |")
    grown = rows[-1][1] - rows[0][1]
    jobs = rows[-1][0] - rows[0][0]
    print(f"\nAfter the first batch: {grown:+,} KiB over {jobs:,} more finished jobs, "
          f"{grown * 1024 / jobs:+.0f} bytes per finished job. `ps --all --state completed` "
          f"still lists {listed:,} of them (read from SQLite).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
