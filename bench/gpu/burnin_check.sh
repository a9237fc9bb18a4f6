#!/usr/bin/env bash
# The GPU check of the burn-in: on a machine with NVIDIA GPUs, builds gpuherd
# (scripts/setup.sh), runs burn-in levels 1, 2 and 3 on every GPU, then the
# kernel yardstick (bench/cuda_yardstick), saving every output under
# ${OUT:-/tmp/gpuherd-gpu-check} and printing a summary. Each step has a
# timeout; after the build the steps take about 2-3 minutes on one GPU (at
# most 5 with every timeout spent). It only reads GPU settings
# (nvidia-smi -q) and never changes any.
#
#   bench/gpu/burnin_check.sh
#
# Exits 0 when every step ran and returned 0, 1 otherwise (the summary says
# which step failed), 2 when the build fails.
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-/tmp/gpuherd-gpu-check}"
mkdir -p "$out"
build="${GPUHERD_BUILD:-$repo_root/build}"
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT

declare -a summary=()
failed=0

# step NAME SECONDS CMD...: runs CMD with a timeout, stdout to NAME.out and
# stderr to NAME.err under $out, and records its exit status and duration.
step() {
  local name="$1" seconds="$2"
  shift 2
  local start end rc
  start=$(date +%s)
  timeout --kill-after=10 "$seconds" "$@" >"$out/$name.out" 2>"$out/$name.err"
  rc=$?
  end=$(date +%s)
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    summary+=("$name: TIMED OUT after ${seconds}s")
  else
    summary+=("$name: exit $rc in $((end - start))s")
  fi
  [[ $rc -eq 0 ]] || failed=1
  return $rc
}

{
  echo "date: $(date -Is)"
  nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version,compute_cap \
    --format=csv 2>&1 || echo "nvidia-smi not available"
  for compiler in clang++-14 clang++ nvcc /usr/local/cuda/bin/nvcc; do
    printf '%s: %s\n' "$compiler" "$(command -v "$compiler" || echo missing)"
  done
} >"$out/machine.txt"

echo "==> building (log: $out/build.log)"
if ! GPUHERD_BUILD="$build" timeout 240 "$repo_root/scripts/setup.sh" >"$out/build.log" 2>&1; then
  echo "burnin_check: the build failed; the end of $out/build.log:" >&2
  tail -30 "$out/build.log" >&2
  exit 2
fi
grep -E "burn-in kernels|clang\+\+ was not found" "$out/build.log" >"$out/kernels_config.txt" || true

gpuherd="$build/gpuherd"
common=(--gpu all --json --home "$home" --direct)
echo "==> burn-in level 1"
step level1 45 "$gpuherd" burnin "${common[@]}" --level 1
echo "==> burn-in level 2 (a quarter of free memory)"
step level2 75 "$gpuherd" burnin "${common[@]}" --level 2 --memtest-fraction 0.25
echo "==> burn-in level 3 (60 s of stress)"
step level3 120 "$gpuherd" burnin "${common[@]}" --level 3 --duration 60s --memtest-fraction 0.1
echo "==> kernel yardstick"
step yardstick 60 "$build/bench/cuda_yardstick"
step yardstick_json 45 "$build/bench/cuda_yardstick" --json --iterations 5 --max-bytes 1073741824

echo
echo "== summary (outputs in $out)"
printf '  %s\n' "${summary[@]}"
for level in level1 level2 level3; do
  if command -v python3 >/dev/null && [[ -s "$out/$level.out" ]]; then
    python3 - "$out/$level.out" "$level" <<'PY' || true
import json, sys
path, level = sys.argv[1], sys.argv[2]
try:
    data = json.load(open(path))
except Exception as error:
    print(f"  {level}: output is not JSON ({error})")
    sys.exit(0)
runs = data if isinstance(data, list) else data.get("runs", [data])
for run in runs:
    if not isinstance(run, dict):
        continue
    gpu = run.get("gpu") or run.get("uuid") or run.get("gpu_uuid")
    print(f"  {level}: gpu {gpu} verdict {run.get('verdict')} score {run.get('score')}")
PY
  fi
done
if [[ -s "$out/yardstick.out" ]]; then
  echo
  cat "$out/yardstick.out"
fi
for name in level1 level2 level3 yardstick; do
  if [[ -s "$out/$name.err" ]]; then
    echo "-- $name stderr (last lines):"
    tail -5 "$out/$name.err"
  fi
done
exit $failed
