#!/usr/bin/env bash
# Runs the whole suite (or the tests whose name matches $1, a glob) and ends with the one line
# "N passed, N failed, N skipped" that CI reads. Unit tests are $BUILD/tests/test_*; shell tests
# are tests/it_*.sh (integration: real sshd, real processes, tmux) and tests/gpu_*.sh.
# Every test speaks TAP ("ok N - name" / "not ok N - name"); a test that exits non-zero without
# saying which check failed counts as one failure, so a crash is never a pass.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD DDPTOP_BUILD="$PWD/$BUILD"
pattern=${1:-*}
per_test_timeout=${DDPTOP_TEST_TIMEOUT:-900}
logdir=$BUILD/test-logs
mkdir -p "$logdir"
passed=0 failed=0 skipped=0
failed_names=()

run_one() {
    local name=$1; shift
    local log=$logdir/$name.log start=$SECONDS rc
    timeout -k 10 "$per_test_timeout" "$@" >"$log" 2>&1 </dev/null
    rc=$?
    local ok nok skip
    ok=$(grep -c '^ok ' "$log")
    skip=$(grep -c '^ok .*# SKIP' "$log")
    nok=$(grep -c '^not ok ' "$log")
    ok=$((ok - skip))
    if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
        nok=1
        echo "not ok - $name exited with status $rc$([ $rc = 124 ] && echo " (timed out after ${per_test_timeout}s)")" >>"$log"
    fi
    passed=$((passed + ok)); failed=$((failed + nok)); skipped=$((skipped + skip))
    printf '%-34s %3d passed %3d failed %3d skipped  %4ds\n' "$name" "$ok" "$nok" "$skip" $((SECONDS - start))
    if [ "$nok" -gt 0 ]; then
        failed_names+=("$name")
        grep -E '^(not ok|#)' "$log" | head -40 | sed 's/^/    /'
        echo "    (full log: $log)"
    fi
    grep '# SKIP' "$log" | sed 's/^/    /'
}

shopt -s nullglob
for t in "$BUILD"/tests/test_*; do
    name=$(basename "$t")
    [[ $name == $pattern ]] || continue
    run_one "$name" "$t"
done
for t in tests/it_*.sh tests/gpu_*.sh; do
    name=$(basename "$t" .sh)
    [[ $name == $pattern ]] || continue
    run_one "$name" bash "$t"
done

[ ${#failed_names[@]} -gt 0 ] && echo "failing: ${failed_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
