#!/usr/bin/env bash
# it_notify: --notify (docs/integrations.md "Notifications") from `ddptop run` with real local
# ranks and real notify commands:
#  1. a failing run with a command that appends its stdin to a file: exactly one root_cause
#     and one end object, each events.jsonl's event with run_id, log_dir, hostname and count
#     added; a second command sees the DDPTOP_EVENT_* variables;
#  2. --notify-on filters (launch,exit: no root cause, no end; the exits counted whole); a
#     wrong kind is a usage error naming the kinds; nan and spike are accepted;
#  3. a failing notify command (exit 7, told every kind) is said once, as an event with its
#     output's last line;
#  4. a notify command that sleeps forever (and a child it started) delays the run's end by its
#     --notify-timeout at most, is said once, and is gone after the run;
#  5. stragglers: 7 ranks falling behind in one tick are two notifications whose counts add up
#     to the straggler events (1,000 in a second: tests/test_notify.c);
#  6. a detached run (--detach: the dashboard in a session) notifies the root cause and the end;
#  7. the controller SIGKILLed, `ddptop attach --headless` takes the run over and keeps
#     notifying (the options are in the run's record): the root cause and the end;
#  and after every run nothing of this test is left running (ranks, agents, notify commands).
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_notify.XXXXXX)
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
RID=nt$$-$RANDOM
HOST=$(hostname)
mkdir -m 700 "$T/xdg"
export XDG_RUNTIME_DIR=$T/xdg NO_COLOR=1 CUDA_VISIBLE_DEVICES=
COMMON=(--headless --no-check --term-timeout 2 --log-dir "$LOGS")

if [ ! -x "$DDPTOP" ]; then tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; fi

# rank.sh DELAY: rank 1 prints "boom" after DELAY seconds and exits 3; the others sleep until
# they are stopped.
cat >"$T/rank.sh" <<'EOF'
#!/bin/sh
if [ "$RANK" = 1 ]; then sleep "$1"; echo boom; exit 3; fi
sleep 60
EOF
# env.sh: the DDPTOP_EVENT_* variables it was given, into env-KIND.txt
cat >"$T/env.sh" <<EOF
#!/bin/sh
env | grep '^DDPTOP_EVENT_' | sort >"$T/env-\$DDPTOP_EVENT_KIND.txt"
EOF
cp /bin/sleep "$T/nsleep"   # a sleep whose command line names this test
chmod +x "$T/rank.sh" "$T/env.sh"

nothing_left() { wait_until 5 no_marker_pids "$T"; }
said_left() { marker_pids "$T" | while read -r p; do echo "# left: $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"; done; }

# ---------------------------------------------------------------------------------------
# 1. A failing run: one root_cause, one end, the fields; the variables.
rj_run "$T/fail.out" "${COMMON[@]}" --nproc-per-node 2 --run-id "$RID-fail" \
    --notify "cat >> $T/fail.jsonl" --notify "$T/env.sh" -- "$T/rank.sh" 0.5
rj_expect_rc "a failing run with two notify commands: exit 1" 1
BASE_MS=$RJ_MS
if out=$($PY - "$T/fail.jsonl" "$LOGS/$RID-fail" "$RID-fail" "$HOST" <<'PY'
import json, sys
path, run_dir, rid, host = sys.argv[1:5]
got = [json.loads(l) for l in open(path)]
events = [json.loads(l) for l in open(run_dir + "/events.jsonl")]
bad = []
kinds = [o["kind"] for o in got]
if kinds != ["root_cause", "end"]:
    bad.append(f"kinds {kinds}, want exactly root_cause then end")
for o in got:
    same = [e for e in events if e["kind"] == o["kind"]]
    if len(same) != 1:
        bad.append(f"{o['kind']}: {len(same)} in events.jsonl")
        continue
    for k, v in same[0].items():
        if o.get(k) != v:
            bad.append(f"{o['kind']}.{k} = {o.get(k)!r}, events.jsonl says {v!r}")
    want = {"run_id": rid, "log_dir": run_dir, "hostname": host, "count": 1}
    for k, v in want.items():
        if o.get(k) != v:
            bad.append(f"{o['kind']}.{k} = {o.get(k)!r}, want {v!r}")
rc = [o for o in got if o["kind"] == "root_cause"]
if rc and (rc[0].get("rank") != 1 or rc[0].get("exit_code") != 3 or rc[0].get("last_lines") != ["boom"]):
    bad.append(f"root cause: {rc[0]}")
end = [o for o in got if o["kind"] == "end"]
if end and (end[0].get("state") != "failed" or end[0].get("exit_code") != 1):
    bad.append(f"end: {end[0]}")
print("\n".join("# " + b for b in bad))
sys.exit(1 if bad else 0)
PY
); then
    tap_ok "the command's stdin: one root_cause and one end object, events.jsonl's with run_id, log_dir, hostname, count"
else
    tap_fail "the command's stdin: one root_cause and one end object with the right fields" "$out" \
        "$(cat "$T/fail.jsonl" 2>&1)"
fi
TEXT=$($PY -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["kind"] == "root_cause"][0]["text"])' \
    "$LOGS/$RID-fail/events.jsonl" 2>/dev/null)
want_rc="DDPTOP_EVENT_ATTEMPT=0
DDPTOP_EVENT_CLASS=unknown
DDPTOP_EVENT_COUNT=1
DDPTOP_EVENT_EXIT_CODE=3
DDPTOP_EVENT_HOST=localhost
DDPTOP_EVENT_HOSTNAME=$HOST
DDPTOP_EVENT_KIND=root_cause
DDPTOP_EVENT_LOG_DIR=$LOGS/$RID-fail
DDPTOP_EVENT_MESSAGE=ddptop $RID-fail: $TEXT
DDPTOP_EVENT_RANK=1
DDPTOP_EVENT_RUN_ID=$RID-fail
DDPTOP_EVENT_STATE=
DDPTOP_EVENT_TEXT=$TEXT"
got_rc=$(grep -v '^DDPTOP_EVENT_TIME=' "$T/env-root_cause.txt" 2>&1)
if [ -n "$TEXT" ] && [ "$got_rc" = "$want_rc" ] && grep -q '^DDPTOP_EVENT_TIME=20[0-9-]*T[0-9:.]*Z$' "$T/env-root_cause.txt" &&
   grep -qx 'DDPTOP_EVENT_STATE=failed' "$T/env-end.txt" && grep -qx 'DDPTOP_EVENT_EXIT_CODE=1' "$T/env-end.txt" &&
   grep -qx 'DDPTOP_EVENT_RANK=' "$T/env-end.txt" && grep -qx 'DDPTOP_EVENT_KIND=end' "$T/env-end.txt"; then
    tap_ok "the second command's DDPTOP_EVENT_* variables (root cause and end)"
else
    tap_fail "the DDPTOP_EVENT_* variables" "got:" "$got_rc" "want:" "$want_rc" "end: $(cat "$T/env-end.txt" 2>&1)"
fi
tap_check "no notify failure said when the commands succeed" sh -c "! grep -q 'notify command' '$LOGS/$RID-fail/events.jsonl'"
nothing_left && tap_ok "nothing of the run is left (ranks, agent, notify commands)" || { tap_fail "nothing of the run left"; said_left; }

# ---------------------------------------------------------------------------------------
# 2. --notify-on filters; names are checked.
rj_run "$T/filter.out" "${COMMON[@]}" --nproc-per-node 2 --run-id "$RID-filter" \
    --notify-on launch --notify-on exit --notify "cat >> $T/filter.jsonl" -- "$T/rank.sh" 0.3
rj_expect_rc "--notify-on launch --notify-on exit: the run fails as before" 1
ev_assert "--notify-on launch,exit: only those kinds, every exit counted, no root cause or end" "$T/filter.jsonl" \
    'sorted(set(e["kind"] for e in E)) == ["exit", "launch"]' \
    'len(ev("launch")) == 1 and ev("launch")[0]["ranks"] == 2' \
    "sum(e['count'] for e in ev('exit')) == len([l for l in open('$LOGS/$RID-filter/events.jsonl') if '\"kind\":\"exit\"' in l])"
out=$("$DDPTOP" run --headless --notify-on end,hang --notify true -- true 2>&1 </dev/null); rc=$?
if [ $rc = 2 ] && grep -q "'hang' is no kind of event" <<<"$out" && grep -q 'stall' <<<"$out" && grep -q 'straggler' <<<"$out"; then
    tap_ok "--notify-on hang: exit 2, naming the kinds there are"
else
    tap_fail "--notify-on hang: a usage error naming the kinds (rc $rc)" "$out"
fi
out=$("$DDPTOP" run --headless --notify-timeout 0 --notify true -- true 2>&1 </dev/null); rc=$?
tap_check "--notify-timeout 0: exit 2 ($out)" test $rc = 2
rj_run "$T/nan.out" "${COMMON[@]}" --run-id "$RID-nan" --notify-on nan,spike --notify "cat >> $T/nan.jsonl" -- true
rj_expect_rc "--notify-on nan,spike is accepted (the loss rules' kinds); a run without them tells nothing" 0
tap_check "nothing told for nan,spike when the loss is fine" test ! -e "$T/nan.jsonl"

# ---------------------------------------------------------------------------------------
# 3. A failing notify command: said once.
rj_run "$T/bad.out" "${COMMON[@]}" --nproc-per-node 2 --run-id "$RID-bad" --notify-on all \
    --notify "echo notify-oops-$$ >&2; exit 7" -- "$T/rank.sh" 0.3
rj_expect_rc "a notify command that fails on every event: the run's exit is its own (1)" 1
ev_assert "the failing command is said once, as an info event with its output's last line" "$LOGS/$RID-bad/events.jsonl" \
    "len([e for e in E if 'notify command' in e['text']]) == 1" \
    "[e['kind'] for e in E if 'notify command' in e['text']] == ['info']" \
    "any(e['text'].startswith('--notify command (echo), telling the ') and 'event, failed: exit status 7 (its output: notify-oops-$$); its later failures are not said' in e['text'] for e in E)"
nothing_left || { tap_fail "nothing of the run left"; said_left; }

# ---------------------------------------------------------------------------------------
# 4. A notify command that never ends: the run's end waits its timeout at most.
rj_run "$T/hang.out" "${COMMON[@]}" --nproc-per-node 2 --run-id "$RID-hang" --notify-timeout 2 \
    --notify "$T/nsleep 999 & $T/nsleep 1000" -- "$T/rank.sh" 0.5
rj_expect_rc "a notify command that sleeps forever: the run still ends" 1
if [ "$RJ_MS" -le $((BASE_MS + 2000 + 3000)) ]; then
    tap_ok "it delayed the end by its timeout at most (${RJ_MS} ms; ${BASE_MS} ms without it, --notify-timeout 2)"
else
    tap_fail "it delayed the end by its timeout at most: ${RJ_MS} ms, ${BASE_MS} ms without it, timeout 2 s"
fi
n=$(grep -c 'ran past its 2 s timeout and was killed' "$T/hang.out")
tap_check "said once: ran past its 2 s timeout and was killed ($n)" test "$n" = 1
if nothing_left; then tap_ok "no notify process is left after the run (the command and the child it started)"
else tap_fail "no notify process is left after the run"; said_left; fi

# ---------------------------------------------------------------------------------------
# 5. Stragglers: 9 ranks step on, 7 stay at step 1: one tick finds the 7.
cat >"$T/steps.sh" <<'EOF'
#!/bin/sh
step() { echo "{\"event\": \"step\", \"step\": $1, \"loss\": 1.0}"; }
if [ "$RANK" -ge 9 ]; then step 1; sleep 7; exit 0; fi
i=1
while [ $i -le 40 ]; do step $i; i=$((i + 1)); sleep 0.15; done
EOF
chmod +x "$T/steps.sh"
rj_run "$T/strag.out" "${COMMON[@]}" --nproc-per-node 16 --run-id "$RID-strag" --notify-on straggler \
    --notify "cat >> $T/strag.jsonl" -- "$T/steps.sh"
rj_expect_rc "16 ranks, 7 of them behind: the run succeeds" 0
# (7 in one tick, normally: 2 notifications, counting 1 and 6; a rank that starts late on a busy
# machine is found a tick later, and its notification a second after the held one)
STRAGS=$(grep -c '"kind":"straggler"' "$LOGS/$RID-strag/events.jsonl" 2>/dev/null)
ev_assert "the stragglers are coalesced: $STRAGS straggler events told in 2 or 3 notifications, counted" "$T/strag.jsonl" \
    "$STRAGS >= 7 and sum(e['count'] for e in E) == $STRAGS" \
    'all(e["kind"] == "straggler" for e in E) and 2 <= len(E) <= 3' \
    'E[0]["count"] == 1 and E[1]["count"] > 1 and "last_time" in E[1]'
nothing_left || { tap_fail "nothing of the run left"; said_left; }

# ---------------------------------------------------------------------------------------
# 6. A detached run: the dashboard in a session, no terminal.
out=$("$DDPTOP" run --detach --no-check --term-timeout 2 --log-dir "$LOGS" --run-id "$RID-det" --nproc-per-node 2 \
    --notify "cat >> $T/det.jsonl" -- "$T/rank.sh" 0.5 2>&1 </dev/null); rc=$?
both() { [ "$(grep -c '"kind":"root_cause"' "$T/det.jsonl" 2>/dev/null)" = 1 ] && grep -q '"kind":"end"' "$T/det.jsonl"; }
if [ $rc = 0 ] && wait_until 30 both; then
    tap_ok "a detached run tells the root cause and the end while its dashboard stays up"
else
    tap_fail "a detached run tells the root cause and the end (rc $rc)" "$out" "$(cat "$T/det.jsonl" 2>&1)"
fi
# its dashboard waits for q: end it (SIGTERM, as a person's Ctrl-C would), by pid
for p in $(marker_pids "$RID-det" ddptop); do kill -TERM "$p" 2>/dev/null; done
nothing_left || { tap_fail "nothing of the detached run left"; said_left; }

# ---------------------------------------------------------------------------------------
# 7. The controller SIGKILLed; ddptop attach takes the run over and keeps notifying.
rj_start "$T/adopt.out" "${COMMON[@]}" --nproc-per-node 2 --run-id "$RID-adopt" --agent-grace 60 \
    --notify "cat >> $T/adopt.jsonl" -- "$T/rank.sh" 5
launched() { grep -q '"kind":"launch"' "$LOGS/$RID-adopt/events.jsonl" 2>/dev/null && [ -e "$LOGS/$RID-adopt/attempt-0/rank-1.log" ]; }
if wait_until 20 launched; then
    sleep 0.5
    kill -KILL "$RJ_PID"
    wait "$RJ_PID" 2>/dev/null
    RJ_PID=""
    timeout 60 "$DDPTOP" attach "$RID-adopt" --headless --log-dir "$LOGS" >"$T/attach.out" 2>&1 </dev/null
    rc=$?
    tap_check "ddptop attach took the run over; the job failed there (exit 1: $rc)" test "$rc" = 1 ||
        tail -8 "$T/attach.out" | sed 's/^/#   /'
    ev_assert "the controller that took over told the root cause and the end" "$T/adopt.jsonl" \
        '[e["kind"] for e in E] == ["root_cause", "end"]' \
        "all(e['run_id'] == '$RID-adopt' for e in E)" \
        'ev("root_cause")[0]["rank"] == 1 and ev("end")[0]["state"] == "failed"'
else
    tap_fail "the run to take over launches" "$(tail -5 "$T/adopt.out")" "$(tail -5 "$T/adopt.out.err")"
fi
if nothing_left; then tap_ok "nothing of this test is left running"
else tap_fail "nothing of this test is left running"; said_left; fi

tap_done
