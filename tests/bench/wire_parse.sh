#!/usr/bin/env bash
# Benchmark (issue 32): the controller's parse of the agents' out messages and of the runtime's
# step lines (tests/bench/bench_wire_parse.c), against cJSON. Figures go in docs/performance.md,
# "The out messages' text in one pass", with the machine and date. Rerun with
# `make bench BENCH_PARTS=wire_parse`.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
B=$BUILD_DIR/bench/bench_wire_parse
[ -x "$B" ] || { echo "bench: $B not built (make all bench-programs)" >&2; exit 1; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null)"
"$B" "${BENCH_WIRE_PARSE_ROUNDS:-200000}"
