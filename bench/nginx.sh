# Shared by the benchmarks that measure against nginx; source it, do not run it.
#
#   need_nginx_wrk              install nginx and wrk with apt-get when missing (as root)
#   free_port                   print a free loopback port
#   start_nginx DIR PORT [CPU] [LISTEN]
#                               serve DIR/www on 127.0.0.1:PORT: 1 worker, sendfile on,
#                               access log off, LISTEN added to the listen directive
#                               (e.g. deferred), NGINX_EXTRA (if set) added to the http
#                               block (e.g. 'open_file_cache max=1000;'); pinned with
#                               taskset to CPU if given; waits until it answers (several
#                               may run, one per port)
#   stop_nginx                  stop every one started
#   pin_split                   set server_cpu / client_cpu to taskset prefixes giving
#                               server and client cores of their own (when there are two)

nginx_pids=()
nginx_template="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/python/offloadlab/examples/nginx.conf"

need_nginx_wrk() {
  if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nginx wrk >/dev/null
  fi
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start_nginx() {
  local dir=$1 port=$2 cpu=${3:-} listen=${4:-}
  chmod 755 "$dir"   # nginx's worker runs as another user
  mkdir -p "$dir/tmp"
  # The configuration is examples/nginx.conf's, which the study's nginx tests use too.
  python3 - "$nginx_template" "$dir" "$port" "$listen" "${NGINX_EXTRA:-}" >"$dir/nginx-$port.conf" <<'PY'
import os, pwd, string, sys
template, folder, port, listen, extra = sys.argv[1:]
print(string.Template(open(template).read()).substitute(
    folder=folder, root=f"{folder}/www", address="127.0.0.1", port=port, listen=listen,
    extra=extra,
    user=pwd.getpwuid(os.geteuid()).pw_name), end="")
PY
  local prefix=()
  [ -n "$cpu" ] && command -v taskset >/dev/null && prefix=(taskset -c "$cpu")
  "${prefix[@]}" "$NGINX" -c "$dir/nginx-$port.conf" -p "$dir" &
  nginx_pids+=($!)
  wait_http "http://127.0.0.1:$port/" || { echo "nginx did not start (see $dir/error-$port.log)" >&2; return 1; }
}

stop_nginx() {
  local pid
  for pid in "${nginx_pids[@]}"; do
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  done
  nginx_pids=()
}

# Waits up to 5 s for URL to answer at all (any status).
wait_http() {
  for _ in $(seq 50); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  return 1
}

pin_split() {
  server_cpu=() client_cpu=()
  if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    server_cpu=(taskset -c 0) client_cpu=(taskset -c 1-$(($(nproc) - 1)))
  fi
}

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
