#!/usr/bin/env bash
# Checks gpuherd's NVML readings against nvidia-smi on a machine with real
# NVIDIA GPUs: per GPU index, the name, the memory total (MiB, +-1), the
# current PCIe generation and width, and the temperature (+-2 C).
#
#   bench/gpu/compare_nvidia_smi.sh [GPUHERD_BINARY]
#
# The binary is the first argument, else $GPUHERD, else build/gpuherd
# under the repository root. Prints both sides and PASS/FAIL per field; exits
# 0 when all agree, 1 on any mismatch or when gpuherd reports a simulated
# fleet, 2 when a side cannot be run. Finishes within a minute.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
gpuherd="${1:-${GPUHERD:-$repo_root/build/gpuherd}}"

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "compare_nvidia_smi: nvidia-smi not found; run this on a machine with the NVIDIA driver" >&2
  exit 2
fi
if [[ ! -x "$gpuherd" ]]; then
  echo "compare_nvidia_smi: gpuherd binary '$gpuherd' not found or not executable;" \
       "build it or pass its path as the first argument (or set GPUHERD)" >&2
  exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# gpuherd first: a GPU warming up between the two reads moves nvidia-smi's
# temperature, which the tolerance allows for.
if ! timeout 25 "$gpuherd" gpus --json >"$work/gpuherd.json" 2>"$work/gpuherd.err"; then
  echo "compare_nvidia_smi: '$gpuherd gpus --json' failed:" >&2
  cat "$work/gpuherd.err" >&2
  exit 2
fi
if ! timeout 25 nvidia-smi \
    --query-gpu=name,memory.total,pcie.link.gen.current,pcie.link.width.current,temperature.gpu \
    --format=csv,noheader,nounits >"$work/smi.csv" 2>"$work/smi.err"; then
  echo "compare_nvidia_smi: nvidia-smi failed:" >&2
  cat "$work/smi.err" "$work/smi.csv" >&2
  exit 2
fi

python3 - "$work/smi.csv" "$work/gpuherd.json" <<'PY'
import csv
import json
import re
import sys

smi_path, gpuherd_path = sys.argv[1], sys.argv[2]


def smi_number(text):
    """'81559', '81559 MiB' or '[N/A]' -> float or None."""
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", text or "")
    return float(match.group(1)) if match else None


smi_rows = []
with open(smi_path, newline="") as f:
    for row in csv.reader(f, skipinitialspace=True):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 5:
            sys.exit(f"compare_nvidia_smi: unexpected nvidia-smi line: {row!r}")
        name, memory, gen, width, temp = (cell.strip() for cell in row)
        smi_rows.append({
            "name": None if name.startswith("[") else name,
            "memory": smi_number(memory),
            "gen": smi_number(gen),
            "width": smi_number(width),
            "temp": smi_number(temp),
        })

try:
    with open(gpuherd_path) as f:
        report = json.load(f)
except ValueError as error:
    sys.exit(f"compare_nvidia_smi: gpuherd printed no valid JSON: {error}")

if report.get("simulated", True) or report.get("driver") != "nvml":
    print(f"FAIL: gpuherd used the {report.get('driver', '?')} driver, simulated="
          f"{report.get('simulated')} ({report.get('sim_reason', '')}); "
          "it did not read the real GPUs through NVML")
    sys.exit(1)

by_index = {gpu.get("index"): gpu for gpu in report.get("gpus", [])}
failures = 0
rows = [("gpu", "field", "nvidia-smi", "gpuherd", "result")]


def check(index, field, smi_value, ours, tolerance=0.0):
    global failures
    if smi_value is None and ours is None:
        ok = True  # both say the reading is unavailable
    elif smi_value is None or ours is None:
        ok = False
    elif isinstance(smi_value, str):
        ok = smi_value == ours
    else:
        ok = abs(float(smi_value) - float(ours)) <= tolerance
    failures += 0 if ok else 1

    def show(value):
        if value is None:
            return "n/a"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value) if not isinstance(value, float) else f"{value:.1f}"

    rows.append((str(index), field, show(smi_value), show(ours), "PASS" if ok else "FAIL"))


if len(smi_rows) != len(by_index):
    rows.append(("-", "gpu count", str(len(smi_rows)), str(len(by_index)), "FAIL"))
    failures += 1

for index, smi in enumerate(smi_rows):
    gpu = by_index.get(index)
    if gpu is None:
        rows.append((str(index), "present", "yes", "no", "FAIL"))
        failures += 1
        continue
    sample = gpu.get("sample") or {}
    total = gpu.get("memory_total_bytes")
    check(index, "name", smi["name"], gpu.get("name"))
    check(index, "memory.total MiB", smi["memory"],
          None if total is None else total / 2**20, tolerance=1.0)
    check(index, "pcie gen", smi["gen"], sample.get("pcie_gen"))
    check(index, "pcie width", smi["width"], sample.get("pcie_width"))
    check(index, "temperature C", smi["temp"], sample.get("temp_c"), tolerance=2.0)

widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
for row in rows:
    print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
print(f"{len(rows) - 1 - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
PY
