#!/usr/bin/env bash
# it_control_plane: the control plane is never the reason a job dies (docs/run.md "When the
# controller loses a node"). Three nodes behind real sshd on loopback, two ranks each; every
# rank prints a numbered line every 20 ms until told to finish and writes the same lines to a
# copy of its own, so that its log can be compared with what it printed, byte for byte.
#   1. The controller SIGSTOPped for 60 s, then continued: no rank killed, no node lost, the
#      stall named as the controller's own, exit 0, every log equal to its copy.
#   2. The log directory stalled for 30 s (an ext4 image of the test's own, frozen with
#      fsfreeze): no node declared silent, exit 0, every log equal to its copy.
#   3. A detached session (ddptop run --detach) whose job finished: every agent gone within 5 s
#      although nobody attached; the session stays for ddptop attach.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/run_job.sh
. tests/lib/ctrank.sh     # the rank whose log must equal its own copy

D=""
FZ=""
FROZEN=0
cleanup() {
    [ "$FROZEN" = 1 ] && fsfreeze -u "$FZ" 2>/dev/null
    if [ -n "$RJ_PID" ]; then kill -CONT "$RJ_PID" 2>/dev/null; fi
    rj_cleanup
    if [ -n "$D" ]; then
        kill_marker_pids "$D/bin"
        kill_marker_pids "$D/agent"
        kill_marker_pids "$D/logs"
    fi
    if [ -n "$FZ" ] && mountpoint -q "$FZ"; then umount "$FZ" || umount -l "$FZ"; fi
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
ADDR=(127.0.0.1 127.0.0.2 127.0.0.3)
for i in 0 1 2; do
    if ! sshd_start_loopback "c$i" --addr "${ADDR[i]}"; then
        tap_fail "sshd $i on ${ADDR[i]} starts"; tap_done; exit
    fi
    sshd_known_hosts_line "${ADDR[i]}" "$SSHD_PORT" >>"$D/known_hosts"
    echo "${ADDR[i]}:$SSHD_PORT slots=2" >>"$D/hosts.txt"
done
mkdir -p "$D/bin"
ctrank_install "$D/bin/ctrank"
RID=cp$$-$RANDOM
COMMON=(--headless --known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config"
        --agent-dir "$D/agent" --timeout 10 --no-check)

ctrank_count() { marker_pids "$D/bin/ctrank" ctrank | wc -l; }
# the agents (and bridges) of this test: run from $D/agent (ddptop's own command line names
# that directory too, as --agent-dir)
agent_pids() {
    local p
    for p in $(marker_pids "$D/agent"); do
        case "$(cat "/proc/$p/comm" 2>/dev/null)" in ddptop-agent*) echo "$p" ;; esac
    done
}
no_agents() { [ -z "$(agent_pids)" ]; }
all_printing() {
    local r
    for r in 0 1 2 3 4 5; do grep -q "^\[r$r [^]]*\] rank $r line 3 " "$1" || return 1; done
}

# ---------------------------------------------------------------------------------------
# 1. The controller SIGSTOPped for 60 s.
mkdir -p "$D/ct1"
rj_start "$D/stop.out" "$D/hosts.txt" "${COMMON[@]}" --log-dir "$D/logs" --run-id "$RID-stop" \
    --env "CTDIR=$D/ct1" -- "$D/bin/ctrank"
if ! wait_until 60 all_printing "$D/stop.out"; then
    tap_fail "six ranks printing before the stop" "$(tail -10 "$D/stop.out")" "$(cat "$D/stop.out.err")"
    tap_done; exit
fi
kill -STOP "$RJ_PID"
T0=$(date +%s)
sleep 55
n=$(ctrank_count)
if [ "$n" -eq 6 ]; then tap_ok "55 s into the controller's stop all 6 ranks still run"
else tap_fail "the ranks go on while the controller is stopped ($n of 6)"; fi
while [ $(($(date +%s) - T0)) -lt 60 ]; do sleep 0.2; done
kill -CONT "$RJ_PID"
ev="$D/logs/$RID-stop/events.jsonl"
stall_seen() { grep -q 'the controller did not run for' "$ev" 2>/dev/null; }
if wait_until 15 stall_seen; then tap_ok "continued: the stall is named as the controller's own"
else tap_fail "the controller's stall is named" "$(tail -5 "$ev")"; fi
sleep 3
touch "$D/ct1/finish"
rj_wait 60
rj_expect_rc "the job stopped for 60 s ends with exit 0" 0
if diag=$(ctrank_logs_match "$D/logs/$RID-stop" "$D/ct1" 6); then
    tap_ok "every rank's log is its copy, byte for byte (lines per rank: $diag)"
else
    tap_fail "every rank's log equals what it printed" "$diag"
fi
ev_assert "events: the controller did not run for 60 s; no node lost, none silent or unreachable" "$ev" \
    "any('the controller did not run for 6' in e['text'] or 'the controller did not run for 59' in e['text'] for e in E)" \
    "not ev('node_lost')" "not any('silent since' in e['text'] or 'unreachable' in e['text'] for e in E)"
tap_check "no rank or agent left after the stopped job" no_marker_pids "$D/bin/ctrank" ctrank
tap_check "... and no agent" no_agents

# ---------------------------------------------------------------------------------------
# 2. The log directory stalls for 30 s: an ext4 image mounted here and frozen.
FZ=$D/fz
mkdir -p "$FZ"
truncate -s 128M "$D/fz.img" && mkfs.ext4 -q -F "$D/fz.img" && mount -o loop "$D/fz.img" "$FZ"
if ! mountpoint -q "$FZ"; then
    tap_fail "a loop-mounted ext4 for the log directory (needs root and loop devices)"; tap_done; exit
fi
mkdir -p "$D/ct2"
rj_start "$D/fz.out" "$D/hosts.txt" "${COMMON[@]}" --log-dir "$FZ/logs" --run-id "$RID-fz" \
    --env "CTDIR=$D/ct2" -- "$D/bin/ctrank"
if ! wait_until 60 all_printing "$D/fz.out"; then
    tap_fail "six ranks printing before the freeze" "$(tail -10 "$D/fz.out")" "$(cat "$D/fz.out.err")"
    tap_done; exit
fi
fsfreeze -f "$FZ" && FROZEN=1
T0=$(date +%s)
# the headless output goes on while the disk is frozen: the controller's loop never waits on it
n1=$(wc -l <"$D/fz.out")
sleep 25
n2=$(wc -l <"$D/fz.out")
if [ "$FROZEN" = 1 ] && [ "$n2" -gt $((n1 + 1000)) ] && kill -0 "$RJ_PID"; then
    tap_ok "the log directory frozen: 25 s later the controller still prints the ranks' lines ($n1 -> $n2)"
else
    tap_fail "the controller goes on while its log directory is frozen ($n1 -> $n2 lines, frozen $FROZEN)"
fi
while [ $(($(date +%s) - T0)) -lt 30 ]; do sleep 0.2; done
fsfreeze -u "$FZ" && FROZEN=0
sleep 3
touch "$D/ct2/finish"
rj_wait 60
rj_expect_rc "the job whose log directory stalled for 30 s ends with exit 0" 0
if diag=$(ctrank_logs_match "$FZ/logs/$RID-fz" "$D/ct2" 6); then
    tap_ok "every rank's log is its copy, byte for byte, across the stall (lines per rank: $diag)"
else
    tap_fail "every rank's log equals what it printed across the stall" "$diag"
fi
ev_assert "events: no node silent, unreachable or lost during the stall" "$FZ/logs/$RID-fz/events.jsonl" \
    "ev('end') and ev('end')[-1]['state'] == 'succeeded'" \
    "not ev('node_lost')" "not any('silent since' in e['text'] or 'unreachable' in e['text'] for e in E)"
if wait_until 5 no_agents; then tap_ok "no agent left after the job"
else tap_fail "no agent left after the job" "$(agent_pids)"; fi
if grep -qE '\] node .* (silent|unreachable)' "$D/fz.out"; then
    tap_fail "the headless output names no silent node" "$(grep -E 'silent|unreachable' "$D/fz.out")"
else
    tap_ok "the headless output names no silent node"
fi
umount "$FZ" && FZ=""

# ---------------------------------------------------------------------------------------
# 3. A detached session whose job finished lets its agents go at once.
XDG=$D/xdg
mkdir -m 700 "$XDG"
mkdir -p "$D/ct3"
touch "$D/ct3/finish"  # the ranks print their last line and end at once
out=$(cd "$D" && env XDG_RUNTIME_DIR="$XDG" LANG=C.UTF-8 TERM=screen-256color "$DDPTOP" run --detach \
      --known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent" \
      --timeout 10 --no-check --log-dir "$D/logs" --run-id "$RID-det" --env "CTDIR=$D/ct3" \
      "$D/hosts.txt" -- "$D/bin/ctrank" </dev/null 2>&1)
rc=$?
ended() { grep -q '"kind":"end"' "$D/logs/$RID-det/events.jsonl" 2>/dev/null; }
if [ $rc -eq 0 ] && wait_until 60 ended; then
    t_end=$(date +%s%N)
    if wait_until 5 no_agents; then
        tap_ok "the detached session's job ended: every agent gone $((($(date +%s%N) - t_end) / 1000000)) ms later"
    else
        tap_fail "the detached session's agents are gone within 5 s of the job's end" "$(agent_pids)"
    fi
    if [ -S "$XDG/ddptop/$RID-det.sock" ]; then
        tap_ok "the session stays for ddptop attach (its socket is there)"
    else
        tap_fail "the session stays after its job ended" "$(ls -la "$XDG/ddptop" 2>&1)"
    fi
else
    tap_fail "a detached run that finishes (rc $rc)" "$out" "$(cat "$D/logs/$RID-det/events.jsonl" 2>&1 | tail -5)"
fi
kill_marker_pids "$D/logs"

tap_done
