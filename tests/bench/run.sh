#!/usr/bin/env bash
# `make bench`: runs every tests/bench/*.sh except this one, in name order, and prints what
# each measured; `tests/bench/run.sh PART...` runs only those parts, each named as its file
# with or without .sh (e.g. `tests/bench/run.sh run_slurm`). Benchmarks are not timed tests:
# they report figures (see docs/performance.md) and fail only when they could not measure.
set -u
cd "$(dirname "$0")/../.." || exit 1
export BUILD=${BUILD:-build}
export DDPTOP_BUILD=${DDPTOP_BUILD:-$PWD/$BUILD}
for p in "$@"; do
    [ "${p%.sh}" != run ] && [ -f "tests/bench/${p%.sh}.sh" ] ||
        { echo "bench: no part '$p' (tests/bench/*.sh: $(cd tests/bench && ls *.sh | grep -vx run.sh | sed 's/\.sh$//' | paste -sd' '))" >&2; exit 2; }
done
rc=0
for b in tests/bench/*.sh; do
    [ "$(basename "$b")" = run.sh ] && continue
    if [ $# -gt 0 ]; then
        want=""
        for p in "$@"; do [ "${p%.sh}.sh" = "$(basename "$b")" ] && want=1; done
        [ -n "$want" ] || continue
    fi
    echo "=== $b"
    if ! bash "$b"; then
        echo "=== $b: FAILED (no figures)"
        rc=1
    fi
    echo
done
exit $rc
