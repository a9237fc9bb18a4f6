#!/usr/bin/env bash
# The memory fence on a real card, in one short go (about a minute): builds
# libgpuherd-fence.so (g++, two files) and fence_check.cu (nvcc), then
#   1. two jobs of 0.5 with 4 GiB each, in their own ledgers as the shim makes
#      them: the hog tries to take 6 GiB and must stop at 4 GiB with
#      cudaErrorMemoryAllocation while the neighbour holds 3 GiB and keeps
#      writing and checking it for 20 s without an error;
#   2. cudaMemGetInfo under the fence (the share as the total);
#   3. the cost of the fence per allocation: cuMemAlloc_v2 + cuMemFree_v2
#      pairs with and without the fence, 5 runs each, the best of each.
# Outputs go under ${OUT:-/tmp/gpuherd-fence-check}; it prints a summary and
# exits 0 when the fence held and the neighbour ran untouched. It changes no
# GPU setting.
#
#   bench/gpu/fence_check.sh [GPU_INDEX]
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-/tmp/gpuherd-fence-check}"
gpu="${1:-0}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"

g++ -std=c++20 -O2 -shared -fPIC -fno-exceptions -fno-rtti -fno-threadsafe-statics -fvisibility=hidden \
    -fno-stack-protector -I"$repo_root/src" "$repo_root/src/fence/fence.cc" "$repo_root/src/fence/ledger.cc" \
    -o "$work/libgpuherd-fence.so" -ldl -lpthread || { echo "cannot build the fence"; exit 2; }
"$nvcc" -O2 -o "$work/fence_check" "$repo_root/bench/gpu/fence_check.cu" -lcuda \
    > "$out/nvcc.log" 2>&1 || { echo "cannot build fence_check.cu (see $out/nvcc.log)"; exit 2; }

# fenced JOB CMD...: runs CMD as a fractional job of 4 GiB would run under the shim.
fenced() {
  local job="$1"
  shift
  mkdir -p "$work/$job"
  : > "$work/$job/fence.ledger"
  CUDA_VISIBLE_DEVICES="$gpu" GPUHERD_GPU_MEM_LIMIT_MB=4096 GPUHERD_GPU_MEM_LIMIT_BYTES=$((4 << 30)) \
    GPUHERD_FENCE_LEDGER="$work/$job/fence.ledger" GPUHERD_FENCE_STATUS="$work/$job/fence.status" \
    LD_PRELOAD="$work/libgpuherd-fence.so" "$@"
}

failed=0
fenced neighbour timeout 60 "$work/fence_check" neighbour 3 20 > "$out/neighbour.out" 2>&1 &
neighbour_pid=$!
sleep 3  # the neighbour holds its memory and runs kernels
fenced hog timeout 60 "$work/fence_check" hog 6 > "$out/hog.out" 2>&1
wait "$neighbour_pid"
neighbour_status=$?
fenced info timeout 60 "$work/fence_check" info > "$out/info.out" 2>&1
cat "$work"/*/fence.status > "$out/fence.status" 2>/dev/null
grep -q "hog stopped at 4096 MiB: cudaErrorMemoryAllocation" "$out/hog.out" || failed=1
[ "$neighbour_status" -eq 0 ] && grep -q "neighbour ok" "$out/neighbour.out" || failed=1
grep -q "total 4096 MiB" "$out/info.out" || failed=1

: > "$out/bench.out"
for i in 1 2 3 4 5; do
  CUDA_VISIBLE_DEVICES="$gpu" timeout 60 "$work/fence_check" bench 20000 2>> "$out/bench.err" | sed 's/^/bare /' >> "$out/bench.out"
  fenced bench timeout 60 "$work/fence_check" bench 20000 2>> "$out/bench.err" | sed 's/^/fenced /' >> "$out/bench.out"
done
bare=$(awk '$1 == "bare" {print $3}' "$out/bench.out" | sort -n | head -1)
fenced_ns=$(awk '$1 == "fenced" {print $3}' "$out/bench.out" | sort -n | head -1)

echo "== memory fence on GPU $gpu ($(nvidia-smi --query-gpu=name --format=csv,noheader -i "$gpu" 2>/dev/null))"
echo "hog (share 4 GiB, asks 6):   $(cat "$out/hog.out")"
echo "neighbour (share 4 GiB):     $(cat "$out/neighbour.out")"
echo "under the fence:             $(cat "$out/info.out")"
echo "fence status lines:          $(tr '\n' ';' < "$out/fence.status")"
if [ -n "$bare" ] && [ -n "$fenced_ns" ]; then
  echo "alloc+free pair: bare $bare ns, fenced $fenced_ns ns: the fence costs $(( (fenced_ns - bare) / 2 )) ns per call (best of 5 x 20000)"
fi
[ "$failed" -eq 0 ] && echo "fence held: yes" || echo "fence held: NO (see $out)"
exit "$failed"
