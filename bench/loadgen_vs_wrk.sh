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
# OFFLOAD_LOAD_FLAGS adds flags to offload-load (e.g. "--busy-poll 0").
#
# Needs nginx and wrk (installed with apt-get when missing, as root).
set -euo pipefail
threads=${1:-1}
conns=${2:-64}
secs=${3:-5}
runs=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
  apt-get update -qq && apt-get install -y -qq nginx wrk >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

(cd "$root" && cargo build --release -q -p offload-load)
ours="$root/target/release/offload-load"

dir=$(mktemp -d)
chmod 755 "$dir"   # nginx's worker runs as another user
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$dir/www" "$dir/tmp"
head -c 1024 /dev/urandom >"$dir/www/1k.bin"
head -c 102400 /dev/urandom >"$dir/www/100k.bin"
cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp;
    scgi_temp_path $dir/tmp;
    server { listen 127.0.0.1:$port; root $dir/www; }
}
CONF
# Server and client on cores of their own (when there are two), so that neither steals
# the other's CPU and the runs vary less.
server_cpu=() client_cpu=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  server_cpu=(taskset -c 0) client_cpu=(taskset -c 1-$(($(nproc) - 1)))
fi
"${server_cpu[@]}" "$NGINX" -c "$dir/nginx.conf" -p "$dir" &
nginx_pid=$!
trap 'kill "$nginx_pid" 2>/dev/null; wait "$nginx_pid" 2>/dev/null; rm -rf "$dir"' EXIT
up=
for _ in $(seq 50); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/1k.bin" && { up=1; break; }
  sleep 0.1
done
[ -n "$up" ] || { echo "nginx did not serve $dir/www (see $dir/error.log)" >&2; exit 1; }

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
  local r
  # shellcheck disable=SC2086  # the flags are meant to split
  r=$(/usr/bin/time -f '%U %S' -o "$cpu_file" "${client_cpu[@]}" "$ours" "$1" --connections "$conns" \
    --threads "$threads" --duration "${secs}s" --json --quiet ${OFFLOAD_LOAD_FLAGS:-} |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["throughput"])')
  echo "$r $(per_request_us "$r")"
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

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
