#!/usr/bin/env bash
# Starts a private single-node Slurm on localhost for the queue benchmark:
# its own munged (key made here), slurmctld and slurmd as root, 8 GPUs
# declared as gres on placeholder files (gpu:8, shard:80), everything under
# one directory. Waits until sinfo shows the node idle.
#
#   bench/queue/slurm_up.sh DIR
#
# DIR must not exist yet or be empty. Clients then need SLURM_CONF=DIR/slurm.conf.
# Stop it with bench/queue/slurm_down.sh DIR (also when this script fails).
# Ports: QBENCH_SLURM_PORT (default 16817) to +3 for slurmctld, +4 for slurmd.
# Exits 0 when the node is idle, 1 when a daemon does not come up (with its log),
# 2 on bad usage or missing programs (install slurm-wlm and munge).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly gpus=8
readonly shards=80

fail() { echo "slurm_up: $*" >&2; exit 1; }

if [[ $# -ne 1 ]]; then
  echo "usage: slurm_up.sh DIR" >&2
  exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "slurm_up: run as root (slurmd must start job steps as any user)" >&2
  exit 2
fi
for program in munged slurmctld slurmd sinfo; do
  if ! command -v "$program" >/dev/null; then
    echo "slurm_up: '$program' not found; install the Debian packages slurm-wlm and munge" >&2
    exit 2
  fi
done
dir="$1"
if [[ -e "$dir" && -n "$(ls -A "$dir")" ]]; then
  echo "slurm_up: '$dir' is not empty; give a new directory" >&2
  exit 2
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
# munged (user munge) must traverse to its socket: the tree is world-searchable.
chmod 755 "$dir"
mkdir -p "$dir/munge" "$dir/ctld" "$dir/spool" "$dir/log" "$dir/gpus"

port="${QBENCH_SLURM_PORT:-16817}"
for p in $(seq "$port" $((port + 4))); do
  if ss -Htln "sport = :$p" | grep -q .; then
    fail "TCP port $p is in use; set QBENCH_SLURM_PORT to a free base port"
  fi
done

# munge: a fresh key, a socket of our own; ten threads as the guide advises.
key="$dir/munge/munge.key"
if command -v mungekey >/dev/null; then
  mungekey --create --keyfile="$key"
else
  dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
fi
chown -R munge:munge "$dir/munge"
chmod 600 "$key"
munge_socket="$dir/munge/munge.socket"
runuser -u munge -- munged --socket="$munge_socket" --key-file="$key" \
  --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" \
  --log-file="$dir/munge/munged.log" --num-threads=10 \
  || fail "munged did not start: $(tail -n 5 "$dir/munge/munged.log" 2>/dev/null)"

# The node line describes this machine as slurmd itself sees it, so slurmd
# never marks the node invalid for claiming more than it has.
hardware="$(slurmd -C | head -n 1 | sed -E 's/^NodeName=[^ ]+ //')"
[[ "$hardware" == *CPUs=* ]] || fail "'slurmd -C' gave no hardware line: $hardware"

gpu_files=()
for ((i = 0; i < gpus; i++)); do
  # A character device like /dev/null, so slurmd takes it for a device; a plain
  # file works too but fills its log with errors.
  mknod "$dir/gpus/gpu$i" c 1 3 2>/dev/null || : >"$dir/gpus/gpu$i"
  gpu_files+=("$dir/gpus/gpu$i")
done
gpu_file_list="$(IFS=,; echo "${gpu_files[*]}")"

sed -e "s|@SLURMCTLD_PORTS@|$port-$((port + 3))|" \
    -e "s|@SLURMD_PORT@|$((port + 4))|" \
    -e "s|@MUNGE_SOCKET@|$munge_socket|" \
    -e "s|@STATE_DIR@|$dir|g" \
    -e "s|@NODE_HARDWARE@|$hardware|" \
    -e "s|@GPUS@|$gpus|" -e "s|@SHARDS@|$shards|" \
    "$here/slurm.conf.in" >"$dir/slurm.conf"
sed -e "s|@GPU_FILES@|$gpu_file_list|g" -e "s|@SHARDS@|$shards|" \
    "$here/gres.conf.in" >"$dir/gres.conf"
export SLURM_CONF="$dir/slurm.conf"

# The guide: high open-file limits for slurmctld under bursts of requests.
ulimit -n 65536 2>/dev/null || true
slurmctld -f "$SLURM_CONF" \
  || fail "slurmctld did not start: $(tail -n 5 "$dir/log/slurmctld.log" 2>/dev/null)"
slurmd -f "$SLURM_CONF" -N localhost \
  || fail "slurmd did not start: $(tail -n 5 "$dir/log/slurmd.log" 2>/dev/null)"

state=""
for ((i = 0; i < 120; i++)); do
  state="$(timeout 5 sinfo -h -n localhost -o %T 2>/dev/null || true)"
  [[ "$state" == idle ]] && break
  sleep 0.5
done
if [[ "$state" != idle ]]; then
  echo "slurm_up: node not idle after 60 s (state '${state:-no answer}'); logs:" >&2
  tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 2>/dev/null || true
  exit 1
fi
echo "slurm_up: localhost idle ($hardware, gpu:$gpus, shard:$shards); SLURM_CONF=$SLURM_CONF" >&2
