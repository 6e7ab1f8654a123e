#!/usr/bin/env bash
# Integration: `ddptop ls` and `ddptop logs` on real runs (local ranks, headless, no SSH):
# three finished runs (succeeded; failed with a root cause; restarted once, then succeeded),
# one still running (a sleeping rank, interrupted with SIGTERM at the end), a directory with
# a corrupt events.jsonl and one that is no run. ls shows each run's state, attempts and
# root cause (cut to COLUMNS in the table, whole in --json, which parses); logs --rank is
# byte for byte the rank's file; logs without --rank has a header per rank; logs -f prints a
# line the rank wrote after it started and exits once the run is stopped; an unknown run,
# attempt or rank is exit status 2 with a message naming it.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only: no server is started here
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_runs_ls.XXXXXX)
chmod 755 "$T"
FPID=""
cleanup() {
    [ -n "$FPID" ] && kill -KILL "$FPID" 2>/dev/null
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
LOGS=$T/logs
RID=ls$$-$RANDOM
COMMON=(--headless --no-check --nproc-per-node 2 --log-dir "$LOGS" --term-timeout 2)

if [ ! -x "$DDPTOP" ]; then tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; fi

# row ID: the table row of run ID (the table as `ddptop ls` prints it, COLUMNS unset)
ls_table() { env -u COLUMNS "$DDPTOP" ls --log-dir "$LOGS"; }
row() { ls_table | awk -v id="$1" '$1 == id'; }

# ---------------------------------------------------------------------------------------
# Three finished runs.
rj_run "$T/ok.out" "${COMMON[@]}" --master-port "$(sshd_pick_port)" --run-id "$RID-ok" \
    -- sh -c 'printf "hello from %s\n" "$RANK"
              if [ "$RANK" = 0 ]; then printf "tab\there\r\nesc \033[31mred\033[0m \377\376 no newline"; fi' \
    "$T/marker"
rj_expect_rc "run 1: two ranks print and exit 0" 0
if head -1 "$T/ok.out" | grep -qF "[ddptop] run $RID-ok, logs in $LOGS/$RID-ok"; then
    tap_ok "headless output starts with the run id and its log directory"
else
    tap_fail "headless output starts with the run id and its log directory" "$(head -3 "$T/ok.out")"
fi

rj_run "$T/fail.out" "${COMMON[@]}" --master-port "$(sshd_pick_port)" --run-id "$RID-fail" \
    -- sh -c 'echo "boom from $RANK"; if [ "$RANK" = 1 ]; then exit 3; fi; exec sleep 30' "$T/marker"
rj_expect_rc "run 2: rank 1 exits 3, the job fails" 1

# In attempt 0, rank 1 waits for $T/marker.go2 (so that `logs -f` follows before it fails);
# rank 0 exits 0 at once rather than being stopped: a restart right after a stop can find the
# agent still holding the stopped rank (its keeper not reaped yet) and refuse to spawn it.
rj_start "$T/restart.out" "${COMMON[@]}" --master-port "$(sshd_pick_port)" --run-id "$RID-restart" \
    --max-restarts 1 \
    -- sh -c 'echo "attempt $TORCHELASTIC_RESTART_COUNT rank $RANK"
              [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] || exit 0
              [ "$RANK" = 1 ] || exit 0
              while [ ! -e "$0.go2" ]; do sleep 0.05; done; exit 4' "$T/marker"
wait_until 15 grep -q "attempt 0 rank 1" "$LOGS/$RID-restart/attempt-0/rank-1.log"
"$DDPTOP" logs "$RID-restart" --log-dir "$LOGS" --follow >"$T/follow2.out" 2>&1 &
FPID=$!
wait_until 10 grep -q "attempt 0 rank 1" "$T/follow2.out"
touch "$T/marker.go2"
rj_wait 30
rj_expect_rc "run 3: rank 1 fails in attempt 0, attempt 1 succeeds" 0
if wait_until 5 sh -c "! kill -0 $FPID 2>/dev/null"; then
    wait "$FPID"
    FPID=""
    want=$(printf '%s\n' '==> rank 0 (localhost) <==' 'attempt 0 rank 0' '' '==> rank 1 (localhost) <==' \
           'attempt 0 rank 1' '' '==> attempt 1 <==' '' '==> rank 0 (localhost) <==' 'attempt 1 rank 0' '' \
           '==> rank 1 (localhost) <==' 'attempt 1 rank 1')
    if [ "$(cat "$T/follow2.out")" = "$want" ]; then
        tap_ok "logs -f moves on to the new attempt after a restart (a header), exits with the run"
    else
        tap_fail "logs -f moves on to the new attempt after a restart (a header), exits with the run" \
            "$(cat -v "$T/follow2.out")"
    fi
else
    tap_fail "logs -f exits once the restarted run is done: still running 5 s later"
fi

# Not runs, or broken ones.
mkdir -p "$LOGS/not-a-run" "$LOGS/$RID-broken"
printf '{"time":"2026-11-24T12:00:00.000Z","kind":"launch","attempt":0,"text":"x"}\n{"kind":\n' \
    >"$LOGS/$RID-broken/events.jsonl"

# ---------------------------------------------------------------------------------------
# One still running: it prints, waits for $T/go, prints again, sleeps.
rj_start "$T/live.out" "${COMMON[@]}" --nproc-per-node 1 --master-port "$(sshd_pick_port)" \
    --run-id "$RID-live" \
    -- sh -c 'echo "started $RANK"; while [ ! -e "$0.go" ]; do sleep 0.05; done
              echo "after-follow $RANK"; exec sleep 60' "$T/marker"
LIVE_LOG=$LOGS/$RID-live/attempt-0/rank-0.log
if wait_until 15 grep -q "started 0" "$LIVE_LOG"; then tap_ok "run 4 is up and printing"
else tap_fail "run 4 is up and printing" "$(tail -5 "$T/live.out")"; fi

# ---------------------------------------------------------------------------------------
# ls: the table.
TABLE=$(ls_table)
check_row() {   # NAME ID STATE ATTEMPTS [TEXT IN THE ROW]
    local r
    r=$(awk -v id="$2" '$1 == id' <<<"$TABLE")
    if [ "$(awk '{print $2}' <<<"$r")" = "$3" ] && [ "$(awk '{print $3}' <<<"$r")" = "$4" ] &&
       { [ -z "${5:-}" ] || grep -qF -- "$5" <<<"$r"; }; then
        tap_ok "$1"
    else
        tap_fail "$1" "row: $r" "table:" "$TABLE"
    fi
}
check_row "ls: the succeeded run, 1 attempt" "$RID-ok" succeeded 1
check_row "ls: the failed run with its root cause" "$RID-fail" failed 1 "rank 1 on localhost exited with code 3"
check_row "ls: the restarted run, 2 attempts, the root cause of attempt 0" "$RID-restart" succeeded 2 \
    "attempt 0: rank 1 on localhost exited with code 4"
check_row "ls: the live run is running" "$RID-live" running 1
check_row "ls: a corrupt events.jsonl is unknown, with a note naming file and line" "$RID-broken" unknown 1 \
    "note: $LOGS/$RID-broken/events.jsonl:2: not JSON"
if ! grep -q "not-a-run" <<<"$TABLE" && [ "$(head -1 <<<"$TABLE" | awk '{print $1, $2}')" = "RUN STATE" ]; then
    tap_ok "ls: a header row; a directory without events.jsonl is not listed"
else
    tap_fail "ls: a header row; a directory without events.jsonl is not listed" "$TABLE"
fi
order=$(awk 'NR > 1 && $1 ~ /^'"$RID"'-(ok|fail|restart|live)$/ {print $1}' <<<"$TABLE" | tr '\n' ' ')
if [ "$order" = "$RID-live $RID-restart $RID-fail $RID-ok " ]; then tap_ok "ls: newest first"
else tap_fail "ls: newest first" "got: $order"; fi
narrow=$(COLUMNS=30 "$DDPTOP" ls --log-dir "$LOGS")
if grep -qx "    rank 1 on localhost exi..." <<<"$narrow"; then
    tap_ok "ls: a root cause that does not fit goes under its row, cut to the width (COLUMNS=30)"
else
    tap_fail "ls: a root cause that does not fit goes under its row, cut to the width (COLUMNS=30)" "$narrow"
fi

# ls --json
"$DDPTOP" ls --log-dir "$LOGS" --json >"$T/ls.json"
if diag=$($PY - "$T/ls.json" "$RID" "$LOGS" <<'PY'
import json, sys
path, rid, logs = sys.argv[1:4]
runs = {r["run_id"]: r for r in json.load(open(path))}
bad = []
def want(id, **kv):
    r = runs.get(f"{rid}-{id}")
    if r is None:
        bad.append(f"{id}: missing"); return
    for k, v in kv.items():
        if r.get(k) != v: bad.append(f"{id}: {k}={r.get(k)!r}, want {v!r}")
want("ok", state="succeeded", attempts=1, ranks=2, nodes=1, hosts=["localhost"], exit_code=0,
     root_cause=None, note=None, dir=f"{logs}/{rid}-ok")
want("fail", state="failed", attempts=1, exit_code=1, root_cause="rank 1 on localhost exited with code 3",
     root_cause_attempt=0)
want("restart", state="succeeded", attempts=2, root_cause="rank 1 on localhost exited with code 4",
     root_cause_attempt=0)
want("live", state="running", attempts=1, ranks=1, end=None, exit_code=None)
want("broken", state="unknown", note=f"{logs}/{rid}-broken/events.jsonl:2: not JSON")
live = runs.get(f"{rid}-live", {})
if (live.get("controller") or {}).get("status") != "alive": bad.append(f"live: controller {live.get('controller')}")
ok = runs.get(f"{rid}-ok", {})
if not (isinstance(ok.get("duration_s"), (int, float)) and 0 <= ok["duration_s"] < 60): bad.append(f"ok: duration_s {ok.get('duration_s')}")
if not (ok.get("start") or "").endswith("Z"): bad.append(f"ok: start {ok.get('start')}")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
); then
    tap_ok "ls --json parses: state, attempts, ranks, exit code, root cause whole, controller, note"
else
    tap_fail "ls --json parses: state, attempts, ranks, exit code, root cause whole, controller, note" "$diag"
fi

# ---------------------------------------------------------------------------------------
# logs
OKDIR=$LOGS/$RID-ok/attempt-0
if "$DDPTOP" logs "$RID-ok" --log-dir "$LOGS" --rank 0 >"$T/r0" && cmp -s "$T/r0" "$OKDIR/rank-0.log" &&
   grep -q "no newline$" "$T/r0"; then
    tap_ok "logs --rank 0 is byte for byte the rank's file (tab, CR, escapes, bytes 0xff 0xfe, no final newline)"
else
    tap_fail "logs --rank 0 is byte for byte the rank's file" "$(od -c "$T/r0" | head -5)"
fi
{ printf '==> rank 0 (localhost) <==\n'; cat "$OKDIR/rank-0.log"
  printf '\n==> rank 1 (localhost) <==\n'; cat "$OKDIR/rank-1.log"; } >"$T/all.want"
if (cd "$LOGS/.." && "$DDPTOP" logs "logs/$RID-ok/") >"$T/all" && cmp -s "$T/all" "$T/all.want"; then
    tap_ok "logs RUN (a path this time): each rank's file after a '==> rank R (localhost) <==' header"
else
    tap_fail "logs RUN: each rank's file after a header" "$(diff <(cat -v "$T/all.want") <(cat -v "$T/all"))"
fi
RDIR=$LOGS/$RID-restart
if "$DDPTOP" logs "$RID-restart" --log-dir "$LOGS" --rank 1 | cmp -s - "$RDIR/attempt-1/rank-1.log" &&
   [ "$("$DDPTOP" logs "$RID-restart" --log-dir "$LOGS" --rank 1 --attempt 0)" = "attempt 0 rank 1" ]; then
    tap_ok "logs: the newest attempt by default, --attempt 0 the first"
else
    tap_fail "logs: the newest attempt by default, --attempt 0 the first"
fi
"$DDPTOP" logs "$RID-fail" --log-dir "$LOGS" --events >"$T/events.txt"
if grep -qE '^[0-9-]+ [0-9:.]+ +attempt 0  root_cause  root cause: rank 1 on localhost exited with code 3$' "$T/events.txt" &&
   grep -qx '    exit code 3' "$T/events.txt" && grep -qx '    | boom from 1' "$T/events.txt" &&
   grep -q '  end  *run '"$RID"'-fail failed (exit code 1)$' "$T/events.txt"; then
    tap_ok "logs --events: readable lines, the root cause with its exit code and last lines, the end"
else
    tap_fail "logs --events: readable lines, the root cause with its exit code and last lines, the end" \
        "$(cat "$T/events.txt")"
fi

# Unknown run, attempt, rank: exit 2 and a message naming them.
"$DDPTOP" logs nosuch --log-dir "$LOGS" >"$T/none.out" 2>"$T/none.err"
rc=$?
if [ $rc = 2 ] && [ ! -s "$T/none.out" ] &&
   grep -qF "ddptop logs: no run 'nosuch' under $LOGS (ddptop ls lists them" "$T/none.err"; then
    tap_ok "logs of an unknown run: exit 2, names the run and the directory searched"
else
    tap_fail "logs of an unknown run: exit 2, names the run and the directory searched" "rc $rc" "$(cat "$T/none.err")"
fi
"$DDPTOP" logs "$RID-restart" --log-dir "$LOGS" --attempt 5 2>"$T/att.err" >/dev/null
rc1=$?
"$DDPTOP" logs "$RID-restart" --log-dir "$LOGS" --rank 7 2>"$T/rank.err" >/dev/null
rc2=$?
if [ $rc1 = 2 ] && grep -q "has no attempt 5 (its attempts: 0-1)" "$T/att.err" &&
   [ $rc2 = 2 ] && grep -q "has no rank 7 in attempt 1 (its ranks: 0-1)" "$T/rank.err"; then
    tap_ok "logs: an attempt or rank the run does not have: exit 2, the ones it has"
else
    tap_fail "logs: an attempt or rank the run does not have" "$rc1 $(cat "$T/att.err")" "$rc2 $(cat "$T/rank.err")"
fi
"$DDPTOP" ls --log-dir "$T/nowhere" >/dev/null 2>"$T/nowhere.err"
rc=$?
if [ $rc = 2 ] && grep -q "cannot read the log directory $T/nowhere" "$T/nowhere.err"; then
    tap_ok "ls of a log directory that does not exist: exit 2, names it"
else
    tap_fail "ls of a log directory that does not exist: exit 2, names it" "rc $rc" "$(cat "$T/nowhere.err")"
fi

# ---------------------------------------------------------------------------------------
# logs -f on the live run: what is there, then a line written after it started; it exits
# once the run is stopped.
"$DDPTOP" logs "$RID-live" --log-dir "$LOGS" -f >"$T/follow.out" 2>"$T/follow.err" &
FPID=$!
if wait_until 10 grep -q "started 0" "$T/follow.out"; then
    touch "$T/marker.go"
    if wait_until 10 grep -q "after-follow 0" "$T/follow.out"; then
        tap_ok "logs -f prints a line the rank wrote after logs -f started"
    else
        tap_fail "logs -f prints a line the rank wrote after logs -f started" "$(cat -v "$T/follow.out")"
    fi
else
    tap_fail "logs -f prints what the live run's rank printed so far" "$(cat -v "$T/follow.out" "$T/follow.err")"
fi
if kill -0 "$FPID" 2>/dev/null; then tap_ok "logs -f keeps following while the run lives"
else tap_fail "logs -f keeps following while the run lives"; fi
kill -TERM "$RJ_PID"
rj_wait 20
rj_expect_rc "run 4, stopped with SIGTERM" 1
if wait_until 5 sh -c "! kill -0 $FPID 2>/dev/null"; then
    wait "$FPID"
    frc=$?
    FPID=""
    if [ $frc = 0 ] && [ "$(head -1 "$T/follow.out")" = "==> rank 0 (localhost) <==" ]; then
        tap_ok "logs -f exits (status 0) once the run is stopped"
    else
        tap_fail "logs -f exits (status 0) once the run is stopped" "status $frc" "$(head -3 "$T/follow.out")"
    fi
else
    tap_fail "logs -f exits once the run is stopped: still running 5 s later"
fi
check_row_after() { TABLE=$(ls_table); check_row "$@"; }
check_row_after "ls: the stopped live run is interrupted" "$RID-live" interrupted 1
tap_check "no rank process left behind" no_marker_pids "$T/marker"

tap_done
