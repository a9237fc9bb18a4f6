#!/usr/bin/env python3
"""A resumable job that follows gpuherd's job protocol with the standard library
only: it counts to N, one step at a time, checkpoints its count every K steps,
and on SIGTERM checkpoints and exits. Restarted with GPUHERD_RESUME=1 it goes on
from its checkpoint, so the final count is N however often it was stopped.

    count_steps.py N K [SECONDS_PER_STEP]
"""
import json
import os
import signal
import sys
import time

n, every = int(sys.argv[1]), int(sys.argv[2])
step_seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
ckpt_dir = os.environ.get("GPUHERD_CHECKPOINT_DIR", ".")
ckpt = os.path.join(ckpt_dir, "count.json")
runs = os.path.join(ckpt_dir, "runs.log")  # one line per start and per end: proves runs never overlap
stop = False


def on_sigterm(signum, frame):
    global stop
    stop = True


def save(count):
    tmp = ckpt + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"count": count}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, ckpt)


signal.signal(signal.SIGTERM, on_sigterm)
os.makedirs(ckpt_dir, exist_ok=True)
count = 0
if os.environ.get("GPUHERD_RESUME") == "1" and os.path.exists(ckpt):
    with open(ckpt) as f:
        count = json.load(f)["count"]
with open(runs, "a") as f:
    f.write(f"start {os.getpid()} {time.time():.3f} from {count} gpus={os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n")
print(f"starting at {count} of {n} (restart {os.environ.get('GPUHERD_RESTART_COUNT', '0')})", flush=True)
while count < n and not stop:
    time.sleep(step_seconds)
    count += 1
    if count % every == 0:
        save(count)
save(count)
with open(runs, "a") as f:
    f.write(f"end {os.getpid()} {time.time():.3f} at {count}\n")
print(f"{'stopped' if stop else 'done'} at {count}", flush=True)
sys.exit(0)
