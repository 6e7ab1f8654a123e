#!/usr/bin/env bash
# Integration: a failed attempt's class, evidence and fix through `ddptop run` (local ranks,
# headless), in the final line, `ddptop ls` (table and --json) and events.jsonl:
#   1. a REAL PyTorch gloo job (2 ranks): rank 1's Python is SIGKILLed while rank 0 waits in
#      all_reduce, so rank 0 gets gloo's real "Connection closed by peer [127.0.0.1]:PORT" and
#      fails: class connection_reset, naming the peer's node. Rank 1's Python runs under a
#      shell that outlives it by a few seconds (as a site's launcher wrapper does), so the
#      reset is the first failure ddptop sees;
#   2. a REAL ENOSPC: ddptop runs in a private mount namespace with a 1 MiB tmpfs as the
#      snapshot directory; rank 0 fills it while saving a snapshot: class disk_full, with the
#      innermost frame of the user's code;
#   3. four ranks playing PyTorch's watchdog lines (tests/fixtures/failures/
#      watchdog_rank3_behind.txt, formats of ProcessGroupNCCL.cpp 2.1-2.5) with rank 0
#      aborting first: class collective_timeout, rank 3 three collectives behind, in the final
#      line, `ddptop ls` and events.jsonl;
#   4. the same lines in a job that hangs instead (--on-hang stop): the hang's root cause names
#      rank 3 behind, by the same analysis;
#   5. two ranks on one GPU with --device cuda: ddptop-train built against tests/fakecuda (a
#      TEST DOUBLE of CUDA, one device) refuses with exit 2: class configuration, its line as
#      the evidence, and a fix that a restart would not be.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only: no server is started here
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_failure_class.XXXXXX)
chmod 755 "$T"
REAL_DDPTOP=$DDPTOP
cleanup() {
    DDPTOP=$REAL_DDPTOP
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
LOGS=$T/logs
RID=fc$$-$RANDOM
COMMON=(--headless --no-check --log-dir "$LOGS" --term-timeout 2)

[ -x "$DDPTOP" ] || { tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; }
if ! ver=$($PY -c 'import torch, torch.distributed as d; assert d.is_available(); print(torch.__version__)' 2>&1); then
    tap_fail "/usr/bin/python3 imports torch (install python3-torch: make deps)" "$ver"
    tap_done; exit 1
fi

# ls_json ID EXPR: a Python expression on the `ddptop ls --json` entry `r` of run ID
ls_json() {
    "$DDPTOP" ls --log-dir "$LOGS" --json | $PY -c '
import json, sys
rid, expr = sys.argv[1], sys.argv[2]
r = [x for x in json.load(sys.stdin) if x["run_id"] == rid]
r = r[0] if r else None
ok = r is not None and eval(expr)
print(json.dumps(r)[:1500]) if not ok else None
sys.exit(0 if ok else 1)' "$1" "$2"
}
final_line() { grep '^\[ddptop\] root cause: ' "$1" | tail -1; }

# ---------------------------------------------------------------------------------------
# 1. A real gloo job whose peer dies mid-all_reduce.
cat >"$T/gloo.py" <<'PY'
import os, sys, time
import torch
import torch.distributed as dist

torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
t = torch.ones(4)
for step in range(3):
    dist.all_reduce(t)
    print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
if rank == 1:
    # the test SIGKILLs this process while rank 0 waits in the next all_reduce
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(60)
dist.all_reduce(t)
print("rank 0 should not get here", flush=True)
PY
# gloo on the loopback interface: the addresses it names are 127.0.0.1 (the local node)
rj_start "$T/gloo.out" "${COMMON[@]}" --nproc-per-node 2 --master-port "$(sshd_pick_port)" --run-id "$RID-gloo" \
    -- sh -c 'GLOO_SOCKET_IFNAME=lo "$0" "$1" "$2"; st=$?; [ "$RANK" = 1 ] && sleep 4; exit $st' \
    "$PY" "$T/gloo.py" "$T/victim.pid"
if wait_until 60 test -s "$T/victim.pid"; then
    sleep 0.5   # rank 0 is in its all_reduce
    kill -KILL "$(cat "$T/victim.pid")"
    tap_ok "gloo: rank 1 reached its third step and was SIGKILLed"
else
    tap_fail "gloo: rank 1 wrote its pid" "$(tail -20 "$T/gloo.out")"
fi
rj_wait 60
rj_expect_rc "gloo: the job fails" 1
ev_assert "gloo: events.jsonl: class connection_reset on rank 0, gloo's line naming the peer, its node" \
    "$LOGS/$RID-gloo/events.jsonl" \
    'cause["class"] == "connection_reset"' 'cause["rank"] == 0' 'cause["evidence_rank"] == 0' \
    '"Connection closed by peer [127.0.0.1]:" in cause["evidence"] or "Connection reset by peer" in cause["evidence"]' \
    '"node localhost, ranks 0-1" in cause["detail"]' 'cause["fix"]'
l=$(final_line "$T/gloo.out")
if grep -q "rank 0 on localhost exited with code 1 (connection reset: rank 0 on localhost lost its connection to peer 127.0.0.1: node localhost" <<<"$l"; then
    tap_ok "gloo: the final line gives the class and the peer's node"
else
    tap_fail "gloo: the final line gives the class and the peer's node" "got: $l" "$(tail -25 "$T/gloo.out")"
fi
if grep -q '^\[ddptop\]   evidence (rank 0 on localhost): .*Connection' "$T/gloo.out" &&
   grep -q '^\[ddptop\]   fix: the peer process died' "$T/gloo.out"; then
    tap_ok "gloo: the headless root cause has the evidence line and the fix"
else
    tap_fail "gloo: the headless root cause has the evidence line and the fix" "$(grep -A6 'root cause' "$T/gloo.out" | head -20)"
fi

# ---------------------------------------------------------------------------------------
# 2. A real ENOSPC: a 1 MiB tmpfs in a private mount namespace (gone with the namespace).
cat >"$T/snap.py" <<'PY'
import os, sys, time
snap = sys.argv[1]
if os.environ["RANK"] != "0":
    time.sleep(60)
print("step 100 loss 0.25: saving a snapshot", flush=True)

def save_snapshot(path):
    with open(path, "wb") as f:
        f.write(os.urandom(2 << 20))   # 2 MiB into a 1 MiB file system

save_snapshot(os.path.join(snap, "step-100.pt"))
PY
mkdir -p "$T/snap"
cat >"$T/ddptop-ns" <<EOF2
#!/bin/sh
# ddptop in a mount namespace of its own whose $T/snap is a 1 MiB tmpfs
exec unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1m tmpfs "\$0" && exec "\$@"' \
    "$T/snap" "$REAL_DDPTOP" "\$@"
EOF2
chmod 755 "$T/ddptop-ns"
DDPTOP=$T/ddptop-ns
rj_run "$T/snap.out" --limit 60 "${COMMON[@]}" --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --run-id "$RID-enospc" -- "$PY" "$T/snap.py" "$T/snap"
DDPTOP=$REAL_DDPTOP
rj_expect_rc "ENOSPC: the job fails" 1
ev_assert "ENOSPC: events.jsonl: class disk_full, Python's errno 28 line, the user's frame" \
    "$LOGS/$RID-enospc/events.jsonl" \
    'cause["class"] == "disk_full"' 'cause["rank"] == 0' \
    '"OSError: [Errno 28] No space left on device" in cause["evidence"]' \
    '"snap.py\", line 9, in save_snapshot" in cause["detail"]' '"free space" in cause["fix"]'
l=$(final_line "$T/snap.out")
if grep -q "(no space left on device: File \"$T/snap.py\", line 9, in save_snapshot)" <<<"$l"; then
    tap_ok "ENOSPC: the final line says no space left on device, and where"
else
    tap_fail "ENOSPC: the final line says no space left on device, and where" "got: $l" "$(tail -20 "$T/snap.out")"
fi
if ! grep -q " $T/snap " /proc/mounts; then
    tap_ok "ENOSPC: the tmpfs was only ever in the test's mount namespace"
else
    tap_fail "ENOSPC: the tmpfs is visible outside the test's namespace"
fi
if ls_json "$RID-enospc" 'r["failure_class"] == "disk_full" and r["state"] == "failed"'; then
    tap_ok "ENOSPC: ls --json has failure_class disk_full"
else
    tap_fail "ENOSPC: ls --json has failure_class disk_full"
fi

# ---------------------------------------------------------------------------------------
# 3. PyTorch's watchdog lines, rank 3 three collectives behind; rank 0 aborts first.
cat >"$T/watchdog.py" <<'PY'
import os, sys, time
rank = int(os.environ["RANK"])
lines, who = [], 0
for l in open(sys.argv[1], encoding="utf-8"):
    l = l.rstrip("\n")
    if l.startswith("#"):
        continue
    if l.startswith("@rank "):
        who = int(l[6:])
    elif who == rank:
        lines.append(l)
def barrier(name):               # every rank at this point (files in argv[2])
    open(os.path.join(sys.argv[2], f"{name}.{rank}"), "w").close()
    while len([f for f in os.listdir(sys.argv[2]) if f.startswith(name + ".")]) < 4:
        time.sleep(0.02)

barrier("started")
time.sleep(1.0)                  # the collective's timeout runs out on every rank at once
for l in lines:
    print(l, file=sys.stderr, flush=True)
    time.sleep(0.02)
barrier("printed")
if rank == 0:
    time.sleep(0.2)
    os.abort()                   # terminate called after throwing ... c10::DistBackendError
time.sleep(60)
PY
mkdir -p "$T/wd-sync"
rj_run "$T/wd.out" --limit 60 "${COMMON[@]}" --nproc-per-node 4 --master-port "$(sshd_pick_port)" \
    --run-id "$RID-wd" -- "$PY" "$T/watchdog.py" "$PWD/tests/fixtures/failures/watchdog_rank3_behind.txt" \
    "$T/wd-sync"
rj_expect_rc "watchdog: the job fails" 1
ev_assert "watchdog: events.jsonl: collective_timeout, rank 0 first, rank 3 lagging with its own line" \
    "$LOGS/$RID-wd/events.jsonl" \
    'len(ev("root_cause")) == 1' 'cause["class"] == "collective_timeout"' 'cause["rank"] == 0' \
    'cause["signal"] == "SIGABRT"' 'cause["lagging_ranks"] == [3]' 'cause["evidence_rank"] == 3' \
    '"WorkNCCL(SeqNum=1231" in cause["evidence"]' \
    'cause["detail"] == "rank 3 on localhost is 3 collectives behind (last SeqNum 1231, the others 1234, ALLREDUCE)"'
l=$(final_line "$T/wd.out")
if grep -qF "(collective timeout: rank 3 on localhost is 3 collectives behind (last SeqNum 1231, the others 1234, ALLREDUCE))" <<<"$l"; then
    tap_ok "watchdog: the final line names rank 3, 3 collectives behind"
else
    tap_fail "watchdog: the final line names rank 3, 3 collectives behind" "got: $l" "$(tail -20 "$T/wd.out")"
fi
row=$(env -u COLUMNS "$DDPTOP" ls --log-dir "$LOGS" | awk -v id="$RID-wd" '$1 == id')
if grep -qF "collective timeout: rank 3 on localhost is 3 collectives behind" <<<"$row" && grep -q " failed " <<<"$row"; then
    tap_ok "watchdog: ddptop ls shows the class and rank 3"
else
    tap_fail "watchdog: ddptop ls shows the class and rank 3" "row: $row"
fi
if ls_json "$RID-wd" 'r["failure_class"] == "collective_timeout" and r["lagging_ranks"] == [3] and "rank 3" in r["failure_detail"]'; then
    tap_ok "watchdog: ls --json has failure_class, failure_detail and lagging_ranks [3]"
else
    tap_fail "watchdog: ls --json has failure_class, failure_detail and lagging_ranks [3]"
fi
ev=$("$DDPTOP" logs "$RID-wd" --log-dir "$LOGS" --events 2>&1)
if grep -q '^    class: collective timeout' <<<"$ev" && grep -q '^    evidence: .*SeqNum=1231' <<<"$ev"; then
    tap_ok "watchdog: logs --events shows the class and the evidence"
else
    tap_fail "watchdog: logs --events shows the class and the evidence" "$ev"
fi

# ---------------------------------------------------------------------------------------
# 4. The same lines in a job that hangs instead (the watchdog logs, the process stays: as with
#    TORCH_NCCL_ASYNC_ERROR_HANDLING=0): --on-hang stop, the hang's root cause names rank 3.
cat >"$T/hang.py" <<'PY'
import os, sys, time
rank = int(os.environ["RANK"])
lines, who = [], 0
for l in open(sys.argv[1], encoding="utf-8"):
    l = l.rstrip("\n")
    if l.startswith("#") or l.startswith("step "):
        continue
    if l.startswith("@rank "):
        who = int(l[6:])
    elif who == rank:
        lines.append(l)
for step in range(1, 4 if rank != 3 else 3):
    print(f"step {step} loss {1.0 / step:.3f}", flush=True)
    time.sleep(0.3)
for l in lines:
    print(l, file=sys.stderr, flush=True)
time.sleep(120)
PY
rj_run "$T/hang.out" --limit 90 "${COMMON[@]}" --nproc-per-node 4 --master-port "$(sshd_pick_port)" \
    --run-id "$RID-hang" --hang-timeout 4 --on-hang stop \
    -- "$PY" "$T/hang.py" "$PWD/tests/fixtures/failures/watchdog_rank3_behind.txt"
rj_expect_rc "hang: --on-hang stop fails the job" 1
ev_assert "hang: events.jsonl: class hang, rank 3 first to stall and lagging, 3 collectives behind" \
    "$LOGS/$RID-hang/events.jsonl" \
    'cause["class"] == "hang"' 'cause["hang"] is True' 'cause["rank"] == 3' 'cause["lagging_ranks"] == [3]' \
    'cause["detail"].startswith("rank 3 on localhost is 3 collectives behind (last SeqNum 1231")'
l=$(final_line "$T/hang.out")
if grep -qF "(hang: rank 3 on localhost is 3 collectives behind (last SeqNum 1231, the others 1234, ALLREDUCE))" <<<"$l"; then
    tap_ok "hang: the final line names rank 3, 3 collectives behind"
else
    tap_fail "hang: the final line names rank 3, 3 collectives behind" "got: $l" "$(tail -20 "$T/hang.out")"
fi

# ---------------------------------------------------------------------------------------
# 5. Two ranks on one (fake) GPU with --device cuda: a configuration error, not "unknown".
FAKE_TRAIN=$DDPTOP_BUILD/fakecuda/ddptop-train
if [ -x "$FAKE_TRAIN" ]; then
    FAKECUDA_DEVICES=1 rj_run "$T/cfg.out" --limit 60 "${COMMON[@]}" --nproc-per-node 2 \
        --master-port "$(sshd_pick_port)" --run-id "$RID-cfg" -- "$FAKE_TRAIN" --device cuda --steps 5 \
        --snapshot "$T/cfg-snap.bin"
    rj_expect_rc "config: two ranks on one GPU fail the job" 1
    ev_assert "config: events.jsonl: class configuration, ddptop-train's line, a fix" \
        "$LOGS/$RID-cfg/events.jsonl" \
        'cause["class"] == "configuration"' '"NCCL needs a GPU for every rank" in cause["evidence"]' \
        '"--device cpu" in cause["fix"]'
    l=$(final_line "$T/cfg.out")
    if grep -q "exited with code 2 (configuration error" <<<"$l"; then
        tap_ok "config: the final line says configuration error"
    else
        tap_fail "config: the final line says configuration error" "got: $l" "$(tail -20 "$T/cfg.out")"
    fi
else
    tap_fail "config: the CUDA test double's ddptop-train is built" "missing $FAKE_TRAIN (make all)"
fi

if wait_until 10 no_marker_pids "$T"; then
    tap_ok "no process of the test outlives it"
else
    tap_fail "no process of the test outlives it" "$(marker_pids "$T" | xargs -r ps -o pid,cmd -p)"
fi
tap_done
