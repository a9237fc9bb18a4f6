#!/usr/bin/env python3
"""A stand-in for training with a known best learning rate: it logs a validation
loss that falls with the steps towards a floor set by the learning rate, lowest at
lr=0.1, so a sweep's early stopping can be checked against the known answer.
Standard library only; on SIGTERM it exits at once (there is nothing to keep).

    lr_curve.py --lr LR --steps N [--step-seconds F] [--metric NAME]

Each step logs {"step", "<metric>": floor(lr) + 0.5 / sqrt(step), "loss": ...} to
GPUHERD_METRICS_FILE and, at the end, its last step to <workspace>/steps.txt.
"""
import argparse
import json
import math
import os
import signal
import sys
import time

stop = False


def on_sigterm(signum, frame):
    global stop
    stop = True


def floor(lr):
    return 0.05 + 0.5 * (math.log10(lr) - math.log10(0.1)) ** 2


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--step-seconds", type=float, default=0.1)
    p.add_argument("--metric", default="val_loss", help="the name the validation loss is logged under")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, on_sigterm)
    path = os.environ.get("GPUHERD_METRICS_FILE", "metrics.jsonl")
    step = 0
    with open(path, "a") as f:
        while step < a.steps and not stop:
            time.sleep(a.step_seconds)
            step += 1
            value = floor(a.lr) + 0.5 / math.sqrt(step)
            f.write(json.dumps({"step": step, a.metric: value, "loss": value * 1.1}) + "\n")
            f.flush()
    print(f"{'stopped' if stop else 'done'} at step {step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
