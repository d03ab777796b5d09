#!/usr/bin/env bash
# The testbed server in inline mode against nginx (issue 6's first benchmark).
#
# One file per size class of seed 000 (512 B, 5 KiB, 50 KiB, 500 KiB, 5 MiB), served by
# nginx (1 worker, sendfile on, access log off) and by `offload serve --mode inline`,
# each pinned to core 0 with wrk on the other core(s). For each class, with keep-alive
# and with a connection per request ("Connection: close"), wrk runs against both,
# alternating, after a warm-up of each; prints each run's req/s, the medians, and
# `ratio ours/peer` of the medians last (one per class and connection kind).
#
# Our listener defers accept until a connection's first bytes arrive (TCP_DEFER_ACCEPT,
# Apache's default on Linux), which nginx does only with `listen ... deferred`. With a
# connection per request a second nginx with `deferred` runs too, alternating with the
# other two, and `ratio ours/deferred` compares like with like.
#
#   bash bench/server_vs_nginx.sh [CONNECTIONS] [SECONDS] [RUNS]
#
# Needs the package installed in .venv (README), nginx and wrk (installed with apt-get
# when missing, as root).
set -euo pipefail
conns=${1:-64}
secs=${2:-3}
runs=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/nginx.sh"
need_nginx_wrk
offload="$root/.venv/bin/offload"
[ -x "$offload" ] || { echo "install the package first (README): $offload is missing" >&2; exit 1; }

dir=$(mktemp -d)
mkdir -p "$dir/www"
classes=(512 5120 51200 512000 5242880)
for size in "${classes[@]}"; do head -c "$size" /dev/urandom >"$dir/www/$size.bin"; done
ours_pid=
trap 'stop_nginx; [ -n "$ours_pid" ] && kill "$ours_pid" 2>/dev/null; rm -rf "$dir"' EXIT
pin_split
nginx_port=$(free_port)
start_nginx "$dir" "$nginx_port" "${server_cpu[*]:+0}"
deferred_port=$(free_port)
start_nginx "$dir" "$deferred_port" "${server_cpu[*]:+0}" deferred
ours_port=$(free_port)
core=()
[ ${#server_cpu[@]} -gt 0 ] && core=(--host-core 0)
"$offload" serve "$dir/www" --mode inline --port "$ours_port" "${core[@]}" >"$dir/ours.log" 2>&1 &
ours_pid=$!
wait_http "http://127.0.0.1:$ours_port/" || { echo "offload serve did not start:" >&2; cat "$dir/ours.log" >&2; exit 1; }

# req/s of one wrk run; a run with any non-2xx answer or socket error is refused.
rate() {
  "${client_cpu[@]}" wrk -t1 -c"$conns" -d"${secs}s" "${@:2}" "$1" |
    awk '/Non-2xx|Socket errors/ {bad=1} /Requests\/sec/ {r=$2} END {if (bad) exit 1; print r}'
}

echo "connections $conns, ${secs}s per run, $runs runs each; server on core 0, wrk on the rest"
summary=() deferred=()
for kind in keep-alive close; do
  extra=()
  [ "$kind" = close ] && extra=(-H "Connection: close")
  for size in "${classes[@]}"; do
    n="http://127.0.0.1:$nginx_port/$size.bin" o="http://127.0.0.1:$ours_port/$size.bin"
    d="http://127.0.0.1:$deferred_port/$size.bin"
    rate "$n" "${extra[@]}" >/dev/null; rate "$o" "${extra[@]}" >/dev/null   # warm-up
    [ "$kind" = close ] && rate "$d" "${extra[@]}" >/dev/null
    ns=(); os=(); ds=()
    for i in $(seq "$runs"); do
      ns+=("$(rate "$n" "${extra[@]}")"); os+=("$(rate "$o" "${extra[@]}")")
      line=$(printf '%-10s %8s B run %d: nginx %9.0f req/s   ours %9.0f req/s' "$kind" "$size" "$i" "${ns[-1]}" "${os[-1]}")
      if [ "$kind" = close ]; then
        ds+=("$(rate "$d" "${extra[@]}")")
        line+=$(printf '   nginx deferred %9.0f req/s' "${ds[-1]}")
      fi
      echo "$line"
    done
    mn=$(printf '%s\n' "${ns[@]}" | median); mo=$(printf '%s\n' "${os[@]}" | median)
    r=$(python3 -c "print(f'{$mo / $mn:.3f}')")
    line=$(printf '%-10s %8s B median: nginx %9.0f req/s   ours %9.0f req/s   ratio %s' "$kind" "$size" "$mn" "$mo" "$r")
    if [ "$kind" = close ]; then
      md=$(printf '%s\n' "${ds[@]}" | median)
      rd=$(python3 -c "print(f'{$mo / $md:.3f}')")
      line+=$(printf '   nginx deferred %9.0f req/s   ratio %s' "$md" "$rd")
      deferred+=("$kind/$size=$rd")
    fi
    echo "$line"
    summary+=("$kind/$size=$r")
  done
done
echo "ratio ours/deferred ${deferred[*]}"
echo "ratio ours/peer ${summary[*]}"
