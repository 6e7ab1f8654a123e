#!/usr/bin/env bash
# Integration: the srun relay is bounded as SSH is (issue 18). A fake srun, first on PATH,
# plays a misbehaving step for `ddptop run --slurm` (one node, n1) and the controller's peak
# memory (VmHWM) is read from /proc while it runs:
#  - one protocol line that never ends (a "+" piece after another, as fast as a pipe takes
#    them): n1 fails with the SSH path's message "ddptop-agent on n1 sent a line longer than
#    1048576 bytes", memory stays bounded (before: 3.3 GB in 6 s);
#  - one line of srun's output that never ends (no newline at all): the same;
#  - a fast stream of valid lines (about 360 MB) that the controller cannot take as fast as
#    they come: memory stays bounded (back-pressure: srun's output is not read while n1 holds
#    4 MiB; before: 875 MB), and nothing is lost: the agent's exit status, last in the stream,
#    is what the user is told;
#  - `srun: error: n1: task 0:` (ending right after the prefix; an out-of-bounds read before):
#    the user is told that n1's task ended, with srun's line; srun's last message without a
#    newline is shown too.
# Every job is killed at once if its memory passes the bound, so a regression cannot eat the
# machine. Needs no Slurm and no root.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh

HWM_LIMIT_KB=$((64 * 1024))   # the bounds allow ~20 MiB of buffers above a ~6 MiB controller
D=$(mktemp -d /tmp/ddptop-it-srun-relay.XXXXXX)
cleanup() {
    rj_cleanup
    kill_marker_pids "$D/bin/srun"
    rm -rf "$D"
    # the note of which nodes hold the agent, kept for the stand-in's job (docs/slurm.md)
    rm -f "/tmp/ddptop-$(id -u)/srun-itsrunrelay$$-4242-"* 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }
mkdir -p "$D/bin"
cat >"$D/bin/srun" <<'EOF'
#!/usr/bin/python3
# A misbehaving step: task 0 announces itself as n1, then does what FAKE_SRUN_MODE says.
import os, sys
mode = os.environ["FAKE_SRUN_MODE"]
out = sys.stdout.buffer
try:
    if mode == "errline":
        sys.stderr.write("srun: error: n1: task 0:\n")
        sys.exit(1)
    if mode == "nonewline":
        sys.stderr.write("srun: fatal: the last message, with no newline")
        sys.exit(1)
    out.write(b"0: =n1 -\n")
    out.flush()
    if mode == "endless_piece":
        blk = (b"0: +384" + b"a" * 0x384 + b"\n") * 1000
        while True:
            out.write(blk)
    elif mode == "endless_raw":
        blk = b"a" * 65536
        out.write(b"0: +384")
        while True:
            out.write(blk)
    elif mode == "stream":
        body = b'{"x":"' + b"b" * 0x37c + b'"}'
        blk = (b"0: .%03x" % len(body) + body + b"\n") * 1000
        for _ in range(400):
            out.write(blk)
        out.write(b"0: .002!0\n")
        out.flush()
except BrokenPipeError:
    pass
sys.exit(0)
EOF
chmod 755 "$D/bin/srun"

# job MODE: runs `ddptop run --slurm` against the fake srun, sampling VmHWM every 0.1 s and
# killing it at once past HWM_LIMIT_KB (RJ_RC 137 then) or after 120 s (124).
job() {
    local mode=$1 deadline
    PATH="$D/bin:$PATH" SLURM_JOB_NODELIST=n1 SLURM_JOB_ID=4242 SLURM_CLUSTER_NAME=itsrunrelay$$ FAKE_SRUN_MODE=$mode \
        rj_start "$D/out.$mode" --slurm --headless --log-dir "$D/logs" -- true
    deadline=$(($(date +%s) + 120))
    RJ_RC=""
    while kill -0 "$RJ_PID" 2>/dev/null; do
        rj_sample
        if [ "$RJ_HWM_KB" -gt "$HWM_LIMIT_KB" ] || [ "$(date +%s)" -ge "$deadline" ]; then
            RJ_RC=$([ "$RJ_HWM_KB" -gt "$HWM_LIMIT_KB" ] && echo 137 || echo 124)
            kill -KILL "$RJ_PID" 2>/dev/null
            break
        fi
        grep -q '^State:.*Z' "/proc/$RJ_PID/status" 2>/dev/null && break
        sleep 0.1
    done
    wait "$RJ_PID"
    local rc=$?
    [ -n "$RJ_RC" ] || RJ_RC=$rc
    RJ_PID=""
    RJ_MS=$((($(date +%s%N) - RJ_T0) / 1000000))
}

# told MODE TEXT NAME: one TAP line: the job refused to launch (3), saying TEXT of n1.
told() {
    local mode=$1 text=$2 name=$3
    if [ "$RJ_RC" = 3 ] && grep -F -- "$text" "$D/out.$mode" | grep -q 'n1'; then
        tap_ok "$name (exit 3 in $RJ_MS ms)"
    else
        tap_fail "$name: exit $RJ_RC, want 3 and '$text'" "$(tail -15 "$D/out.$mode")" \
            "stderr: $(tail -5 "$D/out.$mode.err")"
    fi
}

bounded() {
    if [ "$RJ_HWM_KB" -gt 0 ] && [ "$RJ_HWM_KB" -le "$HWM_LIMIT_KB" ]; then
        tap_ok "$1: the controller's peak memory $((RJ_HWM_KB / 1024)) MiB (bound $((HWM_LIMIT_KB / 1024)) MiB)"
    else
        tap_fail "$1: the controller's peak memory ${RJ_HWM_KB} kB, bound ${HWM_LIMIT_KB} kB (exit $RJ_RC)"
    fi
}

LONG="ddptop-agent on n1 sent a line longer than 1048576 bytes"

job endless_piece
bounded "endless protocol line"
told endless_piece "$LONG" "endless protocol line: n1 fails with the SSH path's message"

job endless_raw
bounded "endless line of srun's output"
told endless_raw "$LONG" "endless line of srun's output: n1 fails with the same message"

job stream
bounded "fast stream of 360 MB"
told stream "the agent on n1 exited with status 0" "fast stream: every line read, the exit status last"

job errline
told errline "the agent's task on n1 ended: srun: error: n1: task 0:" \
    "'srun: error: n1: task 0:' (cut after the prefix): n1's task ended, srun's line shown"

job nonewline
told nonewline "srun: fatal: the last message, with no newline" "srun's last message without a newline is read and shown"

wait_until 10 no_marker_pids "$D/bin/srun"
tap_check "no fake srun left behind" no_marker_pids "$D/bin/srun"
tap_done
