#!/usr/bin/env python3
"""A 27-point grid of the toy trainer, run in full and with ASHA early stopping on
the same simulated machine: GPU-hours spent and whether the best point is the same.

    bench/pipeline/asha_bench.py [--gpuherd build/gpuherd] [--steps 300] [--step-seconds 0.02]
                                 [--sim 8] [--reduction 3]

Both runs use one fresh daemon (--sim N) one after the other. The grid is 9
learning rates x 3 seeds, one GPU per point; the objective is the test accuracy
(`loss`, min) the trainer logs at every step (its accuracy
saturates at 1.0 for several points, so it cannot tell them apart). ASHA has its first rung at the
trainer's first checkpoint (25 steps) and keeps the top 1/reduction at each rung.
GPU-hours are the daemon's own account (GPUs held x time, every attempt). The best
point is the one with the lowest loss it reached, as the report ranks it.

Then the all-at-once case: examples/pipelines/asha_nine.yaml, nine learning rates
started together at a tenth of a GPU each (ASHA grace 10, reduction 3, 90 steps, the
best at lr=0.1): the steps all points ran, against synchronous successive halving's
6 x 10 + 2 x 30 + 90 = 210.
Standard library only; talks to the daemon over loopback TCP with its API token.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_bench import Daemon  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LRS = [1.0, 0.6, 0.3, 0.2, 0.1, 0.06, 0.03, 0.01, 0.003]
HIDDEN = [6, 12, 24]


def grid_yaml(steps, step_seconds, early_stop):
    lrs = ", ".join(str(x) for x in LRS)
    hidden = ", ".join(str(h) for h in HIDDEN)
    return f"""name: {"asha" if early_stop else "full"}-grid
steps:
  train:
    matrix: {{lr: [{lrs}], hidden: [{hidden}]}}
    objective: {{metric: loss, mode: min}}
{early_stop}    run: >-
      python3 {REPO}/examples/trainers/toy_trainer.py --lr ${{{{ matrix.lr }}}} --hidden ${{{{ matrix.hidden }}}} --seed 1
      --steps {steps} --step-seconds {step_seconds} --out ${{{{ workspace }}}}
    gpus: 1
    checkpoint: {{grace: 10s}}
"""


def wait_done(daemon, run_id, timeout):
    """Polls the run until it ends; its detail and the seconds it took."""
    t0 = time.monotonic()
    while True:
        detail = daemon.call("GET", f"/v1/pipelines/{run_id}")
        if detail["state"] != "running":
            return detail, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            sys.exit(f"not done after {timeout} s")
        time.sleep(0.5)


def run(daemon, yaml, timeout):
    created = daemon.call("POST", "/v1/pipelines", {"yaml": yaml, "source": "grid.yaml", "base_dir": "/"})
    detail, wall = wait_done(daemon, created["id"], timeout)
    metrics = daemon.call("GET", f"/v1/pipelines/{created['id']}/metrics")["metrics"]
    best_loss = {}
    for m in metrics:
        v = m.get("values", {}).get("loss")
        if isinstance(v, (int, float)):
            best_loss[m["node"]] = min(best_loss.get(m["node"], float("inf")), v)
    nodes = detail["nodes"]
    best = min(best_loss, key=lambda n: best_loss[n])
    return {
        "state": detail["state"],
        "gpu_hours": sum(n["gpu_seconds"] for n in nodes) / 3600,
        "stopped": sum(1 for n in nodes if n["state"] == "stopped"),
        "completed": sum(1 for n in nodes if n["state"] == "completed"),
        "best": best,
        "best_loss": best_loss[best],
        "wall": wall,
    }


def run_nine(daemon, timeout, step_seconds):
    """The all-at-once sweep: steps run in all, and the point the report ranks first."""
    with open(os.path.join(REPO, "examples", "pipelines", "asha_nine.yaml")) as f:
        yaml = f.read()
    created = daemon.call("POST", "/v1/pipelines", {"yaml": yaml, "source": "asha_nine.yaml",
                                                    "base_dir": os.path.join(REPO, "examples", "pipelines"),
                                                    "params": {"step_seconds": str(step_seconds)}})
    detail, _ = wait_done(daemon, created["id"], timeout)
    steps = {n["id"]: (n.get("latest_metrics") or {}).get("step", 0) for n in detail["nodes"]}
    best = detail.get("best_points", {}).get("train", {}).get("node", "-")
    return {"steps": sum(steps.values()), "stopped": sum(1 for n in detail["nodes"] if n["state"] == "stopped"),
            "best": best, "wall": time.monotonic() - t0}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpuherd", default=os.environ.get("GPUHERD", "build/gpuherd"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--step-seconds", type=float, default=0.02)
    p.add_argument("--sim", type=int, default=8)
    p.add_argument("--reduction", type=int, default=3)
    p.add_argument("--grace", type=int, default=25, help="ASHA's first rung, in steps (default 25)")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--nine-step-seconds", type=float, default=0.15,
                   help="seconds per step of the all-at-once sweep (default 0.15)")
    a = p.parse_args(argv)
    home = tempfile.mkdtemp(prefix="gpuherd-asha-bench-")
    daemon = Daemon(os.path.abspath(a.gpuherd), home, sim=a.sim)
    try:
        print("running the full grid ...", file=sys.stderr)
        full = run(daemon, grid_yaml(a.steps, a.step_seconds, ""), a.timeout)
        print("running the grid with ASHA ...", file=sys.stderr)
        policy = f"    early_stop: {{policy: asha, grace: {a.grace}, reduction: {a.reduction}}}\n"
        asha = run(daemon, grid_yaml(a.steps, a.step_seconds, policy), a.timeout)
        print("running nine points all at once with ASHA ...", file=sys.stderr)
        nine = run_nine(daemon, a.timeout, a.nine_step_seconds)
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)
    print(f"| run ({len(LRS) * len(HIDDEN)} points, {a.steps} steps, --sim {a.sim}) | GPU-hours | points run to the end "
          "| stopped early | wall | best point (loss) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, r in (("full grid", full), (f"ASHA (grace {a.grace}, reduction {a.reduction})", asha)):
        print(f"| {name} | {r['gpu_hours']:.4f} | {r['completed']} | {r['stopped']} | {r['wall']:.0f} s "
              f"| {r['best']} ({r['best_loss']:.5f}) |")
    print(f"\nASHA / full grid GPU-hours: {asha['gpu_hours'] / full['gpu_hours']:.2f}; "
          f"same best point: {'yes' if asha['best'] == full['best'] else 'no'}")
    print(f"\n| all at once (9 points x 90 steps, 0.1 GPU each) | steps run | stopped early | wall | best point |")
    print("|---|---:|---:|---:|---|")
    print(f"| ASHA (grace 10, reduction 3) | {nine['steps']} ({nine['steps'] / 210:.2f}x successive halving's 210) "
          f"| {nine['stopped']} | {nine['wall']:.0f} s | {nine['best']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
