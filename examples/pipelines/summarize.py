#!/usr/bin/env python3
"""Collects the result.json files of a sweep into one Markdown table.

    summarize.py SWEEP_DIR [--out FILE]

Each point of the sweep has its own folder under SWEEP_DIR (train/0, train/1, ...);
a folder without result.json is listed as a point that did not finish.
Standard library only.
"""
import argparse
import json
import os
import sys

COLUMNS = ("lr", "seed", "steps", "batch", "final_loss", "final_acc", "best_acc")


def load(sweep_dir):
    finished, unfinished = [], []
    for name in sorted(os.listdir(sweep_dir), key=lambda n: (len(n), n)):
        folder = os.path.join(sweep_dir, name)
        if not os.path.isdir(folder) or name.startswith("."):
            continue
        path = os.path.join(folder, "result.json")
        try:
            with open(path, encoding="utf-8") as f:
                finished.append(dict(json.load(f), point=name))
        except (OSError, ValueError):
            unfinished.append(name)
    return finished, unfinished


def cell(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def table(finished, unfinished):
    rows = sorted(finished, key=lambda r: -r.get("final_acc", 0.0))
    lines = ["| point | " + " | ".join(COLUMNS) + " |",
             "|---" * (len(COLUMNS) + 1) + "|"]
    for r in rows:
        lines.append(f"| {r['point']} | " + " | ".join(cell(r.get(c, "")) for c in COLUMNS) + " |")
    if unfinished:
        lines.append("")
        lines.append("Did not finish: " + ", ".join(unfinished))
    return "\n".join(lines) + "\n"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sweep_dir")
    p.add_argument("--out", help="also write the table to this file")
    a = p.parse_args(argv)
    if not os.path.isdir(a.sweep_dir):
        p.error(f"{a.sweep_dir} is not a folder")
    text = table(*load(a.sweep_dir))
    sys.stdout.write(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
