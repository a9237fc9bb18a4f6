#!/usr/bin/env bash
# Stops what slurm_up.sh DIR started (its jobs, slurmd, slurmctld, munged,
# found through their pid files) and removes DIR.
#
#   bench/queue/slurm_down.sh DIR
#
# Safe to call more than once and after a failed slurm_up.sh. Refuses to remove a
# directory that slurm_up.sh did not make.
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: slurm_down.sh DIR" >&2
  exit 2
fi
dir="$1"
[[ -d "$dir" ]] || exit 0
dir="$(cd "$dir" && pwd)"
if [[ -e "$dir/slurm.conf" ]] && ! grep -q '^ClusterName=qbench$' "$dir/slurm.conf"; then
  echo "slurm_down: '$dir' does not hold slurm_up.sh's cluster; left alone" >&2
  exit 1
fi
if [[ ! -e "$dir/slurm.conf" && ! -d "$dir/munge" ]]; then
  echo "slurm_down: '$dir' was not made by slurm_up.sh; left alone" >&2
  exit 1
fi

# Stops the process in PIDFILE if it is still the program named COMM (a stale
# pid file may name a reused pid): SIGTERM, then SIGKILL after 10 s.
stop_pid_file() {
  local pid_file="$1" comm="$2" pid
  [[ -r "$pid_file" ]] || return 0
  pid="$(tr -dc 0-9 <"$pid_file")"
  [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$comm" ]] || return 0
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    [[ -d "/proc/$pid" ]] || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
}

if [[ -e "$dir/slurm.conf" ]]; then
  # Jobs first, while slurmctld and slurmd can still end their steps: scancel
  # only asks, so wait until the queue is empty.
  export SLURM_CONF="$dir/slurm.conf"
  if timeout 10 scancel --partition=bench >/dev/null 2>&1; then
    for ((i = 0; i < 100; i++)); do
      [[ -z "$(timeout 5 squeue -h 2>/dev/null)" ]] && break
      sleep 0.1
    done
  fi
fi
stop_pid_file "$dir/slurmd.pid" slurmd
# A job step that outlived its cancel: slurmstepd runs in slurmd's directory
# (DIR/log); its job runs in a process group of its own.
for proc in /proc/[0-9]*; do
  [[ "$(cat "$proc/comm" 2>/dev/null)" == slurmstepd ]] || continue
  [[ "$(readlink "$proc/cwd" 2>/dev/null)" == "$dir"/* ]] || continue
  stepd="${proc#/proc/}"
  for group in $(ps -o pgid= --ppid "$stepd" 2>/dev/null); do
    kill -KILL -- "-$group" 2>/dev/null
  done
  kill -KILL "$stepd" 2>/dev/null
done
stop_pid_file "$dir/slurmctld.pid" slurmctld
stop_pid_file "$dir/munge/munged.pid" munged
rm -rf -- "$dir"
