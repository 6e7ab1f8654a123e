#!/usr/bin/env bash
# The dashboard on a real terminal: ddptop under tmux (a private server, -L), driven with
# send-keys and read back with capture-pane. The demo (no hostfile, 2 local ranks of
# ddptop-train) shows every rank with falling loss; `s` shows a stack; resizing to 40x10 and
# below (the "too small" notice) and back; a SIGKILLed rank turns the job FAILED with the root
# cause naming that rank and SIGKILL; `r` restarts and the step goes on from the snapshot;
# `q` + `y` leaves no process behind; two nodes behind real loopback sshd show their hosts.
# The dashboard runs in a session (tests/it_attach.sh): the terminal's ddptop is its client,
# the controller is the ddptop under the ddptop-session server.
# Every wait polls the screen against a deadline instead of sleeping a fixed time.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
TRAIN=$BUILD_DIR/ddptop-train
SOCK=ddpt-$$
# Every process the dashboard started is a descendant of the tmux server; tmux_cleanup stops
# them by id (never by name: other tests may run ddptop at the same time).
. tests/lib/tmux.sh
cleanup() {
    tmux_cleanup
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in tmux "$DDPTOP" "$TRAIN"; do
    command -v "$tool" >/dev/null || { tap_fail "$tool is available"; tap_done; exit; }
done
sshd_setup || { tap_fail "test directory"; tap_done; exit; }
D=$SSHD_DIR
# the sessions' sockets go to this test's own directory, not the user's (tests/it_attach.sh)
mkdir -m 700 "$D/xdg" && export XDG_RUNTIME_DIR=$D/xdg

# The loss in the header ("loss 3.2145").
header_loss() { grep -Eo 'loss [0-9]+\.[0-9]+' <<<"$SCREEN" | head -1 | cut -d' ' -f2; }
# Rows of the ranks table: "RANK HOST LR PID GLYPH STATE STEP LOSS ...".
rank_rows() { grep -E '^ *[0-9]+ +[A-Za-z0-9_.-]+ +[0-9]+ +[0-9-]+ +[^ ]+ +[a-z]+ +[0-9-]+' <<<"$SCREEN"; }
rank_step() { rank_rows | awk -v r="$1" '$1 == r { print $7 }' | head -1; }
# pids of ddptop-train processes of this test (their command line names $D).
train_pids() {
    local p
    for p in $(pgrep -f -- "--snapshot $D/" 2>/dev/null); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = ddptop-train ] && echo "$p"
    done
}
rank_of_pid() { tr '\0' '\n' </proc/"$1"/environ 2>/dev/null | sed -n 's/^RANK=//p'; }

# --- the demo: no hostfile, 2 local ranks --------------------------------------------------
TRAIN_ARGS=(--steps 100000 --hidden 64 --layers 1 --batch-size 8 --log-every 2
            --snapshot "$D/snap.bin" --snapshot-every 10)
cmd="cd $D && LANG=C.UTF-8 TERM=screen-256color $DDPTOP --log-dir $D/logs --run-id tui"
cmd+=" --hang-timeout 0 -- $TRAIN ${TRAIN_ARGS[*]}; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s demo -x 120 -y 40 "$cmd"

if wait_screen demo 'RUNNING' 60 && wait_screen demo 'loss [0-9]+\.[0-9]' 60; then
    tap_ok "demo starts: RUNNING with a mean loss in the header"
else
    tap_fail "demo starts: RUNNING with a mean loss in the header" "$SCREEN"
fi
if wait_screen demo '^ *1 +localhost' 30 && [ "$(rank_rows | grep -c localhost)" -eq 2 ]; then
    tap_ok "every rank has a row (2 ranks on localhost)"
else
    tap_fail "every rank has a row (2 ranks on localhost)" "$SCREEN"
fi
loss1=$(header_loss)
fell=""
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
    sleep 1
    wait_screen demo 'loss [0-9]' 5
    loss2=$(header_loss)
    if [ -n "$loss1" ] && [ -n "$loss2" ] && awk -v a="$loss1" -v b="$loss2" 'BEGIN { exit !(b < a - 0.05) }'; then
        fell=1; break
    fi
done
if [ -n "$fell" ]; then tap_ok "loss falls on screen ($loss1 -> $loss2)"
else tap_fail "loss falls on screen (${loss1:-none} -> ${loss2:-none})" "$SCREEN"; fi

# --- resize down to 40x10, below it, and back ------------------------------------------------
T resize-window -t demo -x 40 -y 10
if wait_screen demo 'RUNNING|STALLED' 10 && ! grep -q 'too small' <<<"$SCREEN"; then
    tap_ok "40x10 still draws the dashboard"
else
    tap_fail "40x10 still draws the dashboard" "$SCREEN"
fi
T resize-window -t demo -x 30 -y 8
if wait_screen demo 'too small' 10; then tap_ok "30x8 shows the terminal-too-small notice"
else tap_fail "30x8 shows the terminal-too-small notice" "$SCREEN"; fi
T resize-window -t demo -x 120 -y 40
if wait_screen demo '^ *1 +localhost' 10 && ! grep -q 'too small' <<<"$SCREEN"; then
    tap_ok "back at 120x40: the full dashboard again"
else
    tap_fail "back at 120x40: the full dashboard again" "$SCREEN"
fi

# --- SIGKILL of one rank: FAILED and the root cause ------------------------------------------
# Past two snapshots first, so the restart below has one to resume from.
end=$((SECONDS + 90))
while [ $SECONDS -lt $end ]; do
    wait_screen demo 'localhost' 5
    s0=$(rank_step 0); [ -n "$s0" ] && [ "$s0" != - ] && [ "$s0" -ge 25 ] && break
    sleep 0.5
done
victim=$(train_pids | head -1)
vrank=$(rank_of_pid "${victim:-0}")
before=$(rank_step 0)
if [ -n "$victim" ] && [ -n "$vrank" ]; then
    kill -KILL "$victim"
    if wait_screen demo 'FAILED' 30 && wait_screen demo "rank $vrank .*SIGKILL" 10; then
        tap_ok "SIGKILL of rank $vrank: FAILED and the root cause names rank $vrank and SIGKILL"
    else
        tap_fail "SIGKILL of rank $vrank: FAILED and the root cause names it" "$SCREEN"
    fi
    # its failure class under it (docs/failures.md): a SIGKILL ddptop did not send is the OOM
    # killer's (likely), or unknown when the agent counted no OOM kill in the rank's cgroup
    if wait_screen demo 'class: (killed|unknown)' 10; then
        tap_ok "the root cause's class row: a SIGKILL ddptop did not send"
    else
        tap_fail "the root cause's class row: a SIGKILL ddptop did not send" "$SCREEN"
    fi
else
    tap_fail "found a rank process to kill (step ${before:-none})" "$SCREEN" "$(ps -ef | grep ddptop-train)"
fi

# --- r: restart, resumed from the snapshot -----------------------------------------------------
T send-keys -t demo r
resumed=""
if wait_screen demo 'attempt 1' 30 && wait_screen demo 'RUNNING' 60; then
    end=$((SECONDS + 30))
    while [ $SECONDS -lt $end ]; do
        wait_screen demo 'localhost' 5
        s=$(rank_step 0)
        if [ -n "$s" ] && [ "$s" != - ]; then resumed=$s; break; fi
        sleep 0.2
    done
fi
from=""
end=$((SECONDS + 10))   # the log files are flushed every second
while [ -z "$from" ] && [ $SECONDS -lt $end ]; do
    from=$(grep -ho '"resumed_from":[0-9]*' "$D"/logs/tui/attempt-1/rank-0.log 2>/dev/null | head -1 | cut -d: -f2)
    [ -n "$from" ] || sleep 0.3
done
if [ -n "$resumed" ] && [ -n "$from" ] && [ "$from" -ge 10 ] && [ "$resumed" -ge "$from" ]; then
    tap_ok "r restarts: attempt 1 resumes from the snapshot at step $from (first step shown $resumed)"
else
    tap_fail "r restarts and resumes from the snapshot (snapshot ${from:-none}, shown ${resumed:-none}, before ${before:-none})" "$SCREEN"
fi

# --- q asks while ranks run (n: stay) ----------------------------------------------------------
srv=$(T display -p '#{pid}')
pids_before=$(tree_of "$srv" | tr '\n' ' ')
T send-keys -t demo q
if wait_screen demo 'y/n' 10; then tap_ok "q asks first while ranks run"
else tap_fail "q asks first while ranks run" "$SCREEN"; fi
T send-keys -t demo n
if wait_screen demo '\? help' 5 && grep -q 'RUNNING' <<<"$SCREEN"; then tap_ok "n keeps the job running"
else tap_fail "n keeps the job running" "$SCREEN"; fi

# --- stacks of the selected rank (rank 0); late, since gdb holds the rank a while ------------
T send-keys -t demo s
if wait_screen demo 'Stacks of rank 0' 60 && wait_screen demo '(#[0-9]+ |wchan|Thread|\[<)' 30; then
    tap_ok "s shows the stacks of the selected rank in the log pane"
else
    tap_fail "s shows the stacks of the selected rank in the log pane" "$SCREEN"
fi

# --- q, y: everything stops ------------------------------------------------------------------
T send-keys -t demo q
wait_screen demo 'y/n' 5 && T send-keys -t demo y
if wait_screen demo 'DDPTOP-EXIT=' 30; then
    left=""
    end=$((SECONDS + 10))
    while [ $SECONDS -lt $end ]; do
        left=""
        for p in $pids_before; do
            c=$(cat /proc/$p/comm 2>/dev/null) || continue
            case $c in ddptop|ddptop-session|ddptop-agent|ddptop-train) left="$left $p($c)" ;; esac
        done
        [ -z "$left" ] && break
        sleep 0.2
    done
    if [ -z "$left" ] && [ -z "$(train_pids)" ]; then
        tap_ok "after q, y: ddptop, its agent and every rank are gone"
    else
        tap_fail "after q, y: no process left" "left:$left $(train_pids)"
    fi
    if grep -q 'ddptop' <<<"$SCREEN" && ! grep -q 'RUNNING' <<<"$SCREEN"; then
        tap_ok "the terminal is restored after quitting (the dashboard is gone)"
    else
        tap_fail "the terminal is restored after quitting" "$SCREEN"
    fi
else
    tap_fail "q, y: ddptop exits" "$SCREEN"
fi

# --- two nodes behind real sshd on loopback --------------------------------------------------
ok=1
for i in 1 2; do
    if sshd_start_loopback "node$i" --addr "127.0.0.$i"; then
        sshd_known_hosts_line "127.0.0.$i" "$SSHD_PORT" >>"$D/known_hosts"
        sshd_write_ssh_config "$D/ssh_config" "node$i" "127.0.0.$i" "$SSHD_PORT"
        echo "node$i slots=1" >>"$D/hosts.txt"
    else
        ok=""
    fi
done
MP=$(sshd_pick_port)
if [ -n "$ok" ]; then
    cmd="cd $D && LANG=C.UTF-8 $DDPTOP $D/hosts.txt -F $D/ssh_config --known-hosts $D/known_hosts"
    cmd+=" --agent-dir $D/agent --master-port $MP --log-dir $D/logs --run-id multi --hang-timeout 0"
    cmd+=" -- $TRAIN --steps 100000 --hidden 64 --layers 1 --batch-size 8 --log-every 2"
    cmd+=" --snapshot $D/snap2.bin; echo DDPTOP-EXIT=\$?; sleep 600"
    T new-session -d -s multi -x 120 -y 40 "$cmd"
    if wait_screen multi '^ *1 +node2 ' 90 && wait_screen multi '^ *0 +node1 ' 5 &&
       wait_screen multi 'RUNNING' 60; then
        tap_ok "two nodes over sshd: the ranks table shows node1 for rank 0 and node2 for rank 1"
    else
        tap_fail "two nodes over sshd: ranks show their hosts" "$SCREEN"
    fi
    # Ctrl-C: the controller stops every rank on every node, then gives the terminal back
    T send-keys -t multi C-c
    if wait_screen multi 'DDPTOP-EXIT=' 30; then
        end=$((SECONDS + 10))
        while [ -n "$(train_pids)" ] && [ $SECONDS -lt $end ]; do sleep 0.2; done
        if [ -z "$(train_pids)" ]; then tap_ok "Ctrl-C ends the multi-node run, no rank left"
        else tap_fail "Ctrl-C ends the multi-node run, no rank left" "$(train_pids)"; fi
    else
        tap_fail "Ctrl-C ends the multi-node run" "$SCREEN"
    fi
else
    tap_fail "two sshd servers on 127.0.0.1 and 127.0.0.2 start"
fi

# --- a refused preflight stays on screen; q quits with 3 ----------------------------------------
sshd_closed_port
echo "127.0.0.1:$SSHD_PORT" >"$D/closed.txt"
touch "$D/known_hosts"
cmd="cd $D && LANG=C.UTF-8 $DDPTOP $D/closed.txt -F $D/ssh_config --known-hosts $D/known_hosts"
cmd+=" -i $D/id_ed25519 --agent-dir $D/agent --timeout 5 --log-dir $D/logs --run-id refused;"
cmd+=" echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s refused -x 120 -y 40 "$cmd"
if wait_screen refused 'Preflight refused' 60 && grep -q "127.0.0.1" <<<"$SCREEN" &&
   grep -Eq 'CHECK.FAILED' <<<"$SCREEN"; then
    tap_ok "a refused preflight shows CHECK_FAILED and the results with the host"
else
    tap_fail "a refused preflight shows CHECK_FAILED and the results with the host" "$SCREEN"
fi
T send-keys -t refused q
if wait_screen refused 'DDPTOP-EXIT=3' 20; then tap_ok "q after a refused preflight exits 3"
else tap_fail "q after a refused preflight exits 3" "$SCREEN"; fi

# --- a crash gives the terminal back too --------------------------------------------------------
# (--agent-grace 0: the agents end the ranks with the controller; with a grace they would wait
# for ddptop attach, it_attach.sh)
cmd="cd $D && LANG=C.UTF-8 $DDPTOP --log-dir $D/logs --run-id segv --hang-timeout 0 --agent-grace 0 -- /bin/sleep 1000;"
cmd+=" echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s segv -x 100 -y 30 "$cmd"
if wait_screen segv '2 running' 60; then
    srv=$(T display -p '#{pid}')
    dpid="" sleepers=""
    for p in $(tree_of "$srv"); do
        case "$(cat /proc/$p/comm 2>/dev/null)" in
        # the controller: the dashboard's process under the session's server (the terminal's
        # own ddptop is only a client of it)
        ddptop) [ "$(cat /proc/"$(awk '{ print $4 }' /proc/$p/stat)"/comm 2>/dev/null)" = ddptop-session ] &&
                dpid=$p ;;
        sleep) tr '\0' ' ' </proc/$p/cmdline | grep -q 'sleep 1000' && sleepers="$sleepers $p" ;;
        esac
    done
    kill -SEGV "$dpid"
    if wait_screen segv 'DDPTOP-EXIT=139' 20 && ! grep -q 'running' <<<"$SCREEN"; then
        tap_ok "SIGSEGV: the terminal is restored, then the signal ends ddptop (139)"
    else
        tap_fail "SIGSEGV: the terminal is restored" "$SCREEN"
    fi
    end=$((SECONDS + 10))
    while [ $SECONDS -lt $end ]; do
        left=""
        for p in $sleepers; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
        [ -z "$left" ] && break
        sleep 0.2
    done
    if [ -n "$sleepers" ] && [ -z "$left" ]; then tap_ok "the crashed controller's ranks are gone"
    else tap_fail "the crashed controller's ranks are gone (ranks:${sleepers:- none found}, left:$left)"; fi
else
    tap_fail "a job of two sleep ranks runs" "$SCREEN"
fi

tap_done
