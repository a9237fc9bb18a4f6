#!/usr/bin/env python3
"""A deep queue costs nothing while nothing changes.

    bench/queue/deep_queue.py [--pending N] [--gpuherd PATH ...] [--idle-seconds S]

For each gpuherd binary given (the first is "before", the last "after" when
two are given; default: build/gpuherd), on a fresh home with `--sim 8`:

1. submit latency on an empty queue: the median of 25 `submit -- true`
   (each waits until the daemon has committed the job);
2. 8 jobs of `sleep 3600` fill the 8 GPUs, then one `submit --array N`
   (default 20,000) queues N pending jobs behind them;
3. the idle daemon's CPU over S seconds (default 20), from /proc/PID/stat;
4. submit latency with the deep queue: the median of 25 more submissions;
5. `ps` of everything unfinished: the median of 9 runs, wall time of the
   client until its output is complete.

Prints a Markdown table on stdout, progress on stderr. Exits 1 when a daemon
could not be started or a command failed, 2 on bad usage.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[deep_queue {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def run(binary, home, *args, timeout=600):
    t0 = time.perf_counter()
    out = subprocess.run([binary, "--home", home, *args], capture_output=True, text=True, timeout=timeout)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])}: exit {out.returncode}: {out.stderr.strip()[:300]}")
    return out.stdout, elapsed


def median_ms(samples):
    return statistics.median(samples) * 1000


def measure(binary, pending, idle_seconds):
    work = tempfile.mkdtemp(prefix="deep_queue.")
    home = os.path.join(work, "home")
    daemon = subprocess.Popen([binary, "--home", home, "daemon", "--sim", "8", "--port", "0"],
                              stdout=open(os.path.join(work, "daemon.log"), "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:
            if subprocess.run([binary, "--home", home, "status"], capture_output=True).returncode == 0:
                break
            if time.time() > deadline or daemon.poll() is not None:
                raise RuntimeError("the daemon did not start; see " + os.path.join(work, "daemon.log"))
            time.sleep(0.1)
        # Warm-up, then the empty queue (a fraction of a GPU each, so that
        # the GPUs stay free: the queue is empty when each submit arrives).
        run(binary, home, "submit", "--gpus", "0", "--", "true")
        empty = []
        for _ in range(25):
            empty.append(run(binary, home, "submit", "--gpus", "0", "--", "true")[1])
        for _ in range(8):
            run(binary, home, "submit", "--gpus", "1", "--name", "fill", "--", "sleep", "3600")
        log(f"{binary}: queueing {pending} pending jobs")
        _, array_s = run(binary, home, "submit", "--array", str(pending), "--gpus", "1", "--name", "deep", "--",
                         "true")
        time.sleep(3)  # let the submission's own work settle
        c0, t0 = cpu_seconds(daemon.pid), time.time()
        time.sleep(idle_seconds)
        idle = (cpu_seconds(daemon.pid) - c0) / (time.time() - t0)
        deep = []
        for _ in range(25):
            deep.append(run(binary, home, "submit", "--gpus", "1", "--", "true")[1])
        ps = []
        lines = 0
        for _ in range(9):
            out, s = run(binary, home, "ps")
            ps.append(s)
            lines = out.count("\n")
        return {
            "empty_ms": median_ms(empty),
            "deep_ms": median_ms(deep),
            "idle_core": idle,
            "ps_ms": median_ms(ps),
            "ps_lines": lines,
            "array_s": array_s,
            "rss_kib": rss_kib(daemon.pid),
        }
    finally:
        subprocess.run([binary, "--home", home, "stop"], capture_output=True, timeout=60)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
        subprocess.run(["pkill", "-KILL", "-f", f"{home}/"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--gpuherd", action="append", help="a gpuherd binary (repeat to compare)")
    parser.add_argument("--pending", type=int, default=20000)
    parser.add_argument("--idle-seconds", type=float, default=20)
    args = parser.parse_args()
    binaries = args.gpuherd or [os.path.join(here, "..", "..", "build", "gpuherd")]
    if args.pending < 1 or args.idle_seconds <= 0:
        parser.error("--pending and --idle-seconds take positive numbers")
    for b in binaries:
        if not os.access(b, os.X_OK):
            parser.error(f"no gpuherd binary at '{b}'")
    results = []
    for b in binaries:
        try:
            results.append((b, measure(b, args.pending, args.idle_seconds)))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"{b}: {e}")
            return 1
    print(f"8 simulated GPUs busy, {args.pending:,} jobs pending; medians of 25 submits and 9 `ps`.\n")
    print("| binary | submit, empty queue | submit, deep queue | deep / empty | idle daemon CPU | "
          "`ps` (unfinished jobs) | daemon RSS | `--array` submission |")
    print("|---|---|---|---|---|---|---|---|")
    for b, r in results:
        print(f"| {b} | {r['empty_ms']:.1f} ms | {r['deep_ms']:.1f} ms | {r['deep_ms'] / r['empty_ms']:.2f}x | "
              f"{100 * r['idle_core']:.2f}% of a core | {r['ps_ms']:.0f} ms ({r['ps_lines']:,} lines) | "
              f"{r['rss_kib'] / 1024:.0f} MiB | {r['array_s']:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
