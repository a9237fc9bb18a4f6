#!/usr/bin/env python3
"""The client side by side with task-spooler's, in one run on this machine.

  bench/queue/client_bench.py [--gpuherd build/gpuherd ...] [--rounds 300] [--jobs 1000]

1. Latency: `gpuherd submit -- true` against `tsp true`, one at a time,
   alternating (so both see the same load), --rounds of each after a warm-up:
   median and 90th percentile wall time of the client process, from spawn to
   exit. gpuherd's job is committed to SQLite (WAL, synchronous=FULL) before
   the client returns; task-spooler keeps its queue in memory.
2. Throughput: --jobs submissions of `true`, one client process each, 8 at a
   time (task-spooler: 8 slots; gpuherd: --gpus 1 on 8 simulated GPUs), for
   each queue in turn: submissions/s (until the last client returned) and
   jobs/s (until the last job ended, seen by a poller every 20 ms).

3. Queued only: the same submissions with nothing started (gpuherd's GPUs
   drained; task-spooler with 1 slot held by a `sleep`), which shows what
   the submission path alone allows when no job competes for the CPU; at
   most 900 (task-spooler's server holds at most 1,000 waiting jobs).

4. CPU per job of gpuherd's daemon and everything it starts (its launcher, the
   shims, the jobs): `perf stat` counts the daemon's process tree with
   inherited counters, divided by every job submitted in the run (when perf is
   installed).

--variant VAR=VALUE measures each binary twice, first with VAR=VALUE in the
daemon's environment (e.g. GPUHERD_SHIM_FORK_SERVER=0 for a shim exec'd per
job), then without it, a row each, in the same run.

Prints Markdown tables with the ratios (gpuherd / task-spooler: latency below
1 is faster, rates above 1 are faster). Given --gpuherd more than once (a
build before a change, then after), each binary is measured in turn against
a task-spooler server of its own, all in the same run, a row each. The work
folders are removed only at the end: on ext4 without a journal each inode
freed in the last minutes is skipped by every later allocation in its group,
so deleting one measurement's thousands of files would slow the next one's. Installs task-spooler with apt when
neither `tsp` nor `ts` is found (as root). Compare within one run: on a
shared machine the absolute figures move with the load, the ratios far less.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CLIENTS = 8


def log(message):
    print(f"[client_bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def find_tsp():
    for name in ("tsp", "ts"):
        path = shutil.which(name)
        # moreutils also ships a `ts` (a timestamp filter): task-spooler's answers -V.
        if path and subprocess.run([path, "-V"], capture_output=True, text=True).returncode == 0:
            return path
    if os.geteuid() != 0:
        sys.exit("client_bench: task-spooler is not installed; run as root to install it with apt")
    log("installing task-spooler")
    subprocess.run(["apt-get", "update", "-qq"], check=False, stdout=subprocess.DEVNULL)
    done = subprocess.run(["apt-get", "install", "-y", "-qq", "task-spooler"],
                          env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit("client_bench: apt-get install task-spooler failed")
    return find_tsp()


def spawn_wait(argv, env):
    """Wall seconds from spawning `argv` to its exit (posix_spawn: no fork of
    this Python process, so the harness adds little and the same to both)."""
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status = os.waitpid(pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}")
    return took


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


class Queues:
    def __init__(self, gpuherd, tsp, work, variant=None):
        self.gpuherd, self.tsp, self.work = gpuherd, tsp, work
        self.home = os.path.join(work, "home")
        self.env = dict(os.environ, GPUHERD_HOME=self.home, TS_SOCKET=os.path.join(work, "ts.socket"),
                        TS_MAXFINISHED="1000000", TMPDIR=work, NO_COLOR="1")
        self.daemon_env = dict(self.env, **(dict([variant.split("=", 1)]) if variant else {}))
        self.perf_out = os.path.join(work, "daemon.perf") if shutil.which("perf") else None
        self.daemon = None

    def start(self):
        os.makedirs(self.home)
        out = open(os.path.join(self.work, "daemon.log"), "w")
        perf = ["perf", "stat", "-x,", "-e", "task-clock", "-o", self.perf_out, "--"] if self.perf_out else []
        self.daemon = subprocess.Popen(perf + [self.gpuherd, "daemon", "--sim", str(CLIENTS), "--port", "0"],
                                       env=self.daemon_env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while subprocess.run([self.gpuherd, "status"], env=self.env, capture_output=True).returncode != 0:
            if time.time() > deadline or self.daemon.poll() is not None:
                sys.exit("client_bench: the gpuherd daemon did not start; see " + out.name)
            time.sleep(0.1)
        subprocess.run([self.tsp, "-S", str(CLIENTS)], env=self.env, check=True)

    def stop(self):
        # The queued-only row's `sleep` still runs: its runner outlives the
        # server (-K), so it is killed first (-k; an error when none runs).
        subprocess.run([self.tsp, "-k"], env=self.env, capture_output=True, timeout=30)
        subprocess.run([self.tsp, "-K"], env=self.env, capture_output=True)
        if self.daemon and self.daemon.poll() is None:
            subprocess.run([self.gpuherd, "stop"], env=self.env, capture_output=True, timeout=30)
            try:
                self.daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()

    def daemon_tree_cpu_ms(self):
        """CPU ms of the daemon and all it started, from perf stat; None without it."""
        try:
            for line in open(self.perf_out):
                fields = line.strip().split(",")
                if len(fields) > 2 and fields[2] == "task-clock":
                    return float(fields[0])
        except (OSError, TypeError, ValueError):
            pass
        return None

    def gpuherd_unfinished(self):
        out = subprocess.run([self.gpuherd, "ps", "--json"], env=self.env, capture_output=True, text=True)
        return len(json.loads(out.stdout)) if out.returncode == 0 else -1

    def tsp_unfinished(self):
        out = subprocess.run([self.tsp, "-l"], env=self.env, capture_output=True, text=True).stdout
        return sum(1 for line in out.splitlines()[1:] if len(line.split()) > 1 and line.split()[1] != "finished")

    def drain(self, unfinished, timeout=600):
        """Seconds until `unfinished` reports 0, polled every 20 ms."""
        deadline = time.time() + timeout
        while unfinished() != 0:
            if time.time() > deadline:
                raise RuntimeError("the queue did not empty in time")
            time.sleep(0.02)
        return time.perf_counter()


def latency(q, rounds):
    submit = [q.gpuherd, "submit", "--", "true"]
    tsp = [q.tsp, "true"]
    for _ in range(20):  # warm-up: page cache, the daemon's first passes
        spawn_wait(submit, q.env)
        spawn_wait(tsp, q.env)
    times = {"gpuherd": [], "tsp": []}
    for i in range(rounds):
        order = [("gpuherd", submit), ("tsp", tsp)]
        if i % 2:
            order.reverse()
        for name, argv in order:
            times[name].append(spawn_wait(argv, q.env))
    q.drain(q.gpuherd_unfinished)
    q.drain(q.tsp_unfinished)
    return times


def throughput(q, jobs, argv, unfinished):
    q.drain(unfinished)
    next_job = iter(range(jobs))
    lock = threading.Lock()
    errors = []

    def client():
        while True:
            with lock:
                if next(next_job, None) is None:
                    return
            try:
                spawn_wait(argv, q.env)
            except RuntimeError as e:
                errors.append(str(e))

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    submitted = time.perf_counter()
    ended = q.drain(unfinished)
    if errors:
        raise RuntimeError(f"{len(errors)} submissions failed, e.g. {errors[0]}")
    return jobs / (submitted - start), jobs / (ended - start)


# A job waiting in task-spooler's queue keeps its client process connected to
# the server, which takes at most 1,000 connections (its MAXCONN; TS_MAXCONN
# can only lower it): a 1,001st waiting job's client blocks until one ends.
# So the queued-only row submits at most this many to each queue.
QUEUED_MAX = 900


def queued_only(q, jobs):
    """Submissions/s of each queue with nothing started: gpuherd's GPUs are
    drained, task-spooler's one slot runs a `sleep`. `jobs`: at most QUEUED_MAX."""
    for gpu in range(CLIENTS):
        subprocess.run([q.gpuherd, "drain", str(gpu), "--reason", "client_bench: queued only"], env=q.env,
                       check=True, capture_output=True)
    g_submit, _ = throughput(q, jobs, [q.gpuherd, "submit", "--gpus", "1", "--", "true"], lambda: 0)
    subprocess.run([q.gpuherd, "cancel", "--all", "--quiet"], env=q.env, check=True, capture_output=True)
    subprocess.run([q.tsp, "-S", "1"], env=q.env, check=True)
    subprocess.run([q.tsp, "sleep", "3600"], env=q.env, check=True, capture_output=True)
    t_submit, _ = throughput(q, jobs, [q.tsp, "true"], lambda: 0)
    return g_submit, t_submit


def measure(gpuherd, tsp, rounds, jobs, work, variant=None):
    q = Queues(gpuherd, tsp, work, variant)
    try:
        q.start()
        log(f"{gpuherd}: latency, {rounds} rounds of each")
        times = latency(q, rounds)
        log(f"{gpuherd}: throughput, {jobs} submissions, {CLIENTS} clients at a time")
        g_submit, g_done = throughput(q, jobs, [gpuherd, "submit", "--gpus", "1", "--", "true"], q.gpuherd_unfinished)
        t_submit, t_done = throughput(q, jobs, [tsp, "true"], q.tsp_unfinished)
        queued = min(jobs, QUEUED_MAX)
        log(f"{gpuherd}: queued only, {queued} submissions, {CLIENTS} clients at a time")
        g_queued, t_queued = queued_only(q, queued)
    finally:
        q.stop()
        tree_ms = q.daemon_tree_cpu_ms()
    submitted = 20 + rounds + jobs + queued  # warm-up, latency rounds, throughput, queued only
    return {
        "tree": tree_ms / submitted if tree_ms is not None else None,
        "g_med": statistics.median(times["gpuherd"]) * 1e3, "t_med": statistics.median(times["tsp"]) * 1e3,
        "g_p90": percentile(times["gpuherd"], 0.9) * 1e3, "t_p90": percentile(times["tsp"], 0.9) * 1e3,
        "g_submit": g_submit, "t_submit": t_submit, "g_done": g_done, "t_done": t_done,
        "g_queued": g_queued, "t_queued": t_queued, "queued": queued,
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpuherd", action="append",
                        help="a gpuherd binary (repeat to compare builds; default build/gpuherd or $GPUHERD)")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--variant", help="VAR=VALUE: also measure each binary with this in the daemon's environment")
    args = parser.parse_args()
    if args.variant and "=" not in args.variant:
        parser.error("--variant takes VAR=VALUE")
    if args.rounds < 1 or args.jobs < 1:
        parser.error("--rounds and --jobs must be positive")
    binaries = [os.path.abspath(b) for b in (args.gpuherd or [os.environ.get(
        "GPUHERD", os.path.join(here, "..", "..", "build", "gpuherd"))])]
    for gpuherd in binaries:
        if not os.access(gpuherd, os.X_OK):
            sys.exit(f"client_bench: no gpuherd binary at {gpuherd}")
    tsp = find_tsp()
    results = []
    works = []
    try:
        for gpuherd in binaries:
            for variant in ([args.variant] if args.variant else []) + [None]:
                works.append(tempfile.mkdtemp(prefix="client-bench."))
                name = f"{gpuherd} ({variant})" if variant else gpuherd
                results.append((name, measure(gpuherd, tsp, args.rounds, args.jobs, works[-1], variant)))
    finally:
        for work in works:
            shutil.rmtree(work, ignore_errors=True)
    print(f"Load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    print("| one submission (ms) | gpuherd submit -- true | tsp true | ratio |")
    print("|---|---|---|---|")
    for gpuherd, r in results:
        name = f"{gpuherd}: " if len(results) > 1 else ""
        print(f"| {name}median | {r['g_med']:.2f} | {r['t_med']:.2f} | {r['g_med'] / r['t_med']:.2f}x |")
        print(f"| {name}90th percentile | {r['g_p90']:.2f} | {r['t_p90']:.2f} | {r['g_p90'] / r['t_p90']:.2f}x |")
    print()
    print(f"| {args.jobs} jobs, {CLIENTS} clients | gpuherd | task-spooler | ratio |")
    print("|---|---|---|---|")
    for gpuherd, r in results:
        name = f"{gpuherd}: " if len(results) > 1 else ""
        print(f"| {name}submissions/s | {r['g_submit']:.0f} | {r['t_submit']:.0f} | "
              f"{r['g_submit'] / r['t_submit']:.2f}x |")
        print(f"| {name}jobs/s (to the last end) | {r['g_done']:.0f} | {r['t_done']:.0f} | "
              f"{r['g_done'] / r['t_done']:.2f}x |")
        print(f"| {name}submissions/s, queued only (nothing started; {r['queued']} jobs) | "
              f"{r['g_queued']:.0f} | "
              f"{r['t_queued']:.0f} | {r['g_queued'] / r['t_queued']:.2f}x |")
    if any(r["tree"] is not None for _, r in results):
        print()
        print("| CPU per job of the daemon's process tree (daemon, launcher, shims, jobs) | ms |")
        print("|---|---:|")
        for gpuherd, r in results:
            if r["tree"] is not None:
                print(f"| {gpuherd} | {r['tree']:.2f} |")


if __name__ == "__main__":
    main()
