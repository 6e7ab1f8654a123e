# Running `ddptop run` from the shell tests and the benchmark: one job in the background
# with its headless output, exit status and wall time kept; bounded waits (poll with a
# deadline, never a fixed sleep); the controller's memory and CPU read from /proc while it
# runs; assertions on events.jsonl; and the pids of every process whose command line holds a
# marker unique to the test (its temporary directory), to prove that none outlived the job.
# Needs tests/lib/tap.sh sourced first.

DDPTOP=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}/ddptop
TRAIN=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}/ddptop-train
RJ_PID=""      # the ddptop process of the job in progress
RJ_RC=""       # exit status of the last job (124: still running at its deadline, killed)
RJ_MS=""       # its wall time in milliseconds
RJ_OUT=""      # its stdout file (stderr in $RJ_OUT.err)
RJ_T0=""       # its start, ns since the epoch
RJ_HWM_KB=0    # the controller's peak RSS (VmHWM) as last read by rj_sample
RJ_CPU_TICKS=0 # the controller's CPU time (utime + stime, clock ticks) as last read

# rj_start OUT [--discard] ARGS...: starts `ddptop run ARGS...` in the background, stdout in
# OUT (--discard: in /dev/null), stderr in OUT.err, stdin from /dev/null (so headless). RJ_PID
# is ddptop itself (no wrapper), so a test can signal it and read its /proc entry.
rj_start() {
    local out=$1 sink=$1; shift
    if [ "${1:-}" = --discard ]; then sink=/dev/null; shift; fi
    RJ_OUT=$out
    RJ_HWM_KB=0
    RJ_CPU_TICKS=0
    RJ_T0=$(date +%s%N)
    NO_COLOR=1 "$DDPTOP" run "$@" >"$sink" 2>"$out.err" </dev/null &
    RJ_PID=$!
}

# rj_sample: reads the running controller's VmHWM and CPU ticks (no-op once it exited).
rj_sample() {
    [ -n "$RJ_PID" ] || return 0
    local hwm st
    hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$RJ_PID/status" 2>/dev/null)
    [ -n "$hwm" ] && [ "$hwm" -gt "$RJ_HWM_KB" ] && RJ_HWM_KB=$hwm
    st=$(cat "/proc/$RJ_PID/stat" 2>/dev/null) || return 0
    st=${st##*) }                 # fields after "(comm) ", state first
    set -- $st
    [ $# -ge 13 ] && RJ_CPU_TICKS=$((${12} + ${13}))
    return 0
}

# rj_wait [SECONDS]: waits for the job (default 90 s), sampling it every 0.1 s; a job still
# running at the deadline is killed and its status is 124. Sets RJ_RC and RJ_MS.
rj_wait() {
    local limit=${1:-90} deadline
    deadline=$(($(date +%s) + limit))
    while kill -0 "$RJ_PID" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
        rj_sample
        # Exited but not yet reaped: /proc still has it as a zombie, stop sampling.
        grep -q '^State:.*Z' "/proc/$RJ_PID/status" 2>/dev/null && break
        sleep 0.1
    done
    if kill -0 "$RJ_PID" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$RJ_PID/status" 2>/dev/null; then
        kill -TERM "$RJ_PID" 2>/dev/null
        local i
        for i in $(seq 1 50); do kill -0 "$RJ_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$RJ_PID" 2>/dev/null
        wait "$RJ_PID" 2>/dev/null
        RJ_RC=124
    else
        wait "$RJ_PID"
        RJ_RC=$?
    fi
    RJ_PID=""
    RJ_MS=$((($(date +%s%N) - RJ_T0) / 1000000))
}

# rj_run OUT [--limit S] ARGS...: rj_start then rj_wait.
rj_run() {
    local out=$1 limit=90; shift
    if [ "${1:-}" = --limit ]; then limit=$2; shift 2; fi
    rj_start "$out" "$@"
    rj_wait "$limit"
}

# For the test's EXIT trap: ends a job still in progress.
rj_cleanup() {
    if [ -n "$RJ_PID" ]; then
        kill -TERM "$RJ_PID" 2>/dev/null
        local i
        for i in $(seq 1 50); do kill -0 "$RJ_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$RJ_PID" 2>/dev/null
        wait "$RJ_PID" 2>/dev/null
        RJ_PID=""
    fi
}

# rj_expect_rc NAME WANT: one TAP line on the last job's exit status, its output on failure.
rj_expect_rc() {
    if [ "$RJ_RC" = "$2" ]; then
        tap_ok "$1 (exit $RJ_RC, ${RJ_MS} ms)"
    else
        tap_fail "$1: exit $RJ_RC, want $2" "stdout (last 30 lines):" "$(tail -30 "$RJ_OUT" 2>/dev/null)" \
            "stderr: $(tail -20 "$RJ_OUT.err" 2>/dev/null)"
    fi
}

# wait_until SECONDS CMD...: polls CMD every 0.1 s until it succeeds (0) or SECONDS (may be
# fractional) passed (1).
wait_until() {
    local limit=$1; shift
    local deadline=$(($(date +%s%N) + $(awk -v s="$limit" 'BEGIN { printf "%d", s * 1000 }') * 1000000))
    while :; do
        "$@" && return 0
        [ "$(date +%s%N)" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

# marker_pids MARKER [COMM]: pids of processes whose command line contains MARKER (a path
# unique to this test), optionally only those whose executable name is COMM. Never this shell.
marker_pids() {
    local m=$1 comm=${2:-} p
    for p in $(pgrep -f -- "$m" 2>/dev/null); do
        [ "$p" = "$$" ] && continue
        [ "$p" = "$BASHPID" ] && continue
        if [ -n "$comm" ]; then
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$comm" ] || continue
        fi
        echo "$p"
    done
}
no_marker_pids() { [ -z "$(marker_pids "$@")" ]; }

# kill_marker_pids MARKER: the trap's last resort for processes a failed test left behind
# (each found by the unique marker, killed by pid).
kill_marker_pids() {
    local p
    for p in $(marker_pids "$1"); do kill -KILL "$p" 2>/dev/null; done
}

# ev_assert NAME EVENTS_JSONL EXPR...: one TAP line, ok when every Python expression holds.
# Names: E (every event, in file order), ev(kind) (events of that kind), cause (the first
# root_cause event or None), t(e) (its time as seconds since the epoch).
ev_assert() {
    local name=$1 file=$2; shift 2
    local diag
    if diag=$(/usr/bin/python3 - "$file" "$@" <<'PY'
import json, sys, datetime
path, exprs = sys.argv[1], sys.argv[2:]
E = []
try:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            E.append(json.loads(line))
except (OSError, ValueError) as e:
    print(f"# {path}: {e}")
    sys.exit(1)
def ev(kind):
    return [e for e in E if e.get("kind") == kind]
def t(e):
    return datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
rc = ev("root_cause")
env = {"E": E, "ev": ev, "cause": rc[0] if rc else None, "t": t, "json": json}
bad = 0
for x in exprs:
    try:
        ok = eval(x, env)
    except Exception as ex:
        ok = False
        print(f"# {x}: {type(ex).__name__}: {ex}")
    if not ok:
        bad += 1
        print(f"# false: {x}")
if bad:
    for e in E[-25:]:
        print("#   " + json.dumps(e)[:400])
sys.exit(1 if bad else 0)
PY
    ); then
        tap_ok "$name"
    else
        tap_fail "$name"
        printf '%s\n' "$diag"
    fi
}
