#!/usr/bin/env bash
# Integration: `ddptop run` over SSH to three real OpenSSH servers on loopback (127.0.0.1-3),
# two ranks each, running ddptop-train: all six ranks train to done with equal checksums and
# every line they printed is in their log files and on the headless output; the environment
# contract across nodes (NODE_RANK, MASTER_ADDR, --export only what matches); a rank killed by
# SIGSEGV fails the job, stops the others and is named as the root cause; with --max-restarts 1
# the job restarts, resumes from the snapshot and finishes with the same parameters as an
# uninterrupted run; a hung rank is reported stalled within --hang-timeout + 2 s and SIGTERM
# stops the job; the controller SIGKILLed: with --agent-grace 20 the ranks go on (the run is
# orphaned) and every rank and agent is gone within 30 s; SIGKILLed again and `ddptop attach
# RUN --headless` takes the run over and ends it with exit 0, each rank's log complete (steps
# 1..N once each); shell syntax in hostfile values, arguments and env values executes nothing.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/run_job.sh
ulimit -c 0   # the crash fault must not leave core files

D=""
cleanup() {
    rj_cleanup
    if [ -n "$D" ]; then kill_marker_pids "$D/bin"; kill_marker_pids "$D/agent"; fi
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3

for b in "$DDPTOP" "$TRAIN"; do
    [ -x "$b" ] || { tap_fail "binary exists: $b (make all)"; tap_done; exit 1; }
done
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
ADDR=(127.0.0.1 127.0.0.2 127.0.0.3)
for i in 0 1 2; do
    if ! sshd_start_loopback "r$i" --addr "${ADDR[i]}"; then
        tap_fail "sshd $i on ${ADDR[i]} starts"; tap_done; exit
    fi
    PORT[i]=$SSHD_PORT
    sshd_known_hosts_line "${ADDR[i]}" "${PORT[i]}" >>"$D/known_hosts"
    echo "${ADDR[i]}:${PORT[i]} slots=2" >>"$D/hosts.txt"
done
# The ranks run a copy of ddptop-train inside the test directory, so that every process of
# this test (agents in $D/agent, ranks in $D/bin) is found by the marker "$D/".
mkdir -p "$D/bin" "$D/m" "$D/w"
cp "$TRAIN" "$D/bin/ddptop-train"
T_BIN=$D/bin/ddptop-train
RID=ssh$$-$RANDOM
COMMON=(--headless --known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config"
        --agent-dir "$D/agent" --timeout 10 --log-dir "$D/logs")
SMALL=(--hidden 64 --batch-size 16 --log-every 1)
rank_host() { echo "${ADDR[$(($1 / 2))]}"; }

# check_train RUN_DIR ATTEMPT STEPS HEADLESS [RESUMED]: every rank's log holds one start line
# (world 6), step lines 1..STEPS (or RESUMED+1..STEPS) in order, one done line; the checksums
# agree; the headless output holds exactly the same lines per rank, prefixed "[rR host]".
# Prints the common checksum.
check_train() {
    $PY - "$@" "${ADDR[@]}" <<'PY'
import json, sys
run_dir, attempt, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
resumed = int(sys.argv[5]) if sys.argv[5] != "-" else None
addrs = sys.argv[6:]
bad, sums = [], set()
# The headless lines of this attempt: from its "[ddptop] attempt N: launching" line on.
head, cur = [], -1
for l in open(out, "rb").read().split(b"\n"):
    if l.startswith(b"[ddptop] attempt ") and b": launching" in l:
        cur = int(l.split(b" ")[2].rstrip(b":"))
    if cur == attempt: head.append(l)
for r in range(6):
    host = addrs[r // 2]
    try:
        data = open(f"{run_dir}/attempt-{attempt}/rank-{r}.log", "rb").read()
    except OSError as e:
        bad.append(str(e)); continue
    lines = data.split(b"\n")
    if lines[-1] != b"": bad.append(f"rank {r}: log does not end with a newline")
    lines = lines[:-1]
    evs = []
    for l in lines:
        if l.startswith(b"{"):
            try: evs.append(json.loads(l))
            except ValueError: bad.append(f"rank {r}: torn JSON line {l[:80]!r}")
    starts = [e for e in evs if e.get("event") == "start"]
    dones = [e for e in evs if e.get("event") == "done"]
    got = [e["step"] for e in evs if e.get("event") == "step"]
    first = (resumed or 0) + 1
    if got != list(range(first, steps + 1)):
        bad.append(f"rank {r}: steps {got[:3]}..{got[-3:]} ({len(got)}), want {first}..{steps}")
    if len(starts) != 1 or starts[0].get("world_size") != 6 or starts[0].get("rank") != r:
        bad.append(f"rank {r}: start lines {starts}")
    elif resumed is not None and starts[0].get("resumed_from") != resumed:
        bad.append(f"rank {r}: resumed_from {starts[0].get('resumed_from')}, want {resumed}")
    if len(dones) != 1 or dones[0].get("step") != steps:
        bad.append(f"rank {r}: done lines {dones}")
    else:
        sums.add(dones[0]["param_checksum"])
    # The headless output: the same lines, in the same order per stream.
    po, pe = b"[r%d %s] " % (r, host.encode()), b"[r%d %s err] " % (r, host.encode())
    ho = [l[len(po):] for l in head if l.startswith(po)]
    he = [l[len(pe):] for l in head if l.startswith(pe)]
    lo = [l for l in lines if l.startswith(b"{")]
    le = [l for l in lines if not l.startswith(b"{")]
    if ho != lo: bad.append(f"rank {r}: headless has {len(ho)} stdout lines as [r{r} {host}], log {len(lo)}")
    if he != le: bad.append(f"rank {r}: headless has {len(he)} stderr lines as [r{r} {host} err], log {len(le)}")
    if not lo: bad.append(f"rank {r}: empty log")
if len(sums) != 1: bad.append(f"param_checksum differs or missing: {sums}")
for b in bad: print("# " + b)
if not bad: print(sums.pop())
sys.exit(1 if bad else 0)
PY
}

# ---------------------------------------------------------------------------------------
# 1. Three nodes x two ranks train to done (with the preflight).
MP=$(sshd_pick_port)
rj_run "$D/train.out" "$D/hosts.txt" "${COMMON[@]}" --master-port "$MP" --run-id "$RID-train" \
    -- "$T_BIN" --steps 60 "${SMALL[@]}"
rj_expect_rc "3 nodes x 2 ranks of ddptop-train: done" 0
if diag=$(check_train "$D/logs/$RID-train" 0 60 "$D/train.out" -); then
    SUM_FULL=$diag
    tap_ok "every rank: start, steps 1..60, done; equal param_checksum $SUM_FULL"
    tap_ok "every line of every rank in its log and on the headless output as [rR host] (ranks in hostfile order)"
else
    SUM_FULL=""
    tap_fail "every rank trained to done with equal checksums" "$diag" "$(tail -15 "$D/train.out")"
    tap_fail "every line of every rank in its log and on the headless output (see above)"
fi
ev_assert "events.jsonl: launch, six exits with code 0, done" "$D/logs/$RID-train/events.jsonl" \
    "len(ev('launch')) == 1" "sorted(e['rank'] for e in ev('exit')) == list(range(6))" \
    "all(e['host'] == ['${ADDR[0]}', '${ADDR[1]}', '${ADDR[2]}'][e['rank'] // 2] for e in ev('exit'))" \
    "len(ev('done')) == 1 and not ev('failure') and not ev('root_cause')"

# ---------------------------------------------------------------------------------------
# 2. Environment across nodes; shell syntax in hostfile values, arguments, env values and
#    the working directory: nothing runs, everything arrives verbatim.
HV1='$(touch${IFS}'"$D"'/m/h1)'
HV2=';touch${IFS}'"$D"'/m/h2'
HV3='`touch${IFS}'"$D"'/m/h3`'
HV4=$'\'"|touch${IFS}'"$D"'/m/h4&&\\'
for i in 0 1 2; do
    echo "${ADDR[i]}:${PORT[i]} slots=2 HV1=$HV1 HV2=$HV2 HV3=$HV3 HV4=$HV4"
done >"$D/hosts-inj.txt"
INJ_ARGS=('$(touch '"$D"'/m/a1)' '`touch '"$D"'/m/a2`' '; touch '"$D"'/m/a3' "it's \"q\" \\"
          $'two\nlines && touch '"$D"'/m/a4' '-rf' '| touch '"$D"'/m/a5' '$HOME *' '')
INJ_ENV=$'$(touch '"$D"$'/m/e1);`touch '"$D"$'/m/e2`\'"\n; touch '"$D"'/m/e3'
WD="$D/w/dir;touch \$(echo $D/m/w1) \`x\`"
mkdir -p "$WD"
cat >"$D/bin/env.py" <<'PY'
import json, os, sys
keys = ["RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
        "NNODES", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "DDPTOP_JOB_TOKEN",
        "HV1", "HV2", "HV3", "HV4", "INJ", "DDPT_EXP_ONE", "DDPT_NOT_EXPORTED"]
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}, sort_keys=True))
print("ARGV " + json.dumps(sys.argv[1:]))
print("CWD " + json.dumps(os.getcwd()))
PY
MP=$(sshd_pick_port)
DDPT_EXP_ONE=exported DDPT_NOT_EXPORTED=leak rj_run "$D/env.out" "$D/hosts-inj.txt" "${COMMON[@]}" \
    --no-check --master-port "$MP" --run-id "$RID-env" --export 'DDPT_EXP_.*' --env "INJ=$INJ_ENV" \
    --workdir "$WD" -- "$PY" "$D/bin/env.py" "${INJ_ARGS[@]}"
rj_expect_rc "env printer on 3 nodes with shell syntax in hostfile, args, env, workdir" 0
if diag=$($PY - "$D/logs/$RID-env" "$MP" "$RID-env" "$HV1" "$HV2" "$HV3" "$HV4" "$INJ_ENV" "$WD" \
          "${ADDR[@]}" -- "${INJ_ARGS[@]}" <<'PY'
import json, sys
a = sys.argv[1:]
sep = a.index("--")
run_dir, port, rid, hv1, hv2, hv3, hv4, inj, wd, *addrs = a[:sep]
args = a[sep + 1:]
bad, tokens = [], set()
for r in range(6):
    env = argv = cwd = None
    for l in open(f"{run_dir}/attempt-0/rank-{r}.log", encoding="utf-8").read().splitlines():
        if l.startswith("ENV "): env = json.loads(l[4:])
        if l.startswith("ARGV "): argv = json.loads(l[5:])
        if l.startswith("CWD "): cwd = json.loads(l[4:])
    want = {"RANK": str(r), "LOCAL_RANK": str(r % 2), "GROUP_RANK": str(r // 2),
            "NODE_RANK": str(r // 2), "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "6", "NNODES": "3",
            "MASTER_ADDR": addrs[0], "MASTER_PORT": port, "TORCHELASTIC_RUN_ID": rid,
            "HV1": hv1, "HV2": hv2, "HV3": hv3, "HV4": hv4, "INJ": inj,
            "DDPT_EXP_ONE": "exported", "DDPT_NOT_EXPORTED": None}
    if env is None: bad.append(f"rank {r}: no ENV line"); continue
    for k, v in want.items():
        if env.get(k) != v: bad.append(f"rank {r}: {k}={env.get(k)!r}, want {v!r}")
    tokens.add(env.get("DDPTOP_JOB_TOKEN"))
    if argv != args: bad.append(f"rank {r}: argv {argv!r}, want {args!r}")
    if cwd != wd: bad.append(f"rank {r}: cwd {cwd!r}, want {wd!r}")
if len(tokens) != 1 or None in tokens: bad.append(f"tokens {tokens}")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
); then
    tap_ok "env contract on 3 nodes (NODE_RANK, LOCAL_RANK, MASTER_ADDR=${ADDR[0]}, one token); --export forwards only matches"
    tap_ok "hostfile values, arguments, --env value and --workdir with shell syntax arrive verbatim"
else
    tap_fail "env contract on 3 nodes and verbatim values" "$diag" "$(tail -10 "$D/env.out")"
    tap_fail "values with shell syntax arrive verbatim (see above)"
fi
if [ -z "$(ls -A "$D/m")" ]; then tap_ok "no injected command ran on any node (no marker file)"
else tap_fail "no injected command ran" "markers: $(ls "$D/m")"; fi

# ---------------------------------------------------------------------------------------
# 3. Rank 3 (second node) dies by SIGSEGV at step 15: the job fails, the others are stopped.
MP=$(sshd_pick_port)
rj_run "$D/crash.out" "$D/hosts.txt" "${COMMON[@]}" --no-check --master-port "$MP" \
    --run-id "$RID-crash" --term-timeout 3 -- "$T_BIN" --steps 100000 "${SMALL[@]}" --fault crash@15:3
rj_expect_rc "rank 3 killed by SIGSEGV: the job fails" 1
ev_assert "root cause in events.jsonl: rank 3 on ${ADDR[1]}, SIGSEGV, its last lines" \
    "$D/logs/$RID-crash/events.jsonl" \
    "cause is not None" "cause['rank'] == 3" "cause['host'] == '${ADDR[1]}'" \
    "cause.get('signal') == 'SIGSEGV'" "cause.get('exit_code') is None" \
    "any('crash' in l for l in cause.get('last_lines', []))" \
    "len([e for e in ev('root_cause')]) == 1"
rcl=$(grep -i 'root cause' "$D/crash.out" | head -1)
if [[ $rcl == *"rank 3"* && $rcl == *"${ADDR[1]}"* && $rcl == *SIGSEGV* ]]; then
    tap_ok "headless root cause line names rank 3, ${ADDR[1]} and SIGSEGV"
else
    tap_fail "headless root cause line names rank 3, ${ADDR[1]} and SIGSEGV" "got: $rcl" "$(tail -15 "$D/crash.out")"
fi
ev_assert "every other rank exited (stopped or failed after the crash), none reached done" \
    "$D/logs/$RID-crash/events.jsonl" \
    "sorted(set(e['rank'] for e in ev('exit') + ev('failure') if e['rank'] is not None) | {3}) == list(range(6))" \
    "not ev('done')"
tap_check "no rank process left on any node after the failed job" no_marker_pids "$D/" ddptop-train

# ---------------------------------------------------------------------------------------
# 4. The same crash in attempt 0 only, --max-restarts 1: attempt 1 resumes from the snapshot
#    (per node, written every 10 steps) and finishes with the uninterrupted run's parameters.
cat >"$D/bin/train-once.sh" <<'SH'
#!/bin/sh
# Attempt 0: rank 3 crashes before step 25. Later attempts run clean.
d=$(dirname "$0")
fault=""
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && fault="--fault crash@25:3"
exec "$d/ddptop-train" --snapshot "$d/snap-$TORCHELASTIC_RUN_ID-node$GROUP_RANK.bin" --snapshot-every 10 $fault "$@"
SH
chmod +x "$D/bin/train-once.sh"
MP=$(sshd_pick_port)
rj_run "$D/restart.out" "$D/hosts.txt" "${COMMON[@]}" --no-check --master-port "$MP" \
    --run-id "$RID-restart" --max-restarts 1 --term-timeout 3 -- "$D/bin/train-once.sh" --steps 60 "${SMALL[@]}"
rj_expect_rc "crash in attempt 0 with --max-restarts 1: the job succeeds" 0
ev_assert "events: root cause rank 3 SIGSEGV in attempt 0, a restart, done in attempt 1" \
    "$D/logs/$RID-restart/events.jsonl" \
    "cause is not None and cause['rank'] == 3 and cause['attempt'] == 0 and cause.get('signal') == 'SIGSEGV'" \
    "len(ev('restart')) == 1" "ev('done') and ev('done')[-1]['attempt'] == 1" \
    "all(e['host'] == ['${ADDR[0]}', '${ADDR[1]}', '${ADDR[2]}'][e['rank'] // 2] for e in ev('exit') if e['attempt'] == 1)"
if diag=$(check_train "$D/logs/$RID-restart" 1 60 "$D/restart.out" 20); then
    tap_ok "attempt 1: every rank resumed_from 20 (the snapshot), steps 21..60, done, equal checksums"
    if [ -n "$SUM_FULL" ] && [ "$diag" = "$SUM_FULL" ]; then
        tap_ok "crash + restart + resume ends with the uninterrupted run's param_checksum ($diag)"
    else
        tap_fail "resumed run's checksum $diag equals the uninterrupted run's '$SUM_FULL'"
    fi
else
    tap_fail "attempt 1 resumed from the snapshot and finished" "$diag" "$(grep -v step "$D/restart.out" | tail -20)"
    tap_fail "crash + restart + resume ends with the uninterrupted run's param_checksum"
fi

# ---------------------------------------------------------------------------------------
# 5. Rank 4 hangs before step 15 (alive, no progress): a stall event within hang-timeout + 2 s;
#    then SIGTERM to ddptop stops every rank and ddptop exits 1.
MP=$(sshd_pick_port)
rj_start "$D/hang.out" "$D/hosts.txt" "${COMMON[@]}" --no-check --master-port "$MP" \
    --run-id "$RID-hang" --hang-timeout 3 --term-timeout 2 \
    -- "$T_BIN" --steps 100000 "${SMALL[@]}" --fault hang@15:4
hang_seen() { grep -q '^\[r4 [^]]*\] .*hang at step 15' "$D/hang.out"; }
if wait_until 60 hang_seen; then
    T_HANG=$(date +%s.%N)
    # rank 4's own stall event: the others' (waiting for it in the collective) may come a tick
    # sooner, when their last step line came sooner
    stall_seen() { grep -q '"kind":"stall","attempt":0,"rank":4,' "$D/logs/$RID-hang/events.jsonl" 2>/dev/null; }
    wait_until 12 stall_seen
    delay=$($PY -c '
import json, sys, datetime
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["kind"] == "stall" and e["rank"] == 4 and e["host"] == sys.argv[2]:
        t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
        t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
        print("%.2f" % (t - float(sys.argv[3]))); break
' "$D/logs/$RID-hang/events.jsonl" "${ADDR[2]}" "$T_HANG" 2>&1)
    if [ -n "$delay" ] && awk -v d="$delay" 'BEGIN { exit !(d >= 2.0 && d <= 5.0) }'; then
        tap_ok "rank 4 reported stalled (stall event naming rank 4 and ${ADDR[2]}) ${delay} s after it hung (--hang-timeout 3)"
    else
        tap_fail "rank 4 reported stalled within 2-5 s of its hang (--hang-timeout 3): '${delay}'" \
            "$(cat "$D/logs/$RID-hang/events.jsonl")"
    fi
else
    tap_fail "rank 4 printed its hang message" "$(tail -10 "$D/hang.out")"
fi
kill -TERM "$RJ_PID" 2>/dev/null
rj_wait 30
rj_expect_rc "SIGTERM to ddptop during the hang: every rank stopped, exit 1" 1
tap_check "no rank process left after SIGTERM" no_marker_pids "$D/" ddptop-train

# ---------------------------------------------------------------------------------------
# 6. The controller SIGKILLed mid-run with --agent-grace 20 and nobody taking over: the ranks
# go on for the grace (the run is orphaned), then their agents stop them: all gone within 30 s.
MP=$(sshd_pick_port)
rj_start "$D/kill.out" "$D/hosts.txt" "${COMMON[@]}" --no-check --master-port "$MP" --agent-grace 20 \
    --run-id "$RID-kill" -- "$T_BIN" --steps 1000000 "${SMALL[@]}"
all_stepping() {
    local r
    for r in 0 1 2 3 4 5; do grep -q "^\[r$r [^]]*\] {\"event\":\"step\"" "${1:-$D/kill.out}" || return 1; done
}
if wait_until 60 all_stepping; then
    n_before=$(marker_pids "$D/" ddptop-train | wc -l)
    kill -KILL "$RJ_PID"
    wait "$RJ_PID" 2>/dev/null
    RJ_PID=""
    t0=$(date +%s%N)
    sleep 8
    n_mid=$(marker_pids "$D/" ddptop-train | wc -l)
    ls_out=$("$DDPTOP" ls --log-dir "$D/logs" 2>&1)
    if [ "$n_mid" -eq "$n_before" ] && grep -Eq "^$RID-kill +orphaned \(agents waiting, 1[0-9] s left\)" <<<"$ls_out"; then
        tap_ok "controller SIGKILLed: 8 s later all $n_mid ranks still run; ddptop ls: orphaned (agents waiting)"
    else
        tap_fail "the ranks go on after the controller's SIGKILL (before $n_before, 8 s later $n_mid)" "$ls_out"
    fi
    if wait_until 22 no_marker_pids "$D/" ddptop-train; then
        tap_ok "--agent-grace 20: every rank gone $((($(date +%s%N) - t0) / 1000000)) ms after the SIGKILL (<= 30 s)"
    else
        tap_fail "--agent-grace 20: rank processes still alive 30 s after the SIGKILL" \
            "$(ps -o pid,pgid,stat,args -p "$(marker_pids "$D/" ddptop-train | tr '\n' ',' | sed 's/,$//')" 2>&1)"
    fi
    if wait_until 5 no_marker_pids "$D/agent"; then tap_ok "... and no agent is left"
    else tap_fail "agents still alive after their grace" "$(marker_pids "$D/agent")"; fi
    ls_out=$("$DDPTOP" ls --log-dir "$D/logs" 2>&1)
    if grep -Eq "^$RID-kill +interrupted" <<<"$ls_out"; then tap_ok "ddptop ls then says interrupted"
    else tap_fail "ddptop ls says interrupted once the grace is over" "$ls_out"; fi
else
    tap_fail "six ranks stepping before the SIGKILL" "$(tail -10 "$D/kill.out")"
fi

# ---------------------------------------------------------------------------------------
# 7. SIGKILLed again, and `ddptop attach RUN --headless` takes the run over: it reconnects to
# the agents, catches up the logs and carries on to the end (exit 0); each rank's log holds its
# start, steps 1..N once each in order, and its done line.
MP=$(sshd_pick_port)
rj_start "$D/adopt.out" "$D/hosts.txt" "${COMMON[@]}" --no-check --master-port "$MP" \
    --run-id "$RID-adopt" -- "$T_BIN" --steps 3000 "${SMALL[@]}"
if wait_until 60 all_stepping "$D/adopt.out"; then
    kill -KILL "$RJ_PID"
    wait "$RJ_PID" 2>/dev/null
    RJ_PID=""
    sleep 2
    t0=$(date +%s%N)
    (cd / && timeout 120 "$DDPTOP" attach "$RID-adopt" --headless --log-dir "$D/logs" \
        >"$D/attach.out" 2>"$D/attach.err" </dev/null)
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    if [ $rc -eq 0 ] && grep -q "taking over run $RID-adopt" "$D/attach.out" &&
       [ "$(grep -c 'caught up' "$D/attach.out")" -eq 3 ]; then
        tap_ok "ddptop attach --headless took the run over: 3 nodes reconnected and caught up, exit 0 after $ms ms"
    else
        tap_fail "ddptop attach --headless takes the run over (rc $rc)" "$(grep -v '^\[r' "$D/attach.out" | tail -15)" \
            "$(cat "$D/attach.err")"
    fi
    if diag=$($PY - "$D/logs/$RID-adopt" <<'PY'
import json, sys
run_dir = sys.argv[1]
bad = []
for r in range(6):
    lines = open(f"{run_dir}/attempt-0/rank-{r}.log", "rb").read().split(b"\n")
    evs = [json.loads(l) for l in lines if l.startswith(b"{")]
    steps = [e["step"] for e in evs if e.get("event") == "step"]
    if steps != list(range(1, 3001)):
        dup = len(steps) - len(set(steps))
        bad.append(f"rank {r}: {len(steps)} step lines, {dup} repeated, first {steps[:2]} last {steps[-2:]}")
    if sum(1 for e in evs if e.get("event") == "done") != 1: bad.append(f"rank {r}: done lines")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
); then
        tap_ok "every rank's log across the takeover: steps 1..3000 once each, in order, and done"
    else
        tap_fail "every rank's log complete across the takeover" "$diag"
    fi
    tap_check "no rank left after the run taken over ended" no_marker_pids "$D/" ddptop-train
    if wait_until 5 no_marker_pids "$D/agent"; then tap_ok "... and no agent (nor bridge) within 5 s"
    else tap_fail "no agent left after the run taken over ended" "$(marker_pids "$D/agent")"; fi
else
    tap_fail "six ranks stepping before the second SIGKILL" "$(tail -10 "$D/adopt.out")"
fi

tap_done
