#!/usr/bin/env bash
# it_log_hold: the log writer's hold (launcher/record/logw_hold.c, docs/logs.md "The hold")
# loses nothing when the controller dies. Sixteen local ranks each print a numbered line
# every 5 ms (3,200 small pieces a second: the writer holds each rank's lines for up to 4 s
# while nobody reads the logs) and write the same lines to a copy of their own. The
# controller is SIGKILLed mid-run with lines held; `ddptop attach` takes the run over and
# every rank's log ends equal to its copy, byte for byte: what the writer held was never
# acknowledged, so the agent still had it and sent it again, once. Every process started
# names $T and is killed by pid at the end.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/ddptop-it-hold.XXXXXX) || exit 1
LOGS=$T/logs
RUN=hold-$$
RANKS=16
LINES=2000
cleanup() {
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T" "/tmp/ddptop-nccl-$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -m 700 "$T/xdg"
export XDG_RUNTIME_DIR=$T/xdg

if [ ! -x "$DDPTOP" ]; then tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; fi

# The rank: $1 numbered lines, one every 5 ms, to its stdout and to $2/copy-RANK.
cat >"$T/rank.py" <<'EOF'
import os, sys, time
rank, n = os.environ["RANK"], int(sys.argv[1])
with open(os.path.join(sys.argv[2], "copy-" + rank), "w") as copy:
    for i in range(n):
        line = "rank %s line %05d\n" % (rank, i)
        sys.stdout.write(line)
        sys.stdout.flush()
        copy.write(line)
        copy.flush()
        time.sleep(0.005)
EOF

bytes_of() { cat "$@" 2>/dev/null | wc -c; }
# every rank has printed for about 3 s (the hold is on after its first second)
printed() {
    local r
    for r in $(seq 0 $((RANKS - 1))); do
        [ "$(wc -l 2>/dev/null <"$T/copy-$r" || echo 0)" -ge 600 ] || return 1
    done
}

rj_start "$T/run.out" --discard --headless --no-check --nproc-per-node "$RANKS" --agent-grace 60 \
    --log-dir "$LOGS" --run-id "$RUN" -- /usr/bin/python3 "$T/rank.py" "$LINES" "$T"
if wait_until 60 printed; then
    copies=$(bytes_of "$T"/copy-*)
    logs=$(bytes_of "$LOGS/$RUN"/attempt-0/rank-*.log)
    kill -KILL "$RJ_PID"
    wait "$RJ_PID" 2>/dev/null
    RJ_PID=""
    echo "# at the SIGKILL the ranks had printed $copies bytes, their logs held $logs"
    timeout 120 "$DDPTOP" attach "$RUN" --headless --log-dir "$LOGS" >/dev/null 2>"$T/attach.err" </dev/null
    rc=$?
    tap_check "ddptop attach took the run over and it ended: exit 0 ($rc)" test "$rc" = 0 ||
        tail -8 "$T/attach.err" | sed 's/^/#   /'
    bad=""
    for r in $(seq 0 $((RANKS - 1))); do
        cmp -s "$T/copy-$r" "$LOGS/$RUN/attempt-0/rank-$r.log" || bad="$bad $r"
    done
    tap_check "every rank's log equals what it printed ($LINES lines, once each, in order) across the SIGKILL${bad:+ (not:$bad)}" \
        test -z "$bad"
else
    tap_fail "the ranks print before the SIGKILL" "$(tail -5 "$T/run.out.err" 2>/dev/null)"
fi
tap_check "no process of this test outlived it" wait_until 10 no_marker_pids "$T/rank.py"
tap_done
