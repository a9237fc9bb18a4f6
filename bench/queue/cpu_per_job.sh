#!/usr/bin/env bash
# Where the CPU goes per job: gpuherd against task-spooler, the same N x `true`
# submitted by 8 clients at a time as queue_throughput.sh does.
#
#   bench/queue/cpu_per_job.sh [--jobs N] [--gpuherd PATH]
#
# CPU time and page faults per job, by part: the clients (perf stat, which
# follows every process they start, so task-spooler's clients include the
# forked runner and the job it runs), gpuherd's daemon and launcher (from
# /proc/<pid>/stat: their own time), and the shims with their jobs (the
# launcher's reaped children, or its fork server and the children it reaped). A figure of CPU per job does not depend on what
# else the machine runs, as jobs/s does. Needs perf; prints a Markdown table on
# stdout, progress on stderr. Exits 1 when a part could not be measured, 2 on
# bad usage.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
jobs=300
gpuherd="${GPUHERD:-$repo_root/build/gpuherd}"
readonly clients=8

usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) jobs="${2:-}"; shift 2 || usage ;;
    --gpuherd) gpuherd="${2:-}"; shift 2 || usage ;;
    -h|--help) usage ;;
    *) echo "cpu_per_job: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
  echo "cpu_per_job: --jobs takes a positive integer, got '$jobs'" >&2
  exit 2
fi
for tool in perf tsp; do
  if ! command -v "$tool" >/dev/null; then
    echo "cpu_per_job: '$tool' is missing (apt-get install linux-perf task-spooler)" >&2
    exit 1
  fi
done
if [[ ! -x "$gpuherd" ]]; then
  echo "cpu_per_job: no gpuherd binary at '$gpuherd'; build it or pass --gpuherd PATH" >&2
  exit 1
fi

log() { echo "[cpu_per_job $(date +%T)] $*" >&2; }
tick="$(getconf CLK_TCK)"
work="$(mktemp -d /tmp/cpu_per_job.XXXXXX)"
daemon_pid=""
cleanup() {
  [[ -n "$daemon_pid" ]] && kill -KILL "$daemon_pid" 2>/dev/null
  [[ -S "$work/tsp.socket" ]] && TS_SOCKET="$work/tsp.socket" timeout 5 tsp -K >/dev/null 2>&1
  rm -rf -- "$work"
}
trap cleanup EXIT

# "CPU_MS FAULTS" of a process itself, or of its reaped children with "children".
proc_usage() {  # pid [children]
  if [[ "${2:-}" == children ]]; then
    awk -v t="$tick" '{ printf "%.0f %d\n", ($16 + $17) * 1000 / t, $11 }' "/proc/$1/stat"
  else
    awk -v t="$tick" '{ printf "%.0f %d\n", ($14 + $15) * 1000 / t, $10 }' "/proc/$1/stat"
  fi
}

# Runs the submissions under perf stat; prints "CPU_MS FAULTS" of all the
# processes they started.
submit_all() {  # command...
  seq "$jobs" | perf stat -x, -e task-clock,page-faults -o "$work/perf.out" \
    xargs -P "$clients" -I{} "$@" >/dev/null 2>"$work/submit.err" || return 1
  awk -F, '$3 == "task-clock" { cpu = $1 } $3 == "page-faults" { faults = $1 }
           END { printf "%.0f %d\n", cpu, faults }' "$work/perf.out"
}

declare -A cpu faults
failures=0
record() {  # key "CPU_MS FAULTS" (totals over all jobs)
  local c f
  read -r c f <<<"$2"
  cpu["$1"]="$(awk -v c="$c" -v n="$jobs" 'BEGIN { printf "%.1f", c / n }')"
  faults["$1"]="$(awk -v f="$f" -v n="$jobs" 'BEGIN { printf "%.0f", f / n }')"
}
add() {  # "A_CPU A_FAULTS" "B_CPU B_FAULTS": A + B
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); print x[1] + y[1], x[2] + y[2] }'
}
delta() {  # "A_CPU A_FAULTS" "B_CPU B_FAULTS": B - A
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); print y[1] - x[1], y[2] - x[2] }'
}

# Waits until the daemon on HOME lists every job as final.
wait_gpuherd_done() {  # home expected
  local i
  for ((i = 0; i < 1200; i++)); do
    local done
    done="$("$gpuherd" --home "$1" ps --all --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
print(sum(1 for j in json.load(sys.stdin) if j.get("state") in ("completed", "failed", "cancelled")))' 2>/dev/null)"
    [[ "${done:-0}" -ge "$2" ]] && return 0
    sleep 0.25
  done
  return 1
}

# --- gpuherd --------------------------------------------------------------------
measure_gpuherd() {
  local home="$work/gpuherd" launcher i
  mkdir -p "$home"
  "$gpuherd" --home "$home" daemon --sim 8 --port 0 >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for ((i = 0; i < 60; i++)); do
    timeout 5 "$gpuherd" --home "$home" status >/dev/null 2>&1 && break
    sleep 0.5
  done
  launcher="$(pgrep -P "$daemon_pid" | head -n 1)"
  if [[ -z "$launcher" ]]; then
    log "gpuherd: no daemon or launcher came up: $(tail -n 1 "$work/daemon.log")"
    return 1
  fi
  "$gpuherd" --home "$home" submit --gpus 1 -- true >/dev/null && wait_gpuherd_done "$home" 1  # warm-up
  local d0 l0 s0 d1 l1 s1 clients_usage
  d0="$(proc_usage "$daemon_pid")"; l0="$(proc_usage "$launcher")"; s0="$(proc_usage "$launcher" children)"
  log "gpuherd: $jobs jobs"
  clients_usage="$(submit_all "$gpuherd" --home "$home" submit --gpus 1 --name cpu -- true)" || {
    log "gpuherd: submission failed: $(head -n 1 "$work/submit.err")"
    return 1
  }
  wait_gpuherd_done "$home" $((jobs + 1)) || { log "gpuherd: jobs did not finish"; return 1; }
  sleep 0.5  # the last shims are reaped
  d1="$(proc_usage "$daemon_pid")"; l1="$(proc_usage "$launcher")"; s1="$(proc_usage "$launcher" children)"
  # Shims forked by the launcher's fork server are its children, reaped by it:
  # its own time and theirs count with the shims (it starts at the first launch).
  local server
  server="$(pgrep -P "$launcher" -f -- --fork-server | head -n 1)"
  if [[ -n "$server" ]]; then
    s1="$(add "$s1" "$(proc_usage "$server")")"
    s1="$(add "$s1" "$(proc_usage "$server" children)")"
  fi
  record "gpuherd|clients" "$clients_usage"
  record "gpuherd|daemon" "$(delta "$d0" "$d1")"
  record "gpuherd|launcher" "$(delta "$l0" "$l1")"
  record "gpuherd|shims and jobs" "$(delta "$s0" "$s1")"
  "$gpuherd" --home "$home" stop >/dev/null 2>&1
  wait "$daemon_pid" 2>/dev/null
  daemon_pid=""
}

# --- task-spooler -----------------------------------------------------------------
measure_tsp() {
  export TS_SOCKET="$work/tsp.socket" TS_MAXFINISHED=1000000 TMPDIR="$work"
  tsp -S "$clients"
  tsp -n true >/dev/null && tsp -w >/dev/null 2>&1  # warm-up; starts the server
  local server s0 s1 clients_usage i
  server="$(ss -xlpn | awk -v s="$TS_SOCKET" '$5 == s' | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)"
  if [[ -z "$server" ]]; then
    log "task-spooler: cannot find its server"
    return 1
  fi
  s0="$(proc_usage "$server")"
  log "task-spooler: $jobs jobs"
  clients_usage="$(submit_all tsp -n true)" || {
    log "task-spooler: submission failed: $(head -n 1 "$work/submit.err")"
    return 1
  }
  for ((i = 0; i < 1200; i++)); do
    [[ "$(tsp -l | awk 'NR > 1 && $2 == "finished"' | wc -l)" -ge $((jobs + 1)) ]] && break
    sleep 0.25
  done
  s1="$(proc_usage "$server")"
  record "task-spooler|clients, runners and jobs" "$clients_usage"
  record "task-spooler|server" "$(delta "$s0" "$s1")"
  tsp -K >/dev/null 2>&1
}

measure_gpuherd || failures=$((failures + 1))
measure_tsp || failures=$((failures + 1))

total() {  # queue
  local key sum_c=0 sum_f=0
  for key in "${!cpu[@]}"; do
    [[ "$key" == "$1|"* ]] || continue
    sum_c="$(awk -v a="$sum_c" -v b="${cpu[$key]}" 'BEGIN { print a + b }')"
    sum_f="$(awk -v a="$sum_f" -v b="${faults[$key]}" 'BEGIN { print a + b }')"
  done
  echo "$sum_c $sum_f"
}

echo "## CPU per job ($(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "$jobs x \`true\`, submitted by $clients clients at a time."
echo
echo "| queue | part | CPU ms / job | page faults / job |"
echo "|---|---|---:|---:|"
for key in "gpuherd|clients" "gpuherd|daemon" "gpuherd|launcher" "gpuherd|shims and jobs" \
           "task-spooler|clients, runners and jobs" "task-spooler|server"; do
  [[ -n "${cpu[$key]:-}" ]] && echo "| ${key%%|*} | ${key#*|} | ${cpu[$key]} | ${faults[$key]} |"
done
read -r g_cpu g_faults <<<"$(total gpuherd)"
read -r t_cpu t_faults <<<"$(total task-spooler)"
echo "| gpuherd | **total** | **$g_cpu** | **$g_faults** |"
echo "| task-spooler | **total** | **$t_cpu** | **$t_faults** |"
echo
if [[ -n "${cpu[gpuherd|clients]:-}" && -n "${cpu[task-spooler|server]:-}" ]]; then
  echo "task-spooler's CPU per job / gpuherd's: $(awk -v g="$g_cpu" -v t="$t_cpu" 'BEGIN { printf "%.2f", t / g }')" \
       "(the throughput ratio a CPU-bound machine allows)"
fi
[[ $failures -eq 0 ]]
