#!/usr/bin/env bash
# `make bench`: runs every tests/bench/*.sh except this one, in name order, and prints what
# each measured. Benchmarks are not timed tests: they report figures (see docs/performance.md)
# and fail only when they could not measure.
set -u
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build}
export DDPTOP_BUILD=${DDPTOP_BUILD:-$PWD/$BUILD}
rc=0
for b in tests/bench/*.sh; do
    [ "$(basename "$b")" = run.sh ] && continue
    echo "=== $b"
    if ! bash "$b"; then
        echo "=== $b: FAILED (no figures)"
        rc=1
    fi
    echo
done
exit $rc
