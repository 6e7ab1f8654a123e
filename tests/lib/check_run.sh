# Running `ddptop check` from the shell tests: run_check keeps stdout, stderr, exit status and
# wall time of one run; jassert checks the --json document (tests/lib/json_assert.py).
# Needs tests/lib/tap.sh and tests/lib/sshd.sh sourced first.

DDPTOP=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}/ddptop
RC=""          # exit status of the last run_check
ELAPSED_MS=""  # its wall time in milliseconds
LAST_OUT=""    # its stdout file
RUN_PID=""     # the run in progress (ended by check_run_cleanup)

# For the test's EXIT trap: ends a run still in progress (timeout passes the signal on).
check_run_cleanup() {
    if [ -n "$RUN_PID" ]; then
        kill -TERM "$RUN_PID" 2>/dev/null
        wait "$RUN_PID" 2>/dev/null
        RUN_PID=""
    fi
}

# run_check OUT ARGS...: `ddptop check ARGS...` with stdout in OUT, stderr in OUT.err. A run
# is cut off after 90 s so a hung controller fails the test instead of stalling the suite.
run_check() {
    local out=$1; shift
    local t0
    LAST_OUT=$out
    t0=$(date +%s%N)
    # In the background and waited for, so that a signal to the test runs its cleanup trap at
    # once (bash defers traps until a foreground child ends); the trap ends this run too.
    NO_COLOR=1 timeout -k 5 90 "$DDPTOP" check "$@" >"$out" 2>"$out.err" </dev/null &
    RUN_PID=$!
    wait "$RUN_PID"
    RC=$?
    RUN_PID=""
    ELAPSED_MS=$((($(date +%s%N) - t0) / 1000000))
}

# jassert NAME FILE EXPR...: one TAP line, ok when every expression holds on the document.
jassert() {
    local name=$1 file=$2; shift 2
    local diag
    if diag=$(/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/json_assert.py" "$file" "$@"); then
        tap_ok "$name"
    else
        tap_fail "$name"
        printf '%s\n' "$diag"
        [ -s "$file.err" ] && head -20 "$file.err" | sed 's/^/#   stderr: /'
    fi
}

# expect_rc NAME WANT: one TAP line on the last run's exit status, with its output on failure.
expect_rc() {
    if [ "$RC" = "$2" ]; then
        tap_ok "$1 (exit $RC)"
    else
        tap_fail "$1: exit $RC, want $2" "$(head -40 "$LAST_OUT" 2>/dev/null)" \
            "stderr: $(head -20 "$LAST_OUT.err" 2>/dev/null)"
    fi
}
