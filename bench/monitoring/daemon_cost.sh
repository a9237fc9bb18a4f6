#!/usr/bin/env bash
# What monitoring costs: the daemon sampling 8 simulated GPUs every 5 s with
# /metrics scraped every 15 s (as Prometheus would), for a few minutes; its
# CPU share and memory from /proc, beside the figures users report for
# dcgm-exporter. Then one scrape of a 1,000-GPU fleet from metrics_bench.
#
#   bench/monitoring/daemon_cost.sh [--seconds N] [--gpuherd PATH] [--metrics-bench PATH]
#
# Defaults: 180 s, build/gpuherd, build/bench/metrics_bench. Prints a Markdown
# table on stdout, progress on stderr. Exits 1 when the daemon cannot be
# measured, 2 on bad usage.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
seconds=180
gpuherd="${GPUHERD:-$repo_root/build/gpuherd}"
metrics_bench="$repo_root/build/bench/metrics_bench"
readonly scrape_every=15 warm_up=10

usage() {
  sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:-}"; shift 2 || usage ;;
    --gpuherd) gpuherd="${2:-}"; shift 2 || usage ;;
    --metrics-bench) metrics_bench="${2:-}"; shift 2 || usage ;;
    *) usage ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 30 ]] || { echo "--seconds takes a number of at least 30" >&2; exit 2; }
[[ -x "$gpuherd" ]] || { echo "no gpuherd binary at $gpuherd; build it or pass --gpuherd" >&2; exit 2; }

home="$(mktemp -d -t gpuherd-bench-monitoring-XXXXXX)"
daemon_pid=""
cleanup() {
  if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" 2>/dev/null
  fi
  rm -rf "$home"
}
trap cleanup EXIT

metrics_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$gpuherd" --home "$home" daemon --sim 8 --interval 5s --port 0 --metrics-port "$metrics_port" \
  --log-level warn >"$home/daemon.out" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$metrics_port/metrics" -o /dev/null && break
  kill -0 "$daemon_pid" 2>/dev/null || { echo "the daemon exited: $(cat "$home/daemon.out")" >&2; exit 1; }
  sleep 0.1
done

clock_ticks="$(getconf CLK_TCK)"
# utime + stime of the daemon (all its threads), in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$daemon_pid/stat"; }
status_kib() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$daemon_pid/status"; }

echo "warming up for ${warm_up} s, then measuring for ${seconds} s" >&2
sleep "$warm_up"
start_ticks="$(cpu_ticks)"
start_ns="$(date +%s%N)"
scrapes=0 scrape_ms_total=0 scrape_bytes=0
end_at=$(( $(date +%s) + seconds ))
while (( $(date +%s) < end_at )); do
  read -r took size < <(curl -sf -o /dev/null -w '%{time_total} %{size_download}\n' \
    "http://127.0.0.1:$metrics_port/metrics") || { echo "a scrape failed" >&2; exit 1; }
  scrapes=$((scrapes + 1))
  scrape_ms_total="$(awk -v a="$scrape_ms_total" -v t="$took" 'BEGIN { print a + t * 1000 }')"
  scrape_bytes="$size"
  echo "scrape $scrapes: ${size} bytes in ${took} s" >&2
  sleep "$scrape_every"
done
end_ticks="$(cpu_ticks)"
end_ns="$(date +%s%N)"
rss_kib="$(status_kib VmRSS)"
hwm_kib="$(status_kib VmHWM)"
threads="$(status_kib Threads)"

cpu_pct="$(awk -v d=$((end_ticks - start_ticks)) -v hz="$clock_ticks" -v ns=$((end_ns - start_ns)) \
  'BEGIN { printf "%.2f", d / hz / (ns / 1e9) * 100 }')"
rss_mib="$(awk -v k="$rss_kib" 'BEGIN { printf "%.1f", k / 1024 }')"
hwm_mib="$(awk -v k="$hwm_kib" 'BEGIN { printf "%.1f", k / 1024 }')"
scrape_ms="$(awk -v t="$scrape_ms_total" -v n="$scrapes" 'BEGIN { printf "%.1f", t / n }')"

big_scrape="(metrics_bench not built)"
if [[ -x "$metrics_bench" ]]; then
  # Its row: | GPUs | bytes | series | render time | alert evaluation |
  big_scrape="$("$metrics_bench" 2>/dev/null | awk -F'|' '$2 + 0 == 1000 {
    gsub(/ /, "", $3); gsub(/ /, "", $4); gsub(/^ +| +$/, "", $5); gsub(/^ +| +$/, "", $6)
    printf "%.1f MiB, %s series, rendered in %s; the default rules evaluated over them in %s", $3 / 1048576, $4, $5, $6
  }')"
fi

cat <<EOF
### Monitoring cost: 8 simulated GPUs sampled every 5 s, /metrics scraped every ${scrape_every} s, ${seconds} s

| | gpuherd daemon (measured here) | dcgm-exporter (as users report it) |
|---|---|---|
| CPU | ${cpu_pct} % of one core (sampling, alert rules, store, API; ${threads} threads) | 15–20 % of a core |
| Memory | ${rss_mib} MiB RSS at the end, ${hwm_mib} MiB peak | tens to hundreds of MiB |
| One scrape of 8 GPUs | ${scrape_bytes} bytes, ${scrape_ms} ms on average over ${scrapes} scrapes (curl, loopback) | |

dcgm-exporter's figures are what its users report, not
measured here: this machine has no NVIDIA GPU, and gpuherd's GPUs are
simulated, so its NVML calls cost nothing; on real GPUs each reading adds the
driver's own time to gpuherd's share.

1,000 simulated GPUs, one scrape (metrics_bench): ${big_scrape}
EOF
