#!/usr/bin/env bash
# offload-load against wrk, closed loop, on loopback (issue 5's benchmark).
#
# Serves a 1 KiB and a 100 KiB file from nginx (1 worker, sendfile on, access log
# off) on 127.0.0.1, then for each file runs wrk and offload-load with the same
# threads and connections, alternating, after one warm-up run of each; prints each
# run's req/s, the medians, and `ratio ours/peer` (of req/s) last. Each run also shows
# the client's CPU time per request (user + system): what the load generator costs,
# which decides when the client is the bottleneck; here nginx's one worker usually is,
# and a client costs it more when it must be woken for each response (see
# --busy-poll in crates/offload-load/README.md). Stops the nginx it started.
#
#   bash bench/loadgen_vs_wrk.sh [THREADS] [CONNECTIONS] [SECONDS] [RUNS]
#
# offload-load is told each file's size, so it checks every answer's length (wrk checks
# none; a run with any failed request is refused), and it runs with a read mark of
# RCVLOWAT bytes (default 1024; 0: off): the kernel wakes it once per answer, when that
# much of it is there, instead of often once for nginx's head and again for the body
# nginx sends apart (see --rcvlowat in docs/load.md). OFFLOAD_LOAD_FLAGS adds flags to
# offload-load (e.g. "--busy-poll 0"). NGINX_EXTRA adds directives to nginx's http
# block: 'open_file_cache max=1000;' spares nginx an open and a close per request, so
# that it holds the clients back less (see docs/load.md).
#
# Needs nginx and wrk (installed with apt-get when missing, as root).
set -euo pipefail
threads=${1:-1}
conns=${2:-64}
secs=${3:-5}
runs=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

source "$here/nginx.sh"
need_nginx_wrk

(cd "$root" && cargo build --release -q -p offload-load)
ours="$root/target/release/offload-load"

dir=$(mktemp -d)
port=$(free_port)
mkdir -p "$dir/www"
head -c 1024 /dev/urandom >"$dir/www/1k.bin"
head -c 102400 /dev/urandom >"$dir/www/100k.bin"
trap 'stop_nginx; rm -rf "$dir"' EXIT
# Server and client on cores of their own (when there are two), so that neither steals
# the other's CPU and the runs vary less.
pin_split
start_nginx "$dir" "$port" "${server_cpu[*]:+0}"

# Each prints "req/s client-CPU-µs-per-request" (user + system time of the client).
cpu_file=$dir/cpu
per_request_us() { awk -v r="$1" -v s="$secs" '{printf "%.2f", ($1 + $2) * 1e6 / (r * s)}' "$cpu_file"; }
# wrk counts non-2xx answers as requests; refuse a run that had any.
wrk_rate() {
  local r
  r=$(/usr/bin/time -f '%U %S' -o "$cpu_file" "${client_cpu[@]}" wrk -t"$threads" -c"$conns" -d"${secs}s" "$1" |
    awk '/Non-2xx/ {bad=1} /Requests\/sec/ {r=$2} END {if (bad) exit 1; print r}')
  echo "$r $(per_request_us "$r")"
}
our_rate() {
  local r size
  size=$(stat -c %s "$dir/www/${1##*/}")
  # shellcheck disable=SC2086  # the flags are meant to split
  r=$(/usr/bin/time -f '%U %S' -o "$cpu_file" "${client_cpu[@]}" "$ours" "$1" --connections "$conns" \
    --threads "$threads" --duration "${secs}s" --json --quiet --size "$size" \
    --rcvlowat "${RCVLOWAT:-1024}" ${OFFLOAD_LOAD_FLAGS:-} |
    python3 -c 'import json,sys; d = json.load(sys.stdin); print(d["throughput"] if d["failed"] == 0 else "failed")')
  [ "$r" != failed ] || { echo "offload-load counted failed requests on $1" >&2; exit 1; }
  echo "$r $(per_request_us "$r")"
}

echo "threads $threads, connections $conns, ${secs}s per run, $runs runs each"
ratios=()
for file in 1k.bin 100k.bin; do
  url="http://127.0.0.1:$port/$file"
  wrk_rate "$url" >/dev/null; our_rate "$url" >/dev/null   # warm-up
  w=(); o=(); wc=(); oc=()
  for i in $(seq "$runs"); do
    read -r rate cpu < <(wrk_rate "$url"); w+=("$rate"); wc+=("$cpu")
    read -r rate cpu < <(our_rate "$url"); o+=("$rate"); oc+=("$cpu")
    printf '%-9s run %d: wrk %8.0f req/s %6.2f us CPU/req   offload-load %8.0f req/s %6.2f us CPU/req\n' \
      "$file" "$i" "${w[-1]}" "${wc[-1]}" "${o[-1]}" "${oc[-1]}"
  done
  mw=$(printf '%s\n' "${w[@]}" | median); mo=$(printf '%s\n' "${o[@]}" | median)
  cw=$(printf '%s\n' "${wc[@]}" | median); co=$(printf '%s\n' "${oc[@]}" | median)
  r=$(python3 -c "print(f'{$mo / $mw:.3f}')")
  printf '%-9s median: wrk %8.0f req/s %6.2f us CPU/req   offload-load %8.0f req/s %6.2f us CPU/req   ratio %s\n' \
    "$file" "$mw" "$cw" "$mo" "$co" "$r"
  ratios+=("$r")
done
echo "ratio ours/peer ${ratios[*]} (1k, 100k)"
