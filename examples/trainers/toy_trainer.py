#!/usr/bin/env python3
"""A CPU-only toy trainer that follows gpuherd's job protocol, standard library only.

It trains a small MLP (2 inputs, a tanh hidden layer, a sigmoid output) with minibatch
SGD on a seeded two-spirals data set (one turn each), logs {"step", "loss", "acc"} every
step through gpuherd_job.log_metrics, and checkpoints the weights, the data cursor and
the random state every K steps, on SIGUSR1 and on SIGTERM. A restarted run continues exactly where
the checkpoint left off, so its result.json is identical, bit for bit, to that of a run
that was never interrupted.

    toy_trainer.py --lr 0.1 --steps 300 --seed 1 [--batch 16] [--hidden 12]
                   [--checkpoint-every 25] [--fail-at STEP] [--step-seconds F] [--out DIR]

Checkpoints go to GPUHERD_CHECKPOINT_DIR (else --out); result.json goes to --out (else
GPUHERD_CHECKPOINT_DIR). --fail-at STEP injects one failure: the first time step STEP is
about to run on a first attempt (GPUHERD_RESTART_COUNT unset or 0) with no marker of an
earlier injection in the checkpoint or --out directory, it writes that marker and exits 1.

Exit status: 0 done, 1 injected failure, 2 bad arguments or a checkpoint written with
other arguments, 143 checkpointed and stopped on SIGTERM.
"""
import argparse
import hashlib
import json
import math
import os
import random
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "helpers", "python"))
import gpuherd_job as job  # noqa: E402  (found beside the repository, or via PYTHONPATH)

TRAIN_POINTS = 256
TEST_POINTS = 128
# Input noise drawn afresh for every sample of every step, so that a resumed run is only
# identical when the random state really was restored.
AUGMENT_SIGMA = 0.02


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lr", type=float, required=True, help="SGD learning rate")
    p.add_argument("--steps", type=int, required=True, help="optimizer steps in all")
    p.add_argument("--seed", type=int, required=True, help="seeds the data set, the weights and the shuffles")
    p.add_argument("--batch", type=int, default=16, help="minibatch size (default 16)")
    p.add_argument("--hidden", type=int, default=12, help="hidden units (default 12)")
    p.add_argument("--checkpoint-every", type=int, default=25, metavar="K",
                   help="checkpoint every K steps (default 25)")
    p.add_argument("--fail-at", type=int, metavar="STEP", help="exit 1 once, before step STEP")
    p.add_argument("--step-seconds", type=float, default=0.0, metavar="F",
                   help="sleep F seconds per step, to make a run last (default 0)")
    p.add_argument("--out", help="where result.json goes (default GPUHERD_CHECKPOINT_DIR)")
    a = p.parse_args(argv)
    for name in ("steps", "batch", "hidden", "checkpoint_every"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be a positive integer")
    if not (a.lr > 0 and math.isfinite(a.lr)):
        p.error("--lr must be a positive number")
    if a.batch > TRAIN_POINTS:
        p.error(f"--batch must be at most {TRAIN_POINTS}, the size of the training set")
    if a.out is None and job.checkpoint_dir() is None:
        p.error("give --out DIR (or run under gpuherd, which sets GPUHERD_CHECKPOINT_DIR)")
    return a


def make_spirals(rng, n):
    """Two interleaved spirals, labels 0 and 1, in about [-1, 1]^2."""
    points = []
    for i in range(n):
        label = i % 2
        t = rng.uniform(0.25, 1.0)
        angle = 2.0 * math.pi * t + math.pi * label
        x = t * math.cos(angle) + rng.gauss(0.0, 0.03)
        y = t * math.sin(angle) + rng.gauss(0.0, 0.03)
        points.append((x, y, label))
    return points


def init_model(hidden):
    """Weights drawn from the global random module (seeded in main)."""
    scale = 1.0 / math.sqrt(2.0)
    return {
        "w1": [[random.gauss(0.0, scale) for _ in range(2)] for _ in range(hidden)],
        "b1": [0.0] * hidden,
        "w2": [random.gauss(0.0, 1.0 / math.sqrt(hidden)) for _ in range(hidden)],
        "b2": 0.0,
    }


def forward(model, x, y):
    h = [math.tanh(w[0] * x + w[1] * y + b) for w, b in zip(model["w1"], model["b1"])]
    z = sum(w * v for w, v in zip(model["w2"], h)) + model["b2"]
    return h, z


def sigmoid(z):
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def bce(z, label):
    """Binary cross-entropy of a logit, computed without overflow."""
    return max(z, 0.0) - z * label + math.log1p(math.exp(-abs(z)))


def sgd_step(model, batch, lr):
    """One SGD step on the batch; returns the batch's mean loss before the step."""
    hidden = len(model["b1"])
    g_w1 = [[0.0, 0.0] for _ in range(hidden)]
    g_b1 = [0.0] * hidden
    g_w2 = [0.0] * hidden
    g_b2 = 0.0
    loss = 0.0
    for x, y, label in batch:
        h, z = forward(model, x, y)
        loss += bce(z, label)
        dz = sigmoid(z) - label
        g_b2 += dz
        for j in range(hidden):
            g_w2[j] += dz * h[j]
            dh = dz * model["w2"][j] * (1.0 - h[j] * h[j])
            g_w1[j][0] += dh * x
            g_w1[j][1] += dh * y
            g_b1[j] += dh
    k = lr / len(batch)
    for j in range(hidden):
        model["w1"][j][0] -= k * g_w1[j][0]
        model["w1"][j][1] -= k * g_w1[j][1]
        model["b1"][j] -= k * g_b1[j]
        model["w2"][j] -= k * g_w2[j]
    model["b2"] -= k * g_b2
    return loss / len(batch)


def evaluate(model, points):
    """(mean loss, accuracy) over the points."""
    loss, correct = 0.0, 0
    for x, y, label in points:
        _, z = forward(model, x, y)
        loss += bce(z, label)
        correct += int((z >= 0.0) == (label == 1))
    return loss / len(points), correct / len(points)


def next_batch(state, train, size):
    """The next minibatch; reshuffles (global random) at each epoch's end. The cursor
    (epoch, position, order) lives in `state`, so it is checkpointed with the model."""
    cursor = state["cursor"]
    batch = []
    while len(batch) < size:
        if cursor["pos"] >= len(cursor["order"]):
            cursor["epoch"] += 1
            cursor["pos"] = 0
            random.shuffle(cursor["order"])
        x, y, label = train[cursor["order"][cursor["pos"]]]
        batch.append((x + random.gauss(0.0, AUGMENT_SIGMA), y + random.gauss(0.0, AUGMENT_SIGMA), label))
        cursor["pos"] += 1
    return batch


def weights_sha256(model):
    values = [v for row in model["w1"] for v in row] + model["b1"] + model["w2"] + [model["b2"]]
    return hashlib.sha256(struct.pack(f"<{len(values)}d", *values)).hexdigest()


def write_json_atomically(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv):
    args = parse_args(argv)
    job.install_signal_handlers()  # before any work, so an early SIGTERM is not fatal
    ckpt_dir = job.checkpoint_dir() or args.out
    out_dir = args.out or ckpt_dir
    os.makedirs(ckpt_dir, exist_ok=True)
    os.makedirs(out_dir, exist_ok=True)
    config = {"lr": args.lr, "steps": args.steps, "seed": args.seed, "batch": args.batch,
              "hidden": args.hidden}

    data_rng = random.Random(f"toy-spirals-{args.seed}")
    train = make_spirals(data_rng, TRAIN_POINTS)
    test = make_spirals(data_rng, TEST_POINTS)

    try:
        state = job.load_checkpoint(ckpt_dir)  # also restores the global random state
    except ValueError as e:
        print(f"toy_trainer: {e}", file=sys.stderr)
        return 2
    if state is not None:
        if state["config"] != config:
            print(f"toy_trainer: the checkpoint in {ckpt_dir} was written with {state['config']}, "
                  f"not {config}; use another --out or delete {job.CHECKPOINT_FILE} there",
                  file=sys.stderr)
            return 2
        print(f"resuming at step {state['step']} of {args.steps} "
              f"(restart {job.restart_count()}, GPUHERD_RESUME={int(job.resuming())})", flush=True)
    else:
        random.seed(f"toy-train-{args.seed}")
        state = {"config": config, "step": 0, "best_acc": 0.0, "model": init_model(args.hidden),
                 "cursor": {"epoch": 0, "pos": 0, "order": list(range(TRAIN_POINTS))}}
        random.shuffle(state["cursor"]["order"])
        print(f"starting: {config}", flush=True)

    # The marker goes into --out too, so that a retry that comes as a new job with a new
    # checkpoint directory (but the same --out) does not fail again.
    markers = {os.path.join(d, f"injected-failure-at-{args.fail_at}") for d in (ckpt_dir, out_dir)}
    while state["step"] < args.steps:
        step = state["step"] + 1
        if args.fail_at == step and job.restart_count() == 0 and not any(map(os.path.exists, markers)):
            for marker in markers:
                with open(marker, "w") as f:
                    f.write(f"{os.getpid()} {time.time():.3f}\n")
            print(f"toy_trainer: injected failure before step {step} (--fail-at)",
                  file=sys.stderr, flush=True)
            return 1
        loss = sgd_step(state["model"], next_batch(state, train, args.batch), args.lr)
        _, acc = evaluate(state["model"], test)
        state["step"] = step
        state["best_acc"] = max(state["best_acc"], acc)
        job.log_metrics(step=step, loss=loss, acc=acc)
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
        if step % args.checkpoint_every == 0 or job.should_checkpoint():
            job.save_checkpoint(state, ckpt_dir)
        if job.should_exit():
            print(f"stopped at step {step} on SIGTERM, checkpointed", flush=True)
            return job.EXIT_STOPPED

    job.save_checkpoint(state, ckpt_dir)  # a rerun then finds the work done
    final_loss, final_acc = evaluate(state["model"], test)
    result = dict(config, final_loss=final_loss, final_acc=final_acc, best_acc=state["best_acc"],
                  weights_sha256=weights_sha256(state["model"]))
    write_json_atomically(os.path.join(out_dir, "result.json"), result)
    print(f"done: step {state['step']}, loss {final_loss:.4f}, acc {final_acc:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
