#!/usr/bin/env bash
# Integration: the training health rules (docs/run.md "Training health") with real processes:
# two local ranks (no hostfile) of a Python script that prints `step N loss X` lines and keeps
# a snapshot the way a trainer does (rank 0, every 10 steps, never of a NaN model: the step
# whose update took the NaN gradients is not kept).
#   restart  rank 1's loss becomes `nan` at step 50 (on every attempt: a restart from the
#            snapshot meets the same data), rank 0's at 51 (through the "gradients" it waits
#            for); --on-nan restart --max-restarts 1: one restart from the snapshot, then the
#            job stops as failed with the NaN root cause, rank 1 first and rank 0 following;
#   spike    a fixture whose rank 0 loss jumps from ~2 to 20 at step 30: --loss-spike 3:5
#            --on-spike stop ends the job with the spike as root cause (class loss_spike);
#   none     --on-nan none: the nan event only, the job runs to its end (exit 0), and the
#            final summary's mean loss leaves the NaN rank out;
#   default  no --on-nan: a NaN stops the job (the default is stop), without a restart.
# The option errors are usage errors (exit 2).
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only: no server is started here
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_health.XXXXXX)
chmod 755 "$T"
cleanup() {
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
LOGS=$T/logs
RID=health$$

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }

cat >"$T/ranks.py" <<'PY'
# Steps with a loss each; rank 1's loss becomes NaN from step NAN_AT on, rank 0's a step later
# (once rank 1 said it: its marker file). SPIKE_AT: rank 0's loss is 20 at that step alone.
# Rank 0 keeps the snapshot (the last step done) every 10 steps.
import math, os, sys, time

rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
snap, steps, nan_at, spike_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
marker = f"{snap}.nan-{attempt}"
start = int(open(snap).read()) if attempt > 0 and os.path.exists(snap) else 0
print(f"RESUME attempt={attempt} from={start}", flush=True)
for step in range(start + 1, steps + 1):
    loss = 2.0 + 0.01 * math.sin(step)
    if step == spike_at and rank == 0:
        loss = 20.0
    if nan_at and rank == 1 and step >= nan_at:
        loss = float("nan")
    if nan_at and rank == 0 and step >= nan_at + 1:
        deadline = time.time() + 5
        while not os.path.exists(marker) and time.time() < deadline:
            time.sleep(0.001)
        loss = float("nan")
    print(f"step {step} loss {loss}", flush=True)
    if math.isnan(loss) and rank == 1:
        open(marker, "w").close()
    # the update of step NAN_AT already had rank 1's NaN gradients: no snapshot from there on
    if rank == 0 and step % 10 == 0 and not (nan_at and step >= nan_at):
        with open(snap + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(snap + ".tmp", snap)
    time.sleep(0.03)
print(f"DONE attempt={attempt}", flush=True)
PY

# run_job NAME LIMIT STEPS NAN_AT SPIKE_AT [ARGS...]: one job to its end; RUN_DIR its logs.
run_job() {
    local name=$1 limit=$2 steps=$3 nan_at=$4 spike_at=$5; shift 5
    RUN_DIR=$LOGS/$RID-$name
    rj_run "$T/$name.out" --limit "$limit" --headless --no-check --nproc-per-node 2 \
        --master-port "$(sshd_pick_port)" --log-dir "$LOGS" --run-id "$RID-$name" --term-timeout 3 "$@" \
        -- "$PY" "$T/ranks.py" "$T/$name.snap" "$steps" "$nan_at" "$spike_at"
}

# ---------------------------------------------------------------------------------------
# restart: one restart from the snapshot, then failed with the NaN as root cause.
run_job restart 90 200 50 0 --on-nan restart --max-restarts 1
rj_expect_rc "restart: the job ends as failed after its one restart" 1
ev_assert "restart: a nan event per attempt naming rank 1 at step 50; one restart after the NaN" \
    "$RUN_DIR/events.jsonl" \
    "[(e['attempt'], e['rank'], e.get('step')) for e in ev('nan')] == [(0, 1, 50), (1, 1, 50)]" \
    "ev('nan')[0]['text'] == 'loss became NaN on rank 1 at step 50 (localhost)'" \
    "len(ev('restart')) == 1 and 'after the loss became NaN' in ev('restart')[0]['text']" \
    "len(ev('done')) == 0 and ev('end')[-1]['state'] == 'failed'"
ev_assert "restart: the root cause of each attempt is the NaN: rank 1 first, class loss_nan, the fix" \
    "$RUN_DIR/events.jsonl" \
    "[c['attempt'] for c in ev('root_cause')] == [0, 1]" \
    "all(c['health'] == 'nan' and c['rank'] == 1 and c['step'] == 50 for c in ev('root_cause'))" \
    "all(c['class'] == 'loss_nan' and 'gradient clipping' in c['fix'] for c in ev('root_cause'))" \
    "all(c['exit_code'] is None and c['signal'] is None for c in ev('root_cause'))" \
    "all(c['text'].startswith('root cause: loss became NaN on rank 1 at step 50 (first rank; ') for c in ev('root_cause'))" \
    "all(c['evidence'] == 'step 50 loss nan' and c['evidence_rank'] == 1 for c in ev('root_cause'))"
# rank 0 goes NaN a step after rank 1; it is counted when it said so before it was stopped
followed=$(/usr/bin/python3 -c 'import json,sys
c=[json.loads(l) for l in open(sys.argv[1]) if "\"root_cause\"" in l][-1]
print(c["followers"])' "$RUN_DIR/events.jsonl" 2>/dev/null)
if grep -q "root cause: loss became NaN on rank 1 at step 50 (first rank; $followed followed within 2 steps)" "$RUN_DIR/events.jsonl" 2>/dev/null ||
   { [ "$followed" = 0 ] && grep -q "(first rank; no other rank followed within 2 steps)" "$RUN_DIR/events.jsonl"; }; then
    tap_ok "restart: the root cause counts the ranks that followed ($followed: rank 0 at step 51)"
else
    tap_fail "restart: the followers in the root cause" "$(grep root_cause "$RUN_DIR/events.jsonl" 2>&1 | tail -2)"
fi
resumed=$(sed -n 's/^RESUME attempt=1 from=//p' "$RUN_DIR/attempt-1/rank-0.log" 2>/dev/null)
if [ "$resumed" = 40 ]; then
    tap_ok "restart: attempt 1 resumed from the snapshot (step $resumed), and no attempt 2"
else
    tap_fail "restart: attempt 1 resumes from step 40 (got '$resumed')" "$(ls "$RUN_DIR" 2>&1)"
fi
[ -e "$RUN_DIR/attempt-2" ] && tap_fail "restart: no attempt 2 (--max-restarts 1)" "$(ls "$RUN_DIR")"
if grep -q '^\[ddptop\] root cause: loss became NaN on rank 1 at step 50 (first rank; ' "$T/restart.out" &&
   grep -q '^\[ddptop\]   class: loss NaN or inf' "$T/restart.out" &&
   grep -q '^\[ddptop\]   fix: lower the learning rate' "$T/restart.out" &&
   grep -q '^\[ddptop\] no restarts left (--max-restarts 1)' "$T/restart.out"; then
    tap_ok "restart: headless: the root cause, its class and fix, no restarts left"
else
    tap_fail "restart: headless lines" "$(grep '^\[ddptop\]' "$T/restart.out" | tail -30)"
fi
if ! grep -q 'mean loss inf\|mean loss nan' "$T/restart.out"; then
    tap_ok "restart: the final summary's mean loss is not poisoned by the NaN"
else
    tap_fail "restart: mean loss" "$(grep 'mean loss' "$T/restart.out")"
fi

# ---------------------------------------------------------------------------------------
# spike: --loss-spike 3:5 --on-spike stop on a fixture whose rank 0 jumps to 20 at step 30.
run_job spike 60 200 0 30 --loss-spike 3:5 --on-spike stop --max-restarts 1
rj_expect_rc "spike: the job ends as failed at the spike (stop: no restart)" 1
ev_assert "spike: one spike event naming rank 0 and step 30; the spike is the root cause" \
    "$RUN_DIR/events.jsonl" \
    "len(ev('spike')) == 1 and ev('spike')[0]['rank'] == 0 and ev('spike')[0]['step'] == 30" \
    "ev('spike')[0]['text'].startswith('loss spiked to 20 on rank 0 at step 30 (localhost): ')" \
    "'the median 2' in ev('spike')[0]['text'] and '(--loss-spike 3)' in ev('spike')[0]['text']" \
    "cause is not None and cause['health'] == 'spike' and cause['class'] == 'loss_spike' and cause['rank'] == 0" \
    "cause['text'].startswith('root cause: loss spiked above 3x the median of its last 5 on rank 0 at step 30')" \
    "len(ev('restart')) == 0 and len(ev('nan')) == 0"

# ---------------------------------------------------------------------------------------
# none: the event, and the job goes on to its end.
run_job none 60 70 50 0 --on-nan none
rj_expect_rc "none: the job runs to its end" 0
ev_assert "none: one nan event, no root cause, done" "$RUN_DIR/events.jsonl" \
    "len(ev('nan')) == 1 and ev('nan')[0]['rank'] == 1 and ev('nan')[0]['step'] == 50" \
    "cause is None and len(ev('done')) == 1"
# both ranks end NaN (rank 0 from 51): the summary says so rather than a mean of inf
if grep -q '^\[ddptop\] step min/median/max 70/70/70, loss NaN or inf on every rank that reported one' "$T/none.out"; then
    tap_ok "none: the final summary leaves the NaN ranks out of the mean"
else
    tap_fail "none: the final summary" "$(grep '^\[ddptop\]' "$T/none.out" | tail -5)"
fi

# ---------------------------------------------------------------------------------------
# default: without --on-nan a NaN stops the job as failed, with restarts allowed too (stop is
# not restart), the NaN as root cause.
run_job default 60 200 20 0 --max-restarts 2
rj_expect_rc "default: a NaN stops the job (--on-nan stop)" 1
ev_assert "default: the NaN is the root cause, no restart" "$RUN_DIR/events.jsonl" \
    "cause is not None and cause['health'] == 'nan' and cause['step'] == 20" \
    "len(ev('restart')) == 0 and not any(k.startswith('attempt-1') for k in __import__('os').listdir('$RUN_DIR'))"

# ---------------------------------------------------------------------------------------
# usage errors
for args in "--on-nan kill" "--on-spike restart" "--loss-spike 1" "--loss-spike 3:2" "--loss-spike x"; do
    # shellcheck disable=SC2086
    NO_COLOR=1 "$DDPTOP" run --headless $args -- true >"$T/usage.out" 2>&1 </dev/null
    rc=$?
    if [ $rc = 2 ] && grep -q -- "${args%% *}" "$T/usage.out"; then
        tap_ok "usage: '$args' is a usage error: $(head -1 "$T/usage.out")"
    else
        tap_fail "usage: '$args' exits 2 naming the option (exit $rc)" "$(cat "$T/usage.out")"
    fi
done

if wait_until 5 no_marker_pids "$T"; then tap_ok "no process of the test left"
else tap_fail "no process left" "$(ps -o pid,stat,args -p "$(marker_pids "$T" | tr '\n' ',')0" 2>&1)"; fi
tap_done
