#!/usr/bin/env bash
# Integration: --on-hang with a real PyTorch gloo job of two local ranks (no hostfile). Rank 1
# freezes on attempt 0: after a step's all_reduce it sleeps for good in freeze_here(), while
# rank 0 goes on to the next all_reduce and waits there. With --hang-timeout 6 the stall comes
# after a few seconds (6 s leaves room for two ranks importing torch on a busy machine: a stall
# while they start would take the stacks early), under each policy:
#   stacks   both ranks' stack files exist; the frozen rank's names where it froze (its Python
#            function with py-spy; the interpreter's sleep with gdb, which sees no Python frames);
#            the stand-in flight recorder dump is fetched; the job goes on until we stop it;
#   restart  stacks, then the attempt fails with the hang as root cause and the job restarts
#            (--max-restarts 1); attempt 1 resumes from the script's snapshot and succeeds;
#   stop     stacks, then exit 1 with a root cause naming the hang and rank 1;
#   none     the stall event only: no stacks, no stop.
# gloo writes no NCCL flight recorder dump: the script writes a stand-in at the path ddptop
# gave it (TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank), which proves that path, the agent making its
# directory, and the fetch. PyTorch comes from Debian (python3-torch, `make deps`).
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only: no server is started here
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_on_hang.XXXXXX)
chmod 755 "$T"
cleanup() {
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T" /tmp/ddptop-nccl-"hang$$"-*
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
LOGS=$T/logs
RID=hang$$

if ! $PY -c 'import torch.distributed as d; assert d.is_available()' 2>/dev/null; then
    tap_fail "/usr/bin/python3 imports torch.distributed (install python3-torch: make deps)"; tap_done; exit 1
fi
[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }

cat >"$T/on_hang.py" <<'PY'
# Two gloo ranks; rank 1 freezes on attempt 0 after step FREEZE's all_reduce. Rank 0 keeps a
# snapshot of the last step done, which a later attempt resumes from.
import json, os, sys, time

rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
snap, steps, freeze_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def step_line(step):
    print(json.dumps({"event": "step", "step": step, "loss": 1.0 / (step + 1)}), flush=True)

start = int(open(snap).read()) if attempt > 0 and os.path.exists(snap) else 0
print(f"RESUME attempt={attempt} from={start}", flush=True)
step_line(start)   # a step before torch loads: the stall clock starts from here

import torch
import torch.distributed as dist

torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="env://")
trace = os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
if trace:   # the stand-in for PyTorch's flight recorder dump
    with open(trace + str(rank), "w") as f:
        f.write(f"FAKE-FR rank={rank} attempt={attempt}\n")

def freeze_here():
    while True:
        time.sleep(3600)

for step in range(start + 1, steps + 1):
    t = torch.ones(1)
    dist.all_reduce(t)
    if attempt == 0 and rank == 1 and step == freeze_at:
        freeze_here()
    if rank == 0:
        with open(snap + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(snap + ".tmp", snap)
    step_line(step)
    time.sleep(0.15)
dist.destroy_process_group()
print(f"DONE attempt={attempt}", flush=True)
PY

# start_job NAME POLICY [ARGS...]: a job in the background; RUN_DIR is its log directory.
start_job() {
    local name=$1 policy=$2; shift 2
    RUN_DIR=$LOGS/$RID-$name
    rj_start "$T/$name.out" --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
        --log-dir "$LOGS" --run-id "$RID-$name" --hang-timeout 6 --on-hang "$policy" --term-timeout 3 "$@" \
        -- "$PY" "$T/on_hang.py" "$T/$name.snap" 12 3
}
has_event() { grep -q "\"kind\":\"$2\"" "$1/events.jsonl" 2>/dev/null; }
# stop_job: SIGTERM to ddptop, as a person's Ctrl-C; then wait for it.
stop_job() {
    kill -TERM "$RJ_PID" 2>/dev/null
    rj_wait 30
}

# ---------------------------------------------------------------------------------------
# stacks: the files, the event, and the job going on.
start_job stacks stacks
if wait_until 60 has_event "$RUN_DIR" stacks; then
    tap_ok "stacks: a stacks event after the stall"
else
    tap_fail "stacks: a stacks event after the stall" "$(tail -20 "$T/stacks.out")"
fi
S=$RUN_DIR/attempt-0/stacks
if [ -s "$S/rank-0.txt" ] && [ -s "$S/rank-1.txt" ]; then
    tap_ok "stacks: attempt-0/stacks/rank-0.txt and rank-1.txt written"
else
    tap_fail "stacks: both rank files" "$(ls -la "$S" 2>&1)"
fi
tool=$(sed -n 's/^taken with: //p' "$S/rank-1.txt" 2>/dev/null)
case $tool in
    py-spy) want='freeze_here' ;;
    gdb) want='time_sleep|pysleep|clock_nanosleep' ;;
    *) want='hrtimer_nanosleep|do_nanosleep|nanosleep' ;;
esac
if grep -Eq "$want" "$S/rank-1.txt" 2>/dev/null; then
    tap_ok "stacks: the frozen rank's file names where it sleeps ($tool: $(grep -Eo "$want" "$S/rank-1.txt" | head -1))"
else
    tap_fail "stacks: the frozen rank's file names its frame ($tool, want /$want/)" "$(head -40 "$S/rank-1.txt" 2>&1)"
fi
where0=$(sed -n 's/^where: //p' "$S/rank-0.txt" 2>/dev/null)
tool0=$(sed -n 's/^taken with: //p' "$S/rank-0.txt" 2>/dev/null)
# all_reduce when the collective's code is named (py-spy, or gloo with symbols); Debian's gloo
# build names only the wait for it.
if [ "$tool0" = proc ] || [ "$where0" = all_reduce ] || [ "$where0" = "c10d::Work::wait (a collective)" ]; then
    tap_ok "stacks: rank 0 is where it waits: '$where0' ($tool0)"
else
    tap_fail "stacks: rank 0 waits in all_reduce or a c10d wait, not '$where0' ($tool0)" "$(head -60 "$S/rank-0.txt" 2>&1)"
fi
if grep -qx 'FAKE-FR rank=1 attempt=0' "$S/nccl-trace-1" 2>/dev/null && grep -qx 'FAKE-FR rank=0 attempt=0' "$S/nccl-trace-0" 2>/dev/null; then
    tap_ok "stacks: each rank's flight recorder file fetched from the node as nccl-trace-R"
else
    tap_fail "stacks: flight recorder files" "$(ls -la "$S" 2>&1)" "$(grep stacks "$RUN_DIR/events.jsonl" 2>&1)"
fi
sleep 2
if kill -0 "$RJ_PID" 2>/dev/null && ! has_event "$RUN_DIR" stop && ! has_event "$RUN_DIR" root_cause; then
    tap_ok "stacks: the job goes on after the stacks"
else
    tap_fail "stacks: the job goes on" "$(tail -20 "$T/stacks.out")"
fi
stop_job
rj_expect_rc "stacks: stopped by SIGTERM" 1
ev_assert "stacks: events: a stall, one stacks event naming the directory and rank 1 in its summary" \
    "$RUN_DIR/events.jsonl" \
    "len(ev('stall')) >= 1" "len(ev('stacks')) == 1" \
    "'$S' in ev('stacks')[0]['text']" "'rank 1 in ' in ev('stacks')[0]['text']" \
    "ev('stacks')[0]['rank'] == 1"
if grep -q '^\[ddptop\].*stacks of 2 ranks saved in' "$T/stacks.out"; then
    tap_ok "stacks: the headless output says where the stacks are"
else
    tap_fail "stacks: headless stacks line" "$(grep ddptop "$T/stacks.out" | tail -10)"
fi

# ---------------------------------------------------------------------------------------
# stop: the job ends failed with the hang as root cause.
start_job stop stop
rj_wait 90
rj_expect_rc "stop: the job ends as failed" 1
ev_assert "stop: root cause names the hang and rank 1; stacks came first" "$RUN_DIR/events.jsonl" \
    "cause is not None and cause['rank'] == 1 and cause.get('hang') is True" \
    "'hung' in cause['text'] and 'rank 1 on localhost' in cause['text']" \
    "len(ev('stacks')) == 1 and E.index(ev('stacks')[0]) < E.index(cause)" \
    "len(ev('restart')) == 0"
if [ -s "$RUN_DIR/attempt-0/stacks/rank-0.txt" ] && [ -s "$RUN_DIR/attempt-0/stacks/rank-1.txt" ]; then
    tap_ok "stop: both stack files written before the stop"
else
    tap_fail "stop: stack files" "$(ls -la "$RUN_DIR/attempt-0/stacks" 2>&1)"
fi
if grep -q '^\[ddptop\] root cause: rank 1 on localhost hung' "$T/stop.out"; then
    tap_ok "stop: the headless root cause line"
else
    tap_fail "stop: headless root cause" "$(grep ddptop "$T/stop.out" | tail -10)"
fi

# ---------------------------------------------------------------------------------------
# restart: stacks, a restart after the hang, attempt 1 resumes and succeeds.
start_job restart restart --max-restarts 1
rj_wait 120
rj_expect_rc "restart: the job restarts and ends in success" 0
ev_assert "restart: root cause of attempt 0 is the hang; restarted after a hang; done in attempt 1" \
    "$RUN_DIR/events.jsonl" \
    "cause is not None and cause['attempt'] == 0 and cause.get('hang') is True" \
    "len(ev('restart')) == 1 and 'after a hang' in ev('restart')[0]['text']" \
    "len(ev('done')) == 1 and ev('done')[0]['attempt'] == 1"
resumed=$(sed -n 's/^RESUME attempt=1 from=//p' "$RUN_DIR/attempt-1/rank-0.log" 2>/dev/null)
if [ -n "$resumed" ] && [ "$resumed" -ge 3 ] && grep -qx 'DONE attempt=1' "$RUN_DIR/attempt-1/rank-1.log"; then
    tap_ok "restart: attempt 1 resumed from the snapshot (step $resumed) and finished"
else
    tap_fail "restart: attempt 1 resumes from step >= 3 (got '$resumed')" "$(cat "$RUN_DIR"/attempt-1/rank-*.log 2>&1 | tail -10)"
fi
if [ -s "$RUN_DIR/attempt-0/stacks/rank-1.txt" ] && [ ! -e "$RUN_DIR/attempt-1/stacks" ]; then
    tap_ok "restart: stacks of attempt 0 only"
else
    tap_fail "restart: stacks of attempt 0 only" "$(ls -la "$RUN_DIR"/attempt-*/ 2>&1)"
fi

# ---------------------------------------------------------------------------------------
# none: the stall event and nothing else.
start_job none none
if wait_until 60 has_event "$RUN_DIR" stall; then tap_ok "none: a stall event"
else tap_fail "none: a stall event" "$(tail -20 "$T/none.out")"; fi
sleep 2
if kill -0 "$RJ_PID" 2>/dev/null && ! has_event "$RUN_DIR" stacks && [ ! -e "$RUN_DIR/attempt-0/stacks" ]; then
    tap_ok "none: no stacks taken, the job goes on"
else
    tap_fail "none: no stacks, job goes on" "$(ls "$RUN_DIR/attempt-0" 2>&1)" "$(tail -10 "$T/none.out")"
fi
stop_job
rj_expect_rc "none: stopped by SIGTERM" 1

if wait_until 5 no_marker_pids "$T"; then tap_ok "no process of the test left"
else tap_fail "no process left" "$(ps -o pid,stat,args -p "$(marker_pids "$T" | tr '\n' ',')0" 2>&1)"; fi
tap_done
