#!/usr/bin/env python3
"""A deep queue costs nothing while nothing changes.

    bench/queue/deep_queue.py [--pending N] [--gpuherd PATH ...] [--idle-seconds S] [--no-history]

For each gpuherd binary given (the first is "before", the last "after" when
two are given; default: build/gpuherd), on a fresh home with `--sim 8`:

1. submit latency on an empty queue: the median of 25 `submit -- true`
   (each waits until the daemon has committed the job);
2. 8 jobs of `sleep 3600` fill the 8 GPUs, then one `submit --array N`
   (default 20,000) queues N pending jobs behind them;
3. the idle daemon's CPU over S seconds (default 20), from /proc/PID/stat;
4. submit latency with the deep queue: the median of 25 more submissions;
5. `ps` of everything unfinished: the median of 9 runs, wall time of the
   client until its output is complete; the same for `ps --json`;
6. one `gpuherd cancel` of the N pending array jobs (one request), wall time.

Then, unless --no-history, the dashboard's longest range: a daemon on the
64 simulated GPUs of examples/scenarios/big-box-64.yaml whose store holds a
full week of per-minute rollups for every GPU (645,120 rows), asked for
GET /v1/gpus/history?seconds=604800 (and 86400) while a prober asks
/v1/health, which the event loop answers, every 10 ms: the range's own time
and the longest /v1/health took meanwhile (how long the loop was held).

Prints Markdown tables on stdout, progress on stderr. Exits 1 when a daemon
could not be started or a command failed, 2 on bad usage.
"""
import argparse
import http.client
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
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
        array_out, array_s = run(binary, home, "submit", "--array", str(pending), "--gpus", "1", "--name", "deep",
                                 "--", "true")
        array_ids = array_out.split()
        if len(array_ids) != pending:
            raise RuntimeError(f"submit --array {pending} printed {len(array_ids)} ids")
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
        ps_json = [run(binary, home, "ps", "--json")[1] for _ in range(9)]
        log(f"{binary}: cancelling the {pending} array jobs in one request")
        _, cancel_s = run(binary, home, "cancel", "--quiet", *array_ids)
        return {
            "ps_json_ms": median_ms(ps_json),
            "cancel_s": cancel_s,
            "empty_ms": median_ms(empty),
            "deep_ms": median_ms(deep),
            "idle_core": idle,
            "ps_ms": median_ms(ps),
            "ps_lines": lines,
            "array_s": array_s,
            "rss_kib": rss_kib(daemon.pid),
        }
    finally:
        # Jobs outlive a stopped daemon (the next one adopts them): the
        # `sleep 3600` jobs are cancelled first, by the daemon that knows them.
        subprocess.run([binary, "--home", home, "cancel", "--quiet", "--all"], capture_output=True, timeout=120)
        deadline = time.time() + 30
        while time.time() < deadline:
            out = subprocess.run([binary, "--home", home, "ps", "--json"], capture_output=True, text=True)
            if out.returncode != 0 or out.stdout.strip() == "[]":
                break
            time.sleep(0.2)
        subprocess.run([binary, "--home", home, "stop"], capture_output=True, timeout=60)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
        shutil.rmtree(work, ignore_errors=True)


class UnixHttp(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def get(sock, target):
    """Seconds to answer GET target over the daemon's unix socket, and the status."""
    conn = UnixHttp(sock)
    t0 = time.perf_counter()
    conn.request("GET", target)
    response = conn.getresponse()
    response.read()
    conn.close()
    return time.perf_counter() - t0, response.status


def start_daemon(binary, home, log_path, *args):
    daemon = subprocess.Popen([binary, "--home", home, "daemon", "--port", "0", *args],
                              stdout=open(log_path, "a"), stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while subprocess.run([binary, "--home", home, "status"], capture_output=True).returncode != 0:
        if time.time() > deadline or daemon.poll() is not None:
            raise RuntimeError("the daemon did not start; see " + log_path)
        time.sleep(0.1)
    return daemon


def stop_daemon(binary, home, daemon):
    subprocess.run([binary, "--home", home, "stop"], capture_output=True, timeout=60)
    try:
        daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()


def fill_week(db_path):
    """A full week of per-minute rollups for every GPU the daemon stored."""
    db = sqlite3.connect(db_path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(rollups)")]
    now_min = int(time.time()) // 60
    start = (now_min - 7 * 1440) * 60000
    names, values = [], []
    for c in columns:
        if c in ("uuid", "minute"):
            continue
        names.append(c)
        if c.endswith("_min") or c.endswith("_mean") or c.endswith("_max"):
            values.append("(m.i % 100) + 0.5")
        elif c == "samples":
            values.append("12")
        else:
            values.append("0")
    db.execute(f"WITH RECURSIVE m(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM m WHERE i < {7 * 1440 - 1}) "
               f"INSERT OR IGNORE INTO rollups (uuid, minute, {', '.join(names)}) "
               f"SELECT g.uuid, {start} + m.i * 60000, {', '.join(values)} FROM gpus g, m")
    db.commit()
    rows = db.execute("SELECT count(*) FROM rollups").fetchone()[0]
    db.close()
    return rows


def measure_history(binary, scenario):
    work = tempfile.mkdtemp(prefix="deep_queue_history.")
    home = os.path.join(work, "home")
    log_path = os.path.join(work, "daemon.log")
    try:
        stop_daemon(binary, home, start_daemon(binary, home, log_path, "--scenario", scenario))
        rows = fill_week(os.path.join(home, "state.db"))
        daemon = start_daemon(binary, home, log_path, "--scenario", scenario)
        sock = os.path.join(home, "gpuherd.sock")
        result = {"rows": rows}
        try:
            for seconds in (86400, 604800):
                get(sock, f"/v1/gpus/history?seconds={seconds}")  # warm the page cache
                answer = []
                reader = threading.Thread(target=lambda: answer.append(get(sock, f"/v1/gpus/history?seconds={seconds}")))
                reader.start()
                probes = []
                while reader.is_alive():
                    probes.append(get(sock, "/v1/health")[0])
                    time.sleep(0.01)
                reader.join()
                if not answer or answer[0][1] != 200:
                    raise RuntimeError(f"/v1/gpus/history?seconds={seconds} failed")
                result[seconds] = {"range_ms": answer[0][0] * 1000, "held_ms": max(probes) * 1000,
                                   "probes": len(probes)}
        finally:
            stop_daemon(binary, home, daemon)
        return result
    finally:
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
    parser.add_argument("--no-history", action="store_true", help="leave out the dashboard's week-long range")
    args = parser.parse_args()
    scenario = os.path.join(here, "..", "..", "examples", "scenarios", "big-box-64.yaml")
    binaries = args.gpuherd or [os.path.join(here, "..", "..", "build", "gpuherd")]
    if args.pending < 1 or args.idle_seconds <= 0:
        parser.error("--pending and --idle-seconds take positive numbers")
    for b in binaries:
        if not os.access(b, os.X_OK):
            parser.error(f"no gpuherd binary at '{b}'")
    results = []
    histories = []
    for b in binaries:
        try:
            results.append((b, measure(b, args.pending, args.idle_seconds)))
            if not args.no_history:
                log(f"{b}: a week of minutes for 64 GPUs, then the dashboard's long ranges")
                histories.append((b, measure_history(b, scenario)))
        except (RuntimeError, subprocess.TimeoutExpired, sqlite3.Error) as e:
            log(f"{b}: {e}")
            return 1
    print(f"8 simulated GPUs busy, {args.pending:,} jobs pending; medians of 25 submits and 9 `ps`.\n")
    print(f"Load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
    print("| binary | submit, empty queue | submit, deep queue | deep / empty | idle daemon CPU | "
          "`ps` (unfinished jobs) | `ps --json` | one `cancel` of the pending | daemon RSS | `--array` submission |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for b, r in results:
        print(f"| {b} | {r['empty_ms']:.1f} ms | {r['deep_ms']:.1f} ms | {r['deep_ms'] / r['empty_ms']:.2f}x | "
              f"{100 * r['idle_core']:.2f}% of a core | {r['ps_ms']:.0f} ms ({r['ps_lines']:,} lines) | "
              f"{r['ps_json_ms']:.0f} ms | {r['cancel_s']:.2f} s | {r['rss_kib'] / 1024:.0f} MiB | "
              f"{r['array_s']:.1f} s |")
    if histories:
        print(f"\nThe dashboard's long ranges: 64 simulated GPUs, a week of minutes stored "
              f"({histories[0][1]['rows']:,} rollup rows); /v1/health probed every 10 ms meanwhile.\n")
        print("| binary | range | answered in | longest /v1/health meanwhile (loop held) |")
        print("|---|---|---|---|")
        for b, h in histories:
            for seconds, name in ((86400, "24 h"), (604800, "7 d")):
                print(f"| {b} | {name} | {h[seconds]['range_ms']:.0f} ms | {h[seconds]['held_ms']:.0f} ms "
                      f"({h[seconds]['probes']} probes) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
