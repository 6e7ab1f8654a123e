#!/usr/bin/env bash
# it_adopt_record: what adopt.json (the takeover record, launcher/controller/controller_record.c)
# holds and for how long (issue 28, finding 4). The run's environment carries a secret:
#  - while the run goes on the record holds the environment and the token (a takeover needs
#    them) and says RUNNING; a rank that stalls makes it say STALLED;
#  - once the run ended (done, failed) it says so (DONE, FAILED) and holds neither;
#  - a controller SIGKILLed: while its agents wait the record keeps them (`ddptop ls` says
#    orphaned); once the agents' grace is long over (the record's and the log index's times
#    put back 10 minutes) `ddptop ls` drops them and says INTERRUPTED, keeping the file's time,
#    and `ddptop attach` says it cannot take the run over.
# Local ranks; every process started names $T and is killed by pid at the end.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/ddptop-it-adopt.XXXXXX) || exit 1
LOGS=$T/logs
ID=$$
cleanup() {
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T" /tmp/ddptop-nccl-{done,failed,stall,killed}-"$ID"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
mkdir -m 700 "$T/xdg"
export XDG_RUNTIME_DIR=$T/xdg
SECRET="adopt-secret-$RANDOM$RANDOM"
export DDPTOP_IT_API_TOKEN=$SECRET
COMMON=(--headless --no-check --term-timeout 2 --log-dir "$LOGS")

if [ ! -x "$DDPTOP" ]; then tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; fi

# The ranks: sleep $1 seconds (printing nothing, so no step: a stall with --hang-timeout 1),
# then exit $2.
cat >"$T/rank.sh" <<'EOF'
#!/bin/sh
sleep "$1"
exit "$2"
EOF
chmod +x "$T/rank.sh"

# record RUN: adopt.json's facts as one line: state, whether env and token are there, whether
# the secret is anywhere in the file.
record() {
    $PY - "$LOGS/$1/adopt.json" "$SECRET" <<'PY' 2>&1
import json, sys
raw = open(sys.argv[1]).read()
r = json.loads(raw)
print("state=%s env=%s token=%s secret=%s" % (r.get("state"), "env" in r, "token" in r, sys.argv[2] in raw))
PY
}
# wait_record RUN PATTERN SECONDS: until record RUN matches PATTERN (grep -E)
wait_record() {
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do
        record "$1" | grep -Eq "$2" && return 0
        sleep 0.2
    done
    record "$1" | grep -Eq "$2"
}

# --- a run that succeeds ---------------------------------------------------------------------
rj_start "$T/done.out" "${COMMON[@]}" --run-id "done-$ID" -- "$T/rank.sh" 3 0
if wait_record "done-$ID" 'state=RUNNING env=True token=True secret=True' 10; then
    tap_ok "while the run goes on, adopt.json says RUNNING and holds the environment and the token"
else
    tap_fail "while the run goes on, adopt.json says RUNNING and holds the environment and the token" \
        "$(record "done-$ID")"
fi
rj_wait 30
got=$(record "done-$ID")
if [ "$RJ_RC" = 0 ] && [ "$got" = "state=DONE env=False token=False secret=False" ]; then
    tap_ok "the run ended (done): adopt.json says DONE and holds neither the environment nor the token"
else
    tap_fail "the run ended (done): adopt.json says DONE and holds neither the environment nor the token" \
        "exit $RJ_RC; $got"
fi
if [ "$(stat -c %a "$LOGS/done-$ID/adopt.json")" = 600 ] && ! grep -rqF "$SECRET" "$LOGS/done-$ID"; then
    tap_ok "adopt.json stays 0600, and the secret is in no file of the ended run"
else
    tap_fail "adopt.json stays 0600, and the secret is in no file of the ended run" \
        "$(stat -c '%a %n' "$LOGS/done-$ID/adopt.json")" "$(grep -rlF "$SECRET" "$LOGS/done-$ID")"
fi
out=$(XDG_RUNTIME_DIR=$T/xdg "$DDPTOP" attach "done-$ID" --log-dir "$LOGS" --headless 2>&1 </dev/null)
if echo "$out" | grep -q "has ended"; then
    tap_ok "ddptop attach of the ended run shows it (nothing to take over)"
else
    tap_fail "ddptop attach of the ended run shows it" "$out"
fi

# --- a run that fails ------------------------------------------------------------------------
rj_run "$T/failed.out" --limit 30 "${COMMON[@]}" --max-restarts 0 --run-id "failed-$ID" -- "$T/rank.sh" 0 3
got=$(record "failed-$ID")
if [ "$RJ_RC" = 1 ] && [ "$got" = "state=FAILED env=False token=False secret=False" ]; then
    tap_ok "the run ended (failed): adopt.json says FAILED and holds neither"
else
    tap_fail "the run ended (failed): adopt.json says FAILED and holds neither" "exit $RJ_RC; $got"
fi

# --- a stall -----------------------------------------------------------------------------------
rj_start "$T/stall.out" "${COMMON[@]}" --hang-timeout 1 --on-hang none --run-id "stall-$ID" -- "$T/rank.sh" 5 0
if wait_record "stall-$ID" 'state=STALLED env=True token=True' 5; then
    tap_ok "a rank stalls: adopt.json says STALLED (the state a takeover acts on follows the run's)"
else
    tap_fail "a rank stalls: adopt.json says STALLED" "$(record "stall-$ID")" "$(cat "$T/stall.out")"
fi
rj_wait 30
got=$(record "stall-$ID")
if [ "$RJ_RC" = 0 ] && [ "$got" = "state=DONE env=False token=False secret=False" ]; then
    tap_ok "then it ends: DONE, neither held"
else
    tap_fail "then it ends: DONE, neither held" "exit $RJ_RC; $got"
fi

# --- a controller SIGKILLed ------------------------------------------------------------------------
rj_start "$T/killed.out" "${COMMON[@]}" --agent-grace 2 --run-id "killed-$ID" -- "$T/rank.sh" 60 0
wait_record "killed-$ID" 'state=RUNNING env=True' 10
kill -KILL "$RJ_PID"
rj_wait 5
state=$("$DDPTOP" ls --log-dir "$LOGS" --json | $PY -c '
import json, sys
print([r.get("state") for r in json.load(sys.stdin) if r["run_id"] == sys.argv[1]])' "killed-$ID")
got=$(record "killed-$ID")
if [ "$state" = "['orphaned']" ] && [ "$got" = "state=RUNNING env=True token=True secret=True" ]; then
    tap_ok "controller SIGKILLed: while its agents wait (orphaned) the record keeps what a takeover needs"
else
    tap_fail "controller SIGKILLed: while its agents wait the record keeps what a takeover needs" "$state" "$got"
fi
end=$((SECONDS + 15))
while [ -n "$(marker_pids "$T/rank.sh")" ] && [ $SECONDS -lt $end ]; do sleep 0.2; done
if no_marker_pids "$T/rank.sh"; then
    tap_ok "its agent's grace (2 s) ends: the rank is stopped"
else
    tap_fail "its agent's grace (2 s) ends: the rank is stopped" "$(marker_pids "$T/rank.sh")"
fi
# the controller was last alive 10 minutes ago, as far as its files say
touch -d '10 minutes ago' "$LOGS/killed-$ID/log-index" "$LOGS/killed-$ID/adopt.json"
before=$(stat -c %Y "$LOGS/killed-$ID/adopt.json")
row=$(env -u COLUMNS "$DDPTOP" ls --log-dir "$LOGS" | awk -v r="killed-$ID" '$1 == r')
got=$(record "killed-$ID")
if [ "$got" = "state=INTERRUPTED env=False token=False secret=False" ] &&
   [ "$(stat -c %Y "$LOGS/killed-$ID/adopt.json")" = "$before" ] &&
   [ "$(stat -c %a "$LOGS/killed-$ID/adopt.json")" = 600 ]; then
    tap_ok "the grace long over: ddptop ls drops the environment and the token, says INTERRUPTED, keeps the file's time and mode"
else
    tap_fail "the grace long over: ddptop ls drops the environment and the token, says INTERRUPTED" "$got" \
        "mtime $before -> $(stat -c '%Y %a' "$LOGS/killed-$ID/adopt.json")" "$row"
fi
if echo "$row" | grep -q interrupted; then
    tap_ok "ddptop ls shows it interrupted: $row"
else
    tap_fail "ddptop ls shows it interrupted" "$row"
fi
out=$("$DDPTOP" attach "killed-$ID" --log-dir "$LOGS" --headless 2>&1 </dev/null)
rc=$?
if [ "$rc" -ne 0 ] && echo "$out" | grep -q "cannot be taken over: its record (adopt.json) says INTERRUPTED"; then
    tap_ok "ddptop attach then says it cannot take the run over (exit $rc)"
else
    tap_fail "ddptop attach then says it cannot take the run over" "exit $rc" "$out"
fi
tap_done
