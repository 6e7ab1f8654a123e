#!/usr/bin/env bash
# Benchmark (issue 30): what a Prometheus scrape of `--metrics` costs the controller's thread
# at 8,192 ranks (1,024 nodes x 8 GPUs), the goal being under 50 ms: the exposition alone
# (openmetrics_render) and a whole GET through the endpoint's server on an event loop, as the
# controller runs it (tests/bench/bench_openmetrics.c). Figures go in docs/performance.md,
# "OpenMetrics endpoint", with the machine and date. Rerun with
# `make bench BENCH_PARTS=openmetrics`; BENCH_OM_NODES to change the size.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
B=$BUILD_DIR/bench/bench_openmetrics
[ -x "$B" ] || { echo "bench: $B not built (make all bench-programs)" >&2; exit 1; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores ($(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null)"
for n in ${BENCH_OM_NODES:-1024}; do
    "$B" "$n" 20 5 || exit 1
done
