#!/usr/bin/env bash
# Queue throughput and durability: gpuherd against task-spooler and a
# single-node Slurm on this machine, with the same workload for each.
#
#   bench/queue/queue_throughput.sh [--jobs N] [--slurm-jobs N] [--gpuherd PATH]
#                                   [--skip-slurm]
#
# Workloads: N x `true` needing 1 GPU each, and N x `true` needing 0.1 GPU each,
# on 8 GPUs (gpuherd: --sim 8; Slurm: gres gpu:8 and shard:80; task-spooler has
# no GPUs: the same `true` with 8 slots). Every queue gets its jobs one
# submission per client process, 8 clients at a time (xargs -P 8); the
# "gpuherd --array" rows submit all N in one `gpuherd submit --array N`, as
# Slurm's high-throughput guide advises for many small jobs. Wall time
# runs from the first submission to the last completion, which a poller sees
# (every 50 ms; 250 ms for Slurm). Slurm gets --slurm-jobs jobs (default 200):
# it starts about 2 a second here.
# Durability: 20 jobs queued behind a long job, then SIGKILL of the queue's
# server and a restart: how many of the 20 are still known, and how many run.
# --skip-slurm leaves Slurm out (its rows say so): a run of the other two
# queues takes about a minute instead of seven.
#
# Prints two Markdown tables on stdout, progress on stderr. Installs
# task-spooler, slurm-wlm and munge with apt when missing (root only).
# A gpuherd without a job queue, or missing, gives "n/a" rows with the reason,
# never a hang: every step has a timeout. Exits 0 when every part ran, 1 when
# one could not, 2 on bad usage.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
jobs=1000
slurm_jobs=200
gpuherd="${GPUHERD:-$repo_root/build/gpuherd}"
skip_slurm=0
readonly clients=8
readonly durable_jobs=20

usage() {
  sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) jobs="${2:-}"; shift 2 || usage ;;
    --slurm-jobs) slurm_jobs="${2:-}"; shift 2 || usage ;;
    --gpuherd) gpuherd="${2:-}"; shift 2 || usage ;;
    --skip-slurm) skip_slurm=1; shift ;;
    -h|--help) usage ;;
    *) echo "queue_throughput: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for count in "$jobs" "$slurm_jobs"; do
  if ! [[ "$count" =~ ^[1-9][0-9]*$ ]]; then
    echo "queue_throughput: job counts must be positive integers, got '$count'" >&2
    exit 2
  fi
done
if [[ $(id -u) -ne 0 ]]; then
  echo "queue_throughput: run as root (it installs packages and runs slurmd)" >&2
  exit 2
fi

# The system's python: a version manager's shim in PATH can take a second to
# start, which the poller would add to every measurement.
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3

log() { echo "[qbench $(date +%T)] $*" >&2; }
now() { date +%s.%N; }

# --- packages ---------------------------------------------------------------
missing=()
command -v tsp >/dev/null || missing+=(task-spooler)
if [[ $skip_slurm -eq 0 ]]; then
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]}"
  if ! { apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
         >/tmp/qbench-apt.log 2>&1; then
    echo "queue_throughput: apt-get install ${missing[*]} failed; see /tmp/qbench-apt.log" >&2
    exit 1
  fi
fi

# --- scratch space and cleanup ----------------------------------------------
work="$(mktemp -d /tmp/qbench.XXXXXX)"
chmod 755 "$work"
daemon_pids=()   # gpuherd daemons started here
tsp_sockets=()   # task-spooler servers started here
stray_pids=()    # long jobs a killed server left behind
poller=""        # the running poller, if any
slurm_dir=""

cleanup() {
  local pid socket
  [[ -n "$poller" ]] && kill "$poller" 2>/dev/null
  for socket in "${tsp_sockets[@]}"; do
    [[ -S "$socket" ]] && TS_SOCKET="$socket" timeout 5 tsp -K >/dev/null 2>&1
  done
  for pid in "${daemon_pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done
  for pid in "${stray_pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done
  [[ -n "$slurm_dir" ]] && "$here/slurm_down.sh" "$slurm_dir"
  rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The poller: runs a queue's listing command every INTERVAL seconds and
# counts jobs in final states, so the end of a run is seen within one interval.
# Prints "END_EPOCH OK FAILED" and exits 0 once EXPECT jobs are final and none
# is waiting; exits 1 at the timeout, 2 when the listing keeps failing.
cat >"$work/poll.py" <<'PY'
import json, os, subprocess, sys, time

kind, expect, timeout, interval, min_id, start_file = sys.argv[1:7]
expect, timeout, interval, min_id = int(expect), float(timeout), float(interval), int(min_id)
command = sys.argv[7:]
slurm_final = {}  # Slurm forgets finished jobs after MinJobAge: remember them.


def count(text):
    """Returns (ok, failed, waiting) for one listing."""
    ok = failed = waiting = 0
    if kind == "tsp":
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 2:
                continue
            if fields[1] == "finished":
                if len(fields) > 3 and fields[3] == "0":
                    ok += 1
                else:
                    failed += 1
            elif fields[1] == "skipped":
                failed += 1
            else:
                waiting += 1
    elif kind == "gpuherd":
        jobs = json.loads(text)
        if isinstance(jobs, dict):
            jobs = jobs.get("jobs", [])
        for job in jobs:
            state = job.get("state")
            if state == "completed":
                ok += 1
            elif state in ("failed", "cancelled"):
                failed += 1
            else:
                waiting += 1
    else:
        for line in text.splitlines():
            fields = line.split(":")
            if len(fields) != 2 or not fields[0].isdigit() or int(fields[0]) < min_id:
                continue
            if fields[1] in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING",
                             "SUSPENDED", "REQUEUED", "RESIZING"):
                waiting += 1
            else:
                slurm_final[fields[0]] = fields[1]
        ok = sum(1 for s in slurm_final.values() if s == "COMPLETED")
        failed = len(slurm_final) - ok
    return ok, failed, waiting


deadline = time.time() + timeout
# Started before the submissions so that its own start-up is not timed; it
# begins listing once START_FILE exists (or at once for "-").
while start_file != "-" and not os.path.exists(start_file):
    if time.time() > deadline:
        sys.exit(f"timed out after {timeout:.0f} s waiting for the submissions")
    time.sleep(0.005)
errors = 0
last = (0, 0, 0)
while True:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(result.stderr.strip() or f"exit {result.returncode}")
        last = count(result.stdout)
        errors = 0
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as error:
        errors += 1
        if errors >= 20:
            sys.exit(f"listing '{' '.join(command)}' keeps failing: {error}")
    ok, failed, waiting = last
    if ok + failed >= expect and waiting == 0:
        print(f"{time.time():.6f} {ok} {failed}")
        sys.exit(0)
    if time.time() > deadline:
        print(f"timed out after {timeout:.0f} s: {ok} completed, {failed} failed, "
              f"{waiting} still queued or running of {expect}", file=sys.stderr)
        sys.exit(1)
    time.sleep(interval)
PY

# Results: rows of the throughput table, keyed "queue|workload".
declare -A rate wall submit_s done_failed count note
failures=0

# Records a row that could not be measured.
skip_row() {  # queue workload reason
  note["$1|$2"]="$3"
  log "$1, $2: $3"
  failures=$((failures + 1))
}

# Submits N jobs through xargs -P 8 with the command line in "$@" (one job per
# invocation), polls until all are final, and records the row.
#   measure QUEUE WORKLOAD N POLL_KIND POLL_TIMEOUT POLL_INTERVAL MIN_ID LIST_CMD -- SUBMIT_CMD...
measure() {
  local queue="$1" workload="$2" n="$3" kind="$4" poll_timeout="$5" interval="$6" min_id="$7"
  local list_cmd="$8"
  shift 9
  local key="$queue|$workload" start submitted end failed expect="$n"
  [[ "$kind" == slurm ]] || expect=$((n + 1))  # the warm-up job is listed too
  log "$queue, $workload: $n jobs"
  rm -f "$work/submitted"
  # Slurm forgets a finished job 5 s after it ends (MinJobAge), maybe before the
  # last sbatch returns: its poller lists from the start. The others keep their
  # records, and their poller waits for the submissions so as not to slow them.
  local gate="$work/submitted"
  [[ "$kind" == slurm ]] && gate=-
  # shellcheck disable=SC2086  # LIST_CMD is a word list by design
  "$python" "$work/poll.py" "$kind" "$expect" "$poll_timeout" "$interval" "$min_id" \
    "$gate" $list_cmd >"$work/poll.out" 2>"$work/poll.err" &
  poller=$!
  start="$(now)"
  # One timeout for all the submissions: one per job would add a process to
  # every submission and slow each queue down by more than task-spooler costs.
  if [[ "$queue" == *--array* ]]; then
    # A job array: one submission queues all N.
    timeout "$poll_timeout" "$@" >"$work/submit.out" 2>"$work/submit.err"
  else
    seq "$n" | timeout "$poll_timeout" xargs -P "$clients" -I{} "$@" \
      >"$work/submit.out" 2>"$work/submit.err"
  fi
  local status=$?
  if [[ $status -ne 0 ]]; then
    kill "$poller" 2>/dev/null
    wait "$poller" 2>/dev/null
  fi
  if [[ $status -eq 124 ]]; then
    skip_row "$queue" "$workload" "submissions did not finish within $poll_timeout s"
    return 1
  elif [[ $status -ne 0 ]]; then
    skip_row "$queue" "$workload" "submission failed: $(head -n 1 "$work/submit.err")"
    return 1
  fi
  submitted="$(now)"
  touch "$work/submitted"
  if ! wait "$poller"; then
    skip_row "$queue" "$workload" "$(tail -n 1 "$work/poll.err")"
    return 1
  fi
  read -r end _ failed <"$work/poll.out"
  count["$key"]="$n"
  wall["$key"]="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')"
  submit_s["$key"]="$(awk -v a="$start" -v b="$submitted" 'BEGIN { printf "%.2f", b - a }')"
  rate["$key"]="$(awk -v n="$n" -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", n / (b - a) }')"
  done_failed["$key"]="$failed"
  log "$queue, $workload: ${wall[$key]} s, ${rate[$key]} jobs/s ($failed failed)"
}

# --- gpuherd ----------------------------------------------------------------
gpuherd_problem=""
if [[ ! -x "$gpuherd" ]]; then
  gpuherd_problem="no gpuherd binary at '$gpuherd'; build it or pass --gpuherd PATH"
fi

# Starts a daemon on HOME (--sim 8) and waits up to 30 s for `status`. Prints
# its pid (the caller records it for the cleanup: this runs in a subshell), or
# on failure a reason, with the daemon killed.
start_gpuherd() {  # home
  local home="$1" pid i
  mkdir -p "$home"
  "$gpuherd" --home "$home" daemon --sim 8 --port 0 >>"$home.log" 2>&1 &
  pid=$!
  for ((i = 0; i < 60; i++)); do
    if timeout 5 "$gpuherd" --home "$home" status >/dev/null 2>&1; then
      echo "$pid"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the gpuherd daemon exited at start: $(tail -n 1 "$home.log")"
      return 1
    fi
    sleep 0.5
  done
  kill -KILL "$pid" 2>/dev/null
  echo "the gpuherd daemon did not answer 'status' within 30 s: $(tail -n 1 "$home.log")"
  return 1
}

stop_gpuherd() {  # home pid
  local i
  timeout 10 "$gpuherd" --home "$1" stop >/dev/null 2>&1
  for ((i = 0; i < 100; i++)); do
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$2" 2>/dev/null
}

# One job through a fresh daemon before the clock starts; its failure says the
# binary has no job queue (yet), and the message names what failed.
gpuherd_warm_up() {  # home submit-args...
  local home="$1" out
  shift
  if ! out="$(timeout 15 "$gpuherd" --home "$home" submit "$@" --name warm-up -- true 2>&1)"; then
    echo "gpuherd submit failed (has this build a job queue?): $(head -n 1 <<<"$out")"
    return 1
  fi
  if ! "$python" "$work/poll.py" gpuherd 1 30 0.05 0 - \
         "$gpuherd" --home "$home" ps --all --json >/dev/null 2>"$work/poll.err"; then
    echo "gpuherd warm-up job did not finish: $(tail -n 1 "$work/poll.err")"
    return 1
  fi
}

run_gpuherd() {  # queue workload submit-args...
  local queue="$1" workload="$2" home="$work/gpuherd-$RANDOM" pid problem
  shift 2
  local array=()
  [[ "$queue" == *--array* ]] && array=(--array "$jobs")
  if [[ -n "$gpuherd_problem" ]]; then
    skip_row "$queue" "$workload" "$gpuherd_problem"
    return
  fi
  if ! pid="$(start_gpuherd "$home")"; then
    skip_row "$queue" "$workload" "$pid"
    return
  fi
  daemon_pids+=("$pid")
  if problem="$(gpuherd_warm_up "$home" "$@")"; then
    measure "$queue" "$workload" "$jobs" gpuherd 600 0.05 0 \
      "$gpuherd --home $home ps --all --json" -- \
      "$gpuherd" --home "$home" submit "$@" "${array[@]}" --name qbench -- true
  else
    skip_row "$queue" "$workload" "$problem"
  fi
  stop_gpuherd "$home" "$pid"
}

# --- task-spooler -------------------------------------------------------------
# Every run gets its own server (socket) with 8 slots and keeps all finished
# jobs listed (TS_MAXFINISHED), so the poller can count them.
new_tsp() {  # name slots
  export TS_SOCKET="$work/tsp-$1.socket" TS_MAXFINISHED=1000000 TMPDIR="$work"
  tsp_sockets+=("$TS_SOCKET")
  tsp -S "$2"
}

run_tsp() {  # workload
  new_tsp "$1" "$clients"
  tsp -n true >/dev/null && tsp -w >/dev/null 2>&1  # warm-up
  measure task-spooler "$1" "$jobs" tsp 300 0.05 0 "tsp -l" -- tsp -n true
  tsp -K >/dev/null 2>&1
}

# --- Slurm --------------------------------------------------------------------
slurm_problem=""
start_slurm() {
  slurm_dir="$work/slurm"
  if ! "$here/slurm_up.sh" "$slurm_dir" 2>"$work/slurm_up.err"; then
    slurm_problem="slurm_up.sh failed: $(tail -n 1 "$work/slurm_up.err")"
    cat "$work/slurm_up.err" >&2
    return 1
  fi
  export SLURM_CONF="$slurm_dir/slurm.conf"
  log "Slurm up: $(tail -n 1 "$work/slurm_up.err")"
}

run_slurm() {  # workload gres
  local workload="$1" gres="$2" first
  if [[ -n "$slurm_problem" ]]; then
    skip_row Slurm "$workload" "$slurm_problem"
    return
  fi
  # Warm-up; its id is the floor for this run's jobs (ids only grow).
  if ! first="$(timeout 30 sbatch --parsable --gres="$gres" -o /dev/null -J warm-up --wrap true 2>&1)" ||
     ! "$python" "$work/poll.py" slurm 1 60 0.25 "$first" - squeue -h -t all -o %i:%T \
         >/dev/null 2>"$work/poll.err"; then
    skip_row Slurm "$workload" "warm-up job failed: $first $(tail -n 1 "$work/poll.err")"
    return
  fi
  measure Slurm "$workload" "$slurm_jobs" slurm $((slurm_jobs * 5 + 60)) 0.25 $((first + 1)) \
    "squeue -h -t all -o %i:%T" -- \
    sbatch --parsable --gres="$gres" -o /dev/null -J qbench --wrap true
}

# --- durability -----------------------------------------------------------------
# Per queue: of the 20 jobs queued behind a long one, how many were queued
# before the SIGKILL, how many the restarted server still lists, and how many
# completed once the long job was cancelled.
declare -A queued_before kept ran

wait_gone() {  # pid: up to 5 s
  local i
  for ((i = 0; i < 50; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
}

durability_tsp() {
  local long server long_pid i
  new_tsp durable 1
  long="$(tsp -n sleep 300)"
  for ((i = 0; i < 50; i++)); do
    [[ "$(tsp -s "$long")" == running ]] && break
    sleep 0.1
  done
  for ((i = 0; i < durable_jobs; i++)); do tsp -n true >/dev/null; done
  queued_before[task-spooler]="$(tsp -l | awk 'NR > 1 && $2 == "queued"' | wc -l)"
  long_pid="$(tsp -p "$long")"
  [[ -n "$long_pid" ]] && stray_pids+=("$long_pid")
  server="$(ss -xlpn | awk -v s="$TS_SOCKET" '$5 == s' | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)"
  if [[ -z "$server" ]]; then
    note[task-spooler]="could not find the server listening on $TS_SOCKET"
    failures=$((failures + 1))
    return
  fi
  kill -KILL "$server"
  wait_gone "$server"
  # The next tsp call starts a new server on the same socket.
  kept[task-spooler]="$(timeout 10 tsp -l | awk 'NR > 1 && $1 != "'"$long"'"' | wc -l)"
  [[ -n "$long_pid" ]] && kill -TERM "$long_pid" 2>/dev/null
  sleep 2
  ran[task-spooler]="$(tsp -l | awk 'NR > 1 && $2 == "finished" && $4 == "0"' | wc -l)"
  tsp -K >/dev/null 2>&1
}

# Counts the jobs of HOME whose id is in IDS_FILE (what submit printed) and
# whose state is one of STATES (comma list, or "any").
gpuherd_count() {  # home ids_file states
  timeout 15 "$gpuherd" --home "$1" ps --all --json 2>/dev/null |
    "$python" -c '
import json, sys
ids = {line.split()[-1] for line in open(sys.argv[1]) if line.strip()}
states = sys.argv[2].split(",")
jobs = json.load(sys.stdin)
if isinstance(jobs, dict):
    jobs = jobs.get("jobs", [])
print(sum(1 for j in jobs if str(j.get("id")) in ids and
          (states == ["any"] or j.get("state") in states)))' "$2" "$3" 2>/dev/null ||
    echo 0
}

durability_gpuherd() {
  local home="$work/gpuherd-durable" ids="$work/durable-ids" pid long i
  if [[ -n "$gpuherd_problem" ]]; then
    note[gpuherd]="$gpuherd_problem"
    failures=$((failures + 1))
    return
  fi
  if ! pid="$(start_gpuherd "$home")"; then
    note[gpuherd]="$pid"
    failures=$((failures + 1))
    return
  fi
  daemon_pids+=("$pid")
  if ! long="$(timeout 15 "$gpuherd" --home "$home" submit --gpus 8 --name long -- sleep 300 2>&1)"; then
    note[gpuherd]="gpuherd submit failed (has this build a job queue?): $(head -n 1 <<<"$long")"
    failures=$((failures + 1))
    stop_gpuherd "$home" "$pid"
    return
  fi
  long="$(awk 'NF { id = $NF } END { print id }' <<<"$long")"
  echo "$long" >"$work/long-id"
  for ((i = 0; i < 60 && $(gpuherd_count "$home" "$work/long-id" running) == 0; i++)); do
    sleep 0.5
  done
  : >"$ids"
  for ((i = 0; i < durable_jobs; i++)); do
    timeout 15 "$gpuherd" --home "$home" submit --gpus 1 --name "durable-$i" -- true \
      >>"$ids" 2>/dev/null
  done
  queued_before[gpuherd]="$(gpuherd_count "$home" "$ids" pending)"
  kill -KILL "$pid"
  wait_gone "$pid"
  if ! pid="$(start_gpuherd "$home")"; then
    note[gpuherd]="restart after SIGKILL failed: $pid"
    failures=$((failures + 1))
    return
  fi
  daemon_pids+=("$pid")
  kept[gpuherd]="$(gpuherd_count "$home" "$ids" any)"
  timeout 15 "$gpuherd" --home "$home" cancel "$long" >/dev/null 2>&1
  for ((i = 0; i < 60; i++)); do
    ran[gpuherd]="$(gpuherd_count "$home" "$ids" completed)"
    [[ "${ran[gpuherd]}" -ge "${kept[gpuherd]}" ]] && break
    sleep 0.5
  done
  stop_gpuherd "$home" "$pid"
}

# Counts Slurm jobs with id >= FLOOR whose state matches the awk PATTERN.
slurm_count() {  # floor pattern
  timeout 15 squeue -h -t all -o %i:%T 2>/dev/null |
    awk -F: -v f="$1" -v p="$2" '$1 >= f && $2 ~ p' | wc -l
}

durability_slurm() {
  local long floor i
  if [[ -n "$slurm_problem" ]]; then
    note[Slurm]="$slurm_problem"
    return
  fi
  long="$(timeout 30 sbatch --parsable --gres=gpu:8 -o /dev/null -J long --wrap 'sleep 300')"
  floor=$((long + 1))
  for ((i = 0; i < 60; i++)); do
    [[ "$(timeout 5 squeue -h -j "$long" -o %T)" == RUNNING ]] && break
    sleep 0.5
  done
  for ((i = 0; i < durable_jobs; i++)); do
    timeout 30 sbatch --parsable --gres=gpu:1 -o /dev/null -J durable --wrap true >/dev/null
  done
  queued_before[Slurm]="$(slurm_count "$floor" '^PENDING$')"
  local ctld
  ctld="$(cat "$slurm_dir/slurmctld.pid")"
  kill -KILL "$ctld"
  wait_gone "$ctld"
  # Without -c, slurmctld recovers its state from StateSaveLocation.
  slurmctld -f "$SLURM_CONF" 2>>"$work/slurmctld-restart.err"
  for ((i = 0; i < 60; i++)); do
    timeout 5 squeue -h >/dev/null 2>&1 && break
    sleep 0.5
  done
  kept[Slurm]="$(slurm_count "$floor" .)"
  timeout 15 scancel "$long"
  for ((i = 0; i < 120; i++)); do
    ran[Slurm]="$(slurm_count "$floor" '^COMPLETED$')"
    [[ "${ran[Slurm]}" -ge "${kept[Slurm]}" ]] && break
    sleep 0.5
  done
}

# --- the runs ------------------------------------------------------------------
bench_start="$(now)"
log "work dir $work; gpuherd $gpuherd; $jobs jobs ($slurm_jobs for Slurm)"
run_gpuherd gpuherd "1 GPU" --gpus 1
run_gpuherd gpuherd "0.1 GPU" --gpus 0.1 --gpu-mem 1GiB
run_gpuherd "gpuherd --array" "1 GPU" --gpus 1
run_gpuherd "gpuherd --array" "0.1 GPU" --gpus 0.1 --gpu-mem 1GiB
run_tsp "1 GPU"
run_tsp "0.1 GPU"
if [[ $skip_slurm -eq 0 ]]; then
  start_slurm || log "$slurm_problem"
  run_slurm "1 GPU" gpu:1
  run_slurm "0.1 GPU" shard:1
else
  # Not a failure: the rows say why they are empty.
  note["Slurm|1 GPU"]="skipped (--skip-slurm)"
  note["Slurm|0.1 GPU"]="skipped (--skip-slurm)"
  note[Slurm]="skipped (--skip-slurm)"
fi
log "durability"
durability_gpuherd
durability_tsp
[[ $skip_slurm -eq 0 ]] && durability_slurm

# --- report --------------------------------------------------------------------
ratio() {  # a b
  if [[ -n "$1" && -n "$2" ]]; then
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'
  else
    echo "n/a"
  fi
}
cell() { [[ -n "${1:-}" ]] && echo "$1" || echo "n/a"; }

echo "## Queue throughput ($(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "Jobs are \`true\`, submitted by $clients client processes at a time; wall time from the"
echo "first submission to the last completion."
echo
echo "| workload | queue | jobs | submitting s | wall s | jobs/s | failed |"
echo "|---|---|---:|---:|---:|---:|---:|"
for workload in "1 GPU" "0.1 GPU"; do
  for queue in gpuherd "gpuherd --array" task-spooler Slurm; do
    key="$queue|$workload"
    if [[ -n "${rate[$key]:-}" ]]; then
      echo "| $workload | $queue | ${count[$key]} | ${submit_s[$key]} | ${wall[$key]} |" \
           "${rate[$key]} | ${done_failed[$key]} |"
    else
      echo "| $workload | $queue | - | - | - | n/a: ${note[$key]:-not run} | - |"
    fi
  done
done
echo
echo "| workload | gpuherd / task-spooler | gpuherd --array / task-spooler | gpuherd / Slurm |"
echo "|---|---:|---:|---:|"
for workload in "1 GPU" "0.1 GPU"; do
  echo "| $workload | $(ratio "${rate[gpuherd|$workload]:-}" "${rate[task-spooler|$workload]:-}") |" \
       "$(ratio "${rate[gpuherd --array|$workload]:-}" "${rate[task-spooler|$workload]:-}") |" \
       "$(ratio "${rate[gpuherd|$workload]:-}" "${rate[Slurm|$workload]:-}") |"
done
echo
echo "## Durability: SIGKILL of the queue's server with $durable_jobs jobs queued behind a long one"
echo
echo "| queue | queued before | listed after restart | ran after restart |"
echo "|---|---:|---:|---:|"
for queue in gpuherd task-spooler Slurm; do
  if [[ -n "${kept[$queue]:-}" ]]; then
    echo "| $queue | $(cell "${queued_before[$queue]:-}") | ${kept[$queue]} | $(cell "${ran[$queue]:-}") |"
  else
    echo "| $queue | n/a: ${note[$queue]:-not run} | - | - |"
  fi
done
echo
log "finished in $(awk -v a="$bench_start" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
[[ $failures -eq 0 ]]
