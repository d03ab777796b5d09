#!/usr/bin/env bash
# The request parser's properties (crates/offload-server/tests/parser_props.rs) over
# HEADS generated and mutated heads (default ten million) in a release build: no
# panic, no accepted prefix of a rejected head, no head changed by the bytes after it.
# Prints the outcome counts and the wall time.
set -euo pipefail
heads=${1:-10000000}
cd "$(dirname "$0")/.."
cargo build -q --release -p offload-server --tests
start=$(date +%s.%N)
OFFLOAD_FUZZ_HEADS=$heads cargo test -q --release -p offload-server --test parser_props -- --nocapture
end=$(date +%s.%N)
awk -v n="$heads" -v s="$start" -v e="$end" \
    'BEGIN { printf "%d heads in %.1f s: %.2f M heads/s\n", n, e - s, n / (e - s) / 1e6 }'
