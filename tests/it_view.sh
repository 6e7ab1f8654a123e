#!/usr/bin/env bash
# Integration: `ddptop view RUN` on a real terminal (a private tmux server, read back with
# capture-pane) on runs that real `ddptop run --headless` jobs left behind (local ranks, no
# SSH): a succeeded run of ddptop-train (DONE, each rank's last step, a loss chart, the events
# through the end), a failed run (FAILED, the root cause naming the rank, that rank's lines in
# the log pane), a run restarted once (attempt 1 shown, `[` goes back to attempt 0's lines),
# and a run with GPU samples from tests/fakenvml, the TEST DOUBLE of libnvidia-ml.so.1 (the G
# view). Keys that act on processes (r, K, s, d) only say so and change nothing; q (and Ctrl-C)
# quits at once with status 0 and the terminal back in its modes. A bogus id, a directory that is no
# run and a run still running are refused with a message and their exit status. Every process
# started here is ended by id, even on failure.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only: no server is started here
. tests/lib/run_job.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
SOCK=ddpt-view-$$
. tests/lib/tmux.sh
T_DIR=$(mktemp -d /tmp/it_view.XXXXXX)
chmod 755 "$T_DIR"
cleanup() {
    tmux_cleanup
    rj_cleanup
    kill_marker_pids "$T_DIR"
    rm -rf "$T_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
LOGS=$T_DIR/logs
RID=view$$-$RANDOM
COMMON=(--headless --no-check --nproc-per-node 2 --log-dir "$LOGS" --term-timeout 2 --hang-timeout 0)

if [ ! -x "$DDPTOP" ]; then tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; fi

check_screen() {   # check_screen NAME SESSION REGEX SECONDS
    if wait_screen "$2" "$3" "$4"; then tap_ok "$1"; else tap_fail "$1" "$SCREEN"; fi
}
# view SESSION ARGS...: `ddptop view ARGS` in a new 120x40 window; its exit status and the
# terminal's modes afterwards (stty) are printed when it ends.
view() {
    local s=$1; shift
    local cmd="cd $T_DIR && LANG=C.UTF-8 TERM=screen-256color $DDPTOP view --log-dir $LOGS $*"
    cmd+="; echo VIEW-EXIT=\$?; stty -a | tr ' ;' '\n\n' | grep -xE -- '-?(icanon|echo)' | paste -sd' '; sleep 600"
    T new-session -d -s "$s" -x 120 -y 40 "$cmd"
}

# ---------------------------------------------------------------------------------------
# The runs.
rj_run "$T_DIR/ok.out" "${COMMON[@]}" --master-port "$(sshd_pick_port)" --run-id "$RID-ok" \
    -- "$TRAIN" --steps 30
rj_expect_rc "run 1: ddptop-train, 2 ranks, 30 steps" 0

rj_run "$T_DIR/fail.out" "${COMMON[@]}" --master-port "$(sshd_pick_port)" --run-id "$RID-fail" \
    -- sh -c 'echo "step 1 loss 2.5"
              if [ "$RANK" = 1 ]; then echo "rank 1 says CUDA-ERROR-XYZ"; exit 3; fi
              exec sleep 30' "$T_DIR/marker"
rj_expect_rc "run 2: rank 1 exits 3, the job fails" 1

# rank 0 exits 0 in attempt 0 rather than being stopped (tests/it_runs_ls.sh says why)
rj_run "$T_DIR/restart.out" "${COMMON[@]}" --master-port "$(sshd_pick_port)" --run-id "$RID-restart" \
    --max-restarts 1 \
    -- sh -c 'echo "attempt $TORCHELASTIC_RESTART_COUNT rank $RANK says hi"
              [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] || exit 0
              [ "$RANK" = 1 ] || exit 0
              sleep 0.5; exit 4' "$T_DIR/marker"
rj_expect_rc "run 3: rank 1 fails in attempt 0, attempt 1 succeeds" 0

# ---------------------------------------------------------------------------------------
# The succeeded run.
view ok "$RID-ok"
check_screen "succeeded run: the header says DONE" ok "DONE \| run $RID-ok" 15
check_screen "succeeded run: both ranks exited at step 30" ok '^ +1 localhost .*exited +30 ' 5
if grep -qE '^ +0 localhost .*exited +30 ' <<<"$SCREEN"; then tap_ok "succeeded run: rank 0's row too"
else tap_fail "succeeded run: rank 0's row too" "$SCREEN"; fi
# the axis's steps under the plot, and braille dots in it
if grep -q 'Loss: mean' <<<"$SCREEN" && grep -qE '^ {60,}10 +30 *$' <<<"$SCREEN" &&
   grep -qF -e '⣀' -e '⠉' -e '⢄' -e '⠑' <<<"$SCREEN"; then tap_ok "succeeded run: the loss chart is drawn"
else tap_fail "succeeded run: the loss chart is drawn" "$SCREEN"; fi
if grep -qE 'end +run' <<<"$SCREEN" && grep -q 'succeeded' <<<"$SCREEN"; then tap_ok "succeeded run: the events end with the end of the run"
else tap_fail "succeeded run: the events end with the end of the run" "$SCREEN"; fi
check_screen "succeeded run: rank 0's log with its step lines" ok 'step 30 +loss' 5

sum_before=$(md5sum "$LOGS/$RID-ok/events.jsonl")
for k in r K s d; do
    T send-keys -t ok "$k"
    check_screen "read-only: $k says it does nothing" ok "view of a finished run: $k does nothing" 5
done
sleep 0.3
if [ "$(md5sum "$LOGS/$RID-ok/events.jsonl")" = "$sum_before" ] && grep -q "DONE | run $RID-ok" <<<"$SCREEN" &&
   no_marker_pids "$LOGS/$RID-ok" ddptop-agent; then
    tap_ok "read-only: nothing changed (the header, events.jsonl, no agent started)"
else
    tap_fail "read-only: nothing changed (the header, events.jsonl, no agent started)" "$SCREEN"
fi
T send-keys -t ok q
check_screen "q quits at once with exit status 0" ok 'VIEW-EXIT=0' 5
wait_screen ok '^-?icanon -?echo$' 5
if grep -qx 'icanon echo' <<<"$SCREEN" && [ "$(T display -p -t ok '#{alternate_on}')" = 0 ]; then
    tap_ok "the terminal is restored (icanon echo, the normal screen)"
else
    tap_fail "the terminal is restored (icanon echo, the normal screen)" "$SCREEN"
fi

# ---------------------------------------------------------------------------------------
# The failed run: it opens on the rank that failed.
view fail "$RID-fail"
check_screen "failed run: the header says FAILED" fail "FAILED \| run $RID-fail" 15
check_screen "failed run: the root cause names the rank" fail 'root cause: rank 1 on localhost exited with code 3' 5
check_screen "failed run: the failing rank's log lines are shown" fail 'Log of rank 1 .*|rank 1 says CUDA-ERROR-XYZ' 5
if grep -q 'rank 1 says CUDA-ERROR-XYZ' <<<"$SCREEN" && grep -q 'Log of rank 1' <<<"$SCREEN"; then
    tap_ok "failed run: rank 1's log pane holds its last line"
else
    tap_fail "failed run: rank 1's log pane holds its last line" "$SCREEN"
fi
T send-keys -t fail Tab /
T send-keys -t fail -l 'CUDA-ERROR'
T send-keys -t fail Enter
check_screen "failed run: / searches the log" fail 'rank 1 says CUDA-ERROR-XYZ' 5
T send-keys -t fail q
check_screen "failed run: q quits (status 0)" fail 'VIEW-EXIT=0' 5

# ---------------------------------------------------------------------------------------
# The restarted run: attempt 1, and `[` back to attempt 0.
view restart "$RID-restart"
check_screen "restarted run: DONE in attempt 1" restart "DONE \| run $RID-restart \| attempt 1" 15
check_screen "restarted run: the log shows attempt 1's lines" restart 'attempt 1 rank 0 says hi' 5
T send-keys -t restart Tab '['
check_screen "restarted run: [ shows attempt 0's lines" restart 'attempt 0 rank 0 says hi' 5
if grep -q 'attempt 0 of 0-1' <<<"$SCREEN" && ! grep -q 'attempt 1 rank 0 says hi' <<<"$SCREEN"; then
    tap_ok "restarted run: the pane says which attempt it shows"
else
    tap_fail "restarted run: the pane says which attempt it shows" "$SCREEN"
fi
T send-keys -t restart ']'
check_screen "restarted run: ] back to attempt 1" restart 'attempt 1 rank 0 says hi' 5
T send-keys -t restart q
check_screen "restarted run: q quits (status 0)" restart 'VIEW-EXIT=0' 5

# ---------------------------------------------------------------------------------------
# Refused: a bogus id, a directory that is no run, a run still running.
out=$("$DDPTOP" view "no-such-$RID" --log-dir "$LOGS" 2>&1 </dev/null)
rc=$?
if [ $rc = 2 ] && grep -qF "no run 'no-such-$RID' under $LOGS" <<<"$out" && grep -q 'ddptop ls' <<<"$out"; then
    tap_ok "a bogus run id: exit 2, the message names it and the log directory"
else
    tap_fail "a bogus run id: exit 2, the message names it and the log directory" "rc=$rc" "$out"
fi
mkdir -p "$T_DIR/not-a-run"
out=$("$DDPTOP" view "$T_DIR/not-a-run" 2>&1 </dev/null)
rc=$?
if [ $rc = 2 ] && grep -qF "'$T_DIR/not-a-run' is not a run directory: it has no events.jsonl" <<<"$out"; then
    tap_ok "a directory without events.jsonl: exit 2, the message names it"
else
    tap_fail "a directory without events.jsonl: exit 2, the message names it" "rc=$rc" "$out"
fi

rj_start "$T_DIR/live.out" "${COMMON[@]}" --nproc-per-node 1 --master-port "$(sshd_pick_port)" \
    --run-id "$RID-live" -- sh -c 'echo "live rank up"; exec sleep 60' "$T_DIR/marker"
if wait_until 15 grep -qs "live rank up" "$LOGS/$RID-live/attempt-0/rank-0.log"; then
    out=$("$DDPTOP" view "$RID-live" --log-dir "$LOGS" 2>&1 </dev/null)
    rc=$?
    if [ $rc = 1 ] && grep -qF "run $RID-live is still running" <<<"$out" && grep -qF "ddptop attach $RID-live" <<<"$out"; then
        tap_ok "a run still running: exit 1, ddptop attach is named"
    else
        tap_fail "a run still running: exit 1, ddptop attach is named" "rc=$rc" "$out"
    fi
else
    tap_fail "a run still running: it started" "$(tail -5 "$T_DIR/live.out.err")"
fi
kill -TERM "$RJ_PID" 2>/dev/null
rj_wait 20

# ---------------------------------------------------------------------------------------
# GPU samples (tests/fakenvml, a test double): the G view.
FAKE=$BUILD_DIR/fakenvml
if [ -e "$FAKE/libnvidia-ml.so.1" ]; then
    cat >"$T_DIR/state" <<'S'
gpu 0 name=Fake_H100 util=98 mem_used=61440 mem_total=81920 power=612 limit=700 temp=71 sm=1980 throttle=0 ecc=0
gpu 1 name=Fake_H100 util=42 mem_used=20480 mem_total=81920 power=300 limit=700 temp=66 sm=1980 throttle=0 ecc=0
S
    STATE=$T_DIR/state FAKE_NVML_STATE=$T_DIR/state LD_LIBRARY_PATH=$FAKE \
        rj_run "$T_DIR/gpu.out" "${COMMON[@]}" --gpu-interval 200 --master-port "$(sshd_pick_port)" \
        --run-id "$RID-gpu" -- sh -c 'echo "pid $LOCAL_RANK $$" >>"$STATE"; sleep 1.5; echo gpu rank done' \
        "$T_DIR/marker"
    rj_expect_rc "run 4: two ranks with the fake NVML" 0
    view gpu "$RID-gpu"
    check_screen "GPU run: the view opens" gpu "DONE \| run $RID-gpu" 15
    T send-keys -t gpu G
    check_screen "GPU run: G shows the node's GPUs from gpu.jsonl" gpu 'localhost: 2 GPUs' 5
    check_screen "GPU run: each GPU with its rank and utilisation" gpu 'GPU 0 +r0 +98%' 5
    T send-keys -t gpu Escape C-c
    check_screen "GPU run: Ctrl-C quits too (status 0)" gpu 'VIEW-EXIT=0' 5
else
    tap_fail "the NVML test double is built (make tests)"
fi

tmux_cleanup            # its server's command lines hold the directory too
if no_marker_pids "$T_DIR"; then tap_ok "no process of the runs outlived them"
else tap_fail "no process of the runs outlived them" "$(marker_pids "$T_DIR" | xargs -r ps -o pid,args -p)"; fi
tap_done
