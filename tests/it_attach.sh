#!/usr/bin/env bash
# it_attach: the job outlives its terminal (docs/dashboard.md "Detach and attach"). In tmux (a
# private server, -L): a rank printing a counter every 0.2 s runs in the dashboard of terminal
# A; A is killed (its terminal closes: SIGHUP) and the rank goes on printing; `ddptop attach
# RUN` in B shows the dashboard, a second client in C (no RUN: the only session) too; `d`
# detaches C with its line while B stays; user nobody is refused, by the directory and by
# the server's SO_PEERCRED check, and the job is unaffected; a stale socket and an unknown
# run give their messages; in B, q then y stops the job: B exits with the job's status and
# nothing is left (ranks, server, socket); `ddptop attach` of that ended run shows it
# read-only (ddptop view, run by the entry for the session layer). Then `ddptop run --detach` (the run id made and
# printed), attach, stop; SIGKILL of the dashboard's process: its client exits 137, the rank
# goes on (its agent waits, --agent-grace), `ddptop ls` says the run is orphaned, and `ddptop
# attach RUN` takes the run over in a new dashboard whose log holds every line (a second
# `ddptop run` of that run id meanwhile is refused: one controller per run); stopping it
# there leaves nothing. An unsafe socket directory is refused. With DDPTOP_NO_SESSION=1 the
# dashboard has no detach (d says so, q asks y/n only) and the run is still noted for attach.
# The sockets live in this test's own XDG_RUNTIME_DIR; every process is stopped by id.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
SOCK=ddpa-$$
. tests/lib/tmux.sh       # T, tree_of, wait_screen (the clean-up below is its own)
. tests/lib/run_job.sh    # wait_until
D=$(mktemp -d /tmp/ddptop-it-attach.XXXXXX) || exit 1
XDG=$D/xdg
SDIR=$XDG/ddptop
mkdir -m 700 "$XDG"
ENV="XDG_RUNTIME_DIR=$XDG LANG=C.UTF-8 TERM=screen-256color"

# Every process of this test names $D on its command line (ddptop's --log-dir, the ranks'
# script); the agents are their children.
test_pids() {
    local p
    for p in $(pgrep -f -- "$D" 2>/dev/null); do tree_of "$p"; echo "$p"; done | sort -u
}
cleanup() {
    T kill-server 2>/dev/null
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK"
    local pids
    pids=$(test_pids)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v tmux >/dev/null || { tap_fail "tmux is available"; tap_done; exit; }
[ -x "$DDPTOP" ] || { tap_fail "$DDPTOP is built"; tap_done; exit; }

# The rank: a counter every 0.2 s for about 90 s (the steps below take well under that).
cat >"$D/counter.sh" <<'EOF'
#!/bin/sh
i=0
while [ $i -lt 450 ]; do echo "tick $i"; i=$((i + 1)); sleep 0.2; done
EOF
chmod +x "$D/counter.sh"

ppid_of() { awk '{ print $4 }' /proc/"$1"/stat 2>/dev/null; }
comm_of() { cat /proc/"$1"/comm 2>/dev/null; }
# The dashboard's process of run $1: ddptop with --run-id RUN under a ddptop-session.
inner_of() {
    local p
    for p in $(pgrep -f -- "--run-id $1( |$)" 2>/dev/null); do
        [ "$(comm_of "$p")" = ddptop ] && [ "$(comm_of "$(ppid_of "$p")")" = ddptop-session ] && echo "$p"
    done | head -1
}
rank_pids() { pgrep -f -- "^/bin/sh $D/counter.sh" 2>/dev/null; }
log_lines() { cat "$D/logs/$1/attempt-0/rank-0.log" 2>/dev/null | wc -l; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
# waits until none of the pids lives
gone_within() {
    local limit=$1 end p left; shift
    end=$((SECONDS + limit))
    while :; do
        left=""
        for p in "$@"; do alive "$p" && left="$left $p"; done
        [ -z "$left" ] && return 0
        [ $SECONDS -ge $end ] && { echo "$left"; return 1; }
        sleep 0.2
    done
}
run_cmd() { echo "cd $D && $ENV $DDPTOP run --log-dir $D/logs --hang-timeout 0 $*"; }
attach_cmd() { echo "cd $D && $ENV $DDPTOP attach $*; echo ATTACH-EXIT=\$?; sleep 600"; }

# --- A: the dashboard in a session --------------------------------------------------------------
T new-session -d -s A -x 120 -y 40 "$(run_cmd --run-id att -- "$D/counter.sh"); echo DDPTOP-EXIT=\$?; sleep 600"
if wait_screen A 'RUNNING' 30 && wait_screen A '^ *0 +localhost' 10 && wait_screen A 'tick [0-9]' 10; then
    tap_ok "ddptop run on a terminal shows the dashboard (through its session)"
else
    tap_fail "ddptop run on a terminal shows the dashboard" "$SCREEN"
fi
if [ "$(stat -c %a "$SDIR" 2>/dev/null)" = 700 ] && [ -S "$SDIR/att.sock" ] &&
   [ "$(stat -c %a "$SDIR/att.sock")" = 600 ]; then
    tap_ok "the socket is $SDIR/att.sock, 0600, in a directory of mode 0700"
else
    tap_fail "the socket and its directory are private" "$(ls -la "$SDIR" 2>&1)"
fi
inner=$(inner_of att)
server=$(ppid_of "${inner:-0}")
client=$(ppid_of "${server:-0}")
if [ -n "$inner" ] && [ "$(comm_of "$client")" = ddptop ] &&
   [ "$(ps -o sid= -p "$server" | tr -d ' ')" != "$(ps -o sid= -p "$client" | tr -d ' ')" ]; then
    tap_ok "the dashboard runs under a ddptop-session server in a session of its own"
else
    tap_fail "the dashboard runs under a server in its own session (inner ${inner:-none})" "$(ps -ef --forest | grep -v grep | grep ddptop)"
fi

# --- the terminal closes: only the client ends ----------------------------------------------------
T kill-session -t A
if gone_within 10 "$client" >/dev/null && alive "$server" && alive "$inner"; then
    tap_ok "closing terminal A (SIGHUP) ends its client; the server and the dashboard go on"
else
    tap_fail "closing terminal A ends only its client" "client $client server $server inner $inner"
fi
n1=$(log_lines att)
sleep 3
n2=$(log_lines att)
if [ -n "$(rank_pids)" ] && [ "$n2" -gt "$n1" ]; then
    tap_ok "the rank keeps printing with no terminal attached (log $n1 -> $n2 lines)"
else
    tap_fail "the rank keeps printing with no terminal attached (log $n1 -> $n2 lines)"
fi

# --- attach in B and C; d detaches C ------------------------------------------------------------------
T new-session -d -s B -x 100 -y 30 "$(attach_cmd att)"
if wait_screen B 'run att' 15 && wait_screen B '^ *0 +localhost +0 +[0-9]+ .*running' 10; then
    tap_ok "ddptop attach att in B shows the dashboard with the run's rank table"
else
    tap_fail "ddptop attach att in B shows the dashboard" "$SCREEN"
fi
T new-session -d -s C -x 120 -y 40 "$(attach_cmd)"
if wait_screen C 'run att' 15 && wait_screen C '^ *0 +localhost +0 +[0-9]+ .*running' 10 &&
   wait_screen C '\? help' 5; then
    tap_ok "a second client in C (ddptop attach, no RUN: the only session) sees it, at C's size"
else
    tap_fail "a second client in C sees the dashboard too" "$SCREEN"
fi
# C attached last and set the size; Ctrl-L in B gives the pty B's size: both show one screen
T send-keys -t B C-l
if wait_screen B '\? help' 10 && wait_screen B 'run att' 5 && wait_screen B '^ *0 +localhost' 5 &&
   wait_screen C 'run att' 10 && wait_screen C '^ *0 +localhost +0 +[0-9]+ .*running' 5 &&
   [ "$(T capture-pane -p -t B | head -3)" = "$(T capture-pane -p -t C | head -3 | cut -c1-100 | sed 's/ *$//')" ]; then
    tap_ok "Ctrl-L in B: the session takes B's size; B and C show the same dashboard"
else
    tap_fail "Ctrl-L in B: B and C show the same dashboard" "$(T capture-pane -p -t B | head -5)" "$(T capture-pane -p -t C | head -5)"
fi
T send-keys -t C C-l
wait_screen C '\? help' 10
T send-keys -t C d
if wait_screen C 'ATTACH-EXIT=0' 10 &&
   grep -q 'ddptop: detached from run att; the job goes on. ddptop attach att to come back' <<<"$SCREEN"; then
    tap_ok "d in C detaches C with its line and exit status 0"
else
    tap_fail "d in C detaches C with its line" "$SCREEN"
fi
# C had set the size last; once it is gone the pty takes B's again: B's status line shows
if wait_screen B '^ *0 +localhost' 10 && wait_screen B '\? help' 10 && wait_screen B 'run att' 5 &&
   alive "$inner"; then
    tap_ok "B stays attached, at its own size again (its header and status line on screen)"
else
    tap_fail "B stays attached at its own size" "$SCREEN"
fi

# --- another user is refused --------------------------------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
    tap_skip "user nobody is refused" "needs root for runuser"
    tap_skip "the server closes another uid's connection" "needs root for runuser"
else
    out=$(runuser -u nobody -- "$DDPTOP" attach "$SDIR/att.sock" </dev/null 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && grep -q 'permission denied' <<<"$out"; then
        tap_ok "nobody: ddptop attach SOCKET is refused by the 0700 directory ($out)"
    else
        tap_fail "nobody: ddptop attach SOCKET is refused (rc $rc)" "$out"
    fi
    # with the directory and the socket opened up, the checks of both ends still refuse
    chmod 711 "$D" "$XDG" "$SDIR" && chmod 666 "$SDIR/att.sock"
    out=$(runuser -u nobody -- "$DDPTOP" attach "$SDIR/att.sock" </dev/null 2>&1)
    rc=$?
    probe=$(runuser -u nobody -- /usr/bin/python3 - "$SDIR/att.sock" <<'EOF' 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
# SM_HELLO: version 1, 30 rows, 100 columns, flags 0; then a key
try:
    s.sendall(bytes([1, 0, 7, 0, 1, 0, 30, 0, 100, 0]) + bytes([2, 0, 1]) + b'q')
except (BrokenPipeError, ConnectionResetError):
    pass
got = b''
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    print('closed after %d bytes' % len(got))
except ConnectionResetError:
    print('closed after %d bytes' % len(got))
except socket.timeout:
    print('still open after %d bytes' % len(got))
EOF
)
    chmod 700 "$D" "$XDG" "$SDIR" && chmod 600 "$SDIR/att.sock"
    if [ $rc -ne 0 ] && grep -q 'served by uid 0, not by you' <<<"$out"; then
        tap_ok "nobody, the directory opened: the client refuses a socket served by another uid"
    else
        tap_fail "nobody, the directory opened: the client refuses (rc $rc)" "$out"
    fi
    if [ "$probe" = "closed after 0 bytes" ]; then
        tap_ok "nobody, raw: the server closes the connection without a byte (SO_PEERCRED)"
    else
        tap_fail "nobody, raw: the server closes the connection without a byte" "$probe"
    fi
    n1=$(log_lines att)
    sleep 1.5
    if wait_screen B 'RUNNING' 5 && ! grep -q 'y/n' <<<"$SCREEN" && [ "$(log_lines att)" -gt "$n1" ]; then
        tap_ok "the job is unaffected: RUNNING in B, no question asked, the log grows"
    else
        tap_fail "the job is unaffected by nobody's attempts" "$SCREEN"
    fi
fi

# --- unknown and stale sockets -----------------------------------------------------------------------
/usr/bin/python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$SDIR/stale.sock"
out=$(cd "$D" && env XDG_RUNTIME_DIR="$XDG" "$DDPTOP" attach stale </dev/null 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q 'the session of run stale is gone' <<<"$out" && grep -q 'removed' <<<"$out" &&
   [ ! -e "$SDIR/stale.sock" ]; then
    tap_ok "a stale socket: a clear message, the file removed ($out)"
else
    tap_fail "a stale socket: a clear message, the file removed (rc $rc)" "$out" "$(ls -la "$SDIR")"
fi
out=$(cd "$D" && env XDG_RUNTIME_DIR="$XDG" "$DDPTOP" attach nosuch </dev/null 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q 'no session of run nosuch' <<<"$out" && grep -q '^  att$' <<<"$out"; then
    tap_ok "an unknown run: a message that lists the running sessions"
else
    tap_fail "an unknown run: a message that lists the running sessions (rc $rc)" "$out"
fi

# --- q in B: stop or detach; y stops ------------------------------------------------------------------
ranks=$(rank_pids)
T send-keys -t B q
if wait_screen B 'y/n/d' 10 && grep -q 'd detaches' <<<"$SCREEN"; then
    tap_ok "q in a session asks: stop the job (y) or detach (d)"
else
    tap_fail "q in a session asks: stop the job or detach" "$SCREEN"
fi
T send-keys -t B y
if wait_screen B 'ATTACH-EXIT=' 30 && grep -q 'ATTACH-EXIT=1' <<<"$SCREEN" &&
   grep -q 'ddptop: job STOPPED after 1 attempt (exit 1)' <<<"$SCREEN"; then
    tap_ok "y stops the job: B prints the final line and exits with the job's status (1)"
else
    tap_fail "y stops the job and B exits with the job's status" "$SCREEN"
fi
if left=$(gone_within 15 "$inner" "$server" $ranks) && [ -z "$(rank_pids)" ] && [ ! -e "$SDIR/att.sock" ]; then
    tap_ok "nothing is left: no rank, no dashboard, no server, no socket"
else
    tap_fail "nothing is left after the stop" "left:$left $(rank_pids)" "$(ls -la "$SDIR")"
fi

# --- attach to a run that ended: the session shows it through the entry (ddptop view) ------------------
# The session layer includes no command: it asks the program's entry to run `ddptop view` (run_again).
T new-session -d -s V -x 120 -y 40 "$(attach_cmd att)"
if wait_screen V 'STOPPED \| run att' 15 && ! grep -q 'ATTACH-EXIT' <<<"$SCREEN"; then
    T send-keys -t V d
    if wait_screen V 'view of a finished run: d does nothing' 5; then
        tap_ok "ddptop attach of a run that ended shows its final screen, read-only (ddptop view)"
    else
        tap_fail "ddptop attach of a run that ended shows it read-only" "$SCREEN"
    fi
else
    tap_fail "ddptop attach of a run that ended shows its final screen" "$SCREEN"
fi
T send-keys -t V q
if wait_screen V 'ATTACH-EXIT=' 10 && grep -q 'ATTACH-EXIT=0' <<<"$SCREEN" &&
   grep -q 'ddptop attach: run att has ended (stopped): showing it (ddptop view)' <<<"$SCREEN"; then
    tap_ok "q leaves it with exit status 0, after the line saying the run ended"
else
    tap_fail "q leaves the view of an ended run with exit status 0 and its line" "$SCREEN"
fi
T kill-session -t V 2>/dev/null

# --- ddptop run --detach -------------------------------------------------------------------------------
out=$(cd "$D" && env XDG_RUNTIME_DIR="$XDG" LANG=C.UTF-8 TERM=screen-256color "$DDPTOP" run --detach \
      --log-dir "$D/logs" --hang-timeout 0 -- "$D/counter.sh" </dev/null 2>&1)
rc=$?
run=$(sed -n 's/.*ddptop attach \([A-Za-z0-9._-]*\) .*/\1/p' <<<"$out" | head -1)
if [ $rc -eq 0 ] && [ -n "$run" ] && [ -S "$SDIR/$run.sock" ] && [ -n "$(inner_of "$run")" ]; then
    tap_ok "run --detach exits 0 with the session up and says how to attach (run $run)"
else
    tap_fail "run --detach exits 0 with the session up (rc $rc)" "$out"
fi
T new-session -d -s E -x 120 -y 40 "$(attach_cmd "$run")"
if wait_screen E "run $run" 20 && wait_screen E '^ *0 +localhost +0 +[0-9]+ .*running' 20; then
    tap_ok "ddptop attach shows the detached run's dashboard"
else
    tap_fail "ddptop attach shows the detached run's dashboard" "$SCREEN"
fi
inner=$(inner_of "$run")
server=$(ppid_of "${inner:-0}")
ranks=$(rank_pids)
T send-keys -t E q
wait_screen E 'y/n/d' 10 && T send-keys -t E y
if wait_screen E 'ATTACH-EXIT=1' 30 && left=$(gone_within 15 "$inner" "$server" $ranks) &&
   [ ! -e "$SDIR/$run.sock" ]; then
    tap_ok "q, y stops the detached run: exit 1, nothing left"
else
    tap_fail "q, y stops the detached run" "$SCREEN" "left:$left"
fi

# --- SIGKILL of the dashboard's process: the run is orphaned, ddptop attach takes it over -----------------
T new-session -d -s F -x 120 -y 40 "$(run_cmd --run-id kil -- "$D/counter.sh"); echo DDPTOP-EXIT=\$?; sleep 600"
if wait_screen F '^ *0 +localhost +0 +[0-9]+ .*running' 30; then
    inner=$(inner_of kil)
    server=$(ppid_of "${inner:-0}")
    ranks=$(rank_pids)
    kill -KILL "$inner"
    if wait_screen F 'DDPTOP-EXIT=137' 20; then
        tap_ok "SIGKILL of the dashboard's process: its client exits 137"
    else
        tap_fail "SIGKILL of the dashboard's process: its client exits 137" "$SCREEN"
    fi
    n1=$(log_lines kil)
    sleep 2
    if [ -n "$ranks" ] && [ "$(rank_pids)" = "$ranks" ] && gone_within 10 "$server" >/dev/null &&
       [ ! -e "$SDIR/kil.sock" ]; then
        tap_ok "... its rank goes on (its agent waits for a controller); server and socket are gone"
    else
        tap_fail "the rank goes on after SIGKILL of the dashboard (ranks: ${ranks:-none}, now: $(rank_pids))"
    fi
    out=$(cd "$D" && env $ENV "$DDPTOP" ls --log-dir "$D/logs" 2>&1)
    if grep -Eq '^kil +orphaned \(agents waiting, [0-9]+ s left\)' <<<"$out"; then
        tap_ok "ddptop ls: the run is orphaned (agents waiting, N s left)"
    else
        tap_fail "ddptop ls says the run is orphaned" "$out"
    fi
    T new-session -d -s G -x 120 -y 40 "$(attach_cmd kil)"
    caught_up() { grep -q 'taking over run kil' "$D/logs/kil/events.jsonl" &&
                  grep -q 'node localhost caught up' "$D/logs/kil/events.jsonl"; }
    if wait_screen G '^ *0 +localhost +0 +[0-9]+ .*running' 30 && wait_until 20 caught_up &&
       grep -Eq "^ *0 +localhost +0 +$ranks " <<<"$SCREEN"; then
        tap_ok "ddptop attach kil takes the run over: a new dashboard, the rank running with its pid, caught up"
    else
        tap_fail "ddptop attach takes the orphaned run over" "$SCREEN" "$(tail -4 "$D/logs/kil/events.jsonl")"
    fi
    # one controller per run: a second ddptop for run kil stops before it touches a file
    out=$(cd "$D" && env $ENV timeout 20 "$DDPTOP" run --headless --run-id kil --log-dir "$D/logs" -- /bin/true 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q 'is written by another ddptop (pid [0-9]* on ' <<<"$out"; then
        tap_ok "a second ddptop run --run-id kil while it is taken over is refused (exit $rc), naming the holder"
    else
        tap_fail "a second controller of run kil is refused (exit $rc)" "$out"
    fi
    inner=$(inner_of kil)
    server=$(ppid_of "${inner:-0}")
    T send-keys -t G q
    wait_screen G 'y/n/d' 10 && T send-keys -t G y
    if wait_screen G 'ATTACH-EXIT=1' 30 && left=$(gone_within 15 $ranks "$inner" "$server"); then
        tap_ok "q, y there stops the run taken over: nothing left"
    else
        tap_fail "the run taken over stops" "$SCREEN" "left:$left"
    fi
    # every tick the rank printed, once and in order, although two controllers wrote the log
    if diag=$(awk '/^tick [0-9]+$/ { if ($2 != n) { print "line " NR ": " $0 " (want tick " n ")"; exit 1 } n++ }
                   END { print n " ticks" }' "$D/logs/kil/attempt-0/rank-0.log") &&
       [ "$(log_lines kil)" -gt "$n1" ]; then
        tap_ok "the log holds every tick once, in order, across the takeover ($diag)"
    else
        tap_fail "the log holds every tick once across the takeover" "$diag"
    fi
else
    tap_fail "a job runs in terminal F" "$SCREEN"
fi

# --- a socket directory open to others is refused -------------------------------------------------------
mkdir -p -m 700 "$D/bad" && mkdir -m 755 "$D/bad/ddptop"
out=$(cd "$D" && env XDG_RUNTIME_DIR="$D/bad" "$DDPTOP" run --detach --log-dir "$D/logs" \
      --run-id bad -- "$D/counter.sh" </dev/null 2>&1)
rc=$?
if [ $rc -eq 2 ] && grep -q 'open to group or others (mode 0755)' <<<"$out" && [ -z "$(rank_pids)" ] &&
   [ ! -e "$D/bad/ddptop/bad.sock" ]; then
    tap_ok "a socket directory open to others is refused with a message; nothing starts"
else
    tap_fail "a socket directory open to others is refused (rc $rc)" "$out"
fi
out=$("$DDPTOP" run --detach --headless -- true </dev/null 2>&1)
if [ $? -eq 2 ] && grep -q 'does not go with --headless' <<<"$out"; then
    tap_ok "--detach with --headless is a usage error"
else
    tap_fail "--detach with --headless is a usage error" "$out"
fi

# --- no session: the dashboard is handed no detach, but the run is still noted -------------------------
# (the dashboard includes nothing of the session: the entry hands it tui/frontend_session.h)
T new-session -d -s N -x 120 -y 40 "cd $D && $ENV DDPTOP_NO_SESSION=1 $DDPTOP run --log-dir $D/logs --hang-timeout 0 --run-id nos -- $D/counter.sh; echo DDPTOP-EXIT=\$?; sleep 600"
if wait_screen N 'tick [0-9]' 30 && [ ! -e "$SDIR/nos.sock" ] && [ -z "$(inner_of nos)" ] &&
   [ "$(cat "$SDIR/nos.dir" 2>/dev/null)" = "$D/logs/nos" ]; then
    tap_ok "DDPTOP_NO_SESSION=1: the dashboard runs without a session, and the run's directory is noted for attach"
else
    tap_fail "DDPTOP_NO_SESSION=1: the dashboard without a session, the run noted" "$SCREEN" "$(ls -la "$SDIR" 2>&1)" \
        "nos.dir: $(cat "$SDIR/nos.dir" 2>&1)"
fi
T send-keys -t N d
if wait_screen N 'not in a session \(DDPTOP_NO_SESSION\): nothing to detach from' 5 && ! grep -q DDPTOP-EXIT <<<"$SCREEN"; then
    tap_ok "d without a session says there is nothing to detach from; the dashboard stays"
else
    tap_fail "d without a session says there is nothing to detach from" "$SCREEN"
fi
T send-keys -t N q
if wait_screen N 'y/n' 5 && ! grep -q 'd detaches' <<<"$SCREEN"; then
    tap_ok "q without a session asks y/n only (no detach offered)"
else
    tap_fail "q without a session asks y/n only" "$SCREEN"
fi
T send-keys -t N y
if wait_screen N 'DDPTOP-EXIT=' 20 && grep -q 'DDPTOP-EXIT=1' <<<"$SCREEN" && [ -z "$(rank_pids)" ]; then
    tap_ok "y stops it: exit 1, no rank left"
else
    tap_fail "y stops the run without a session" "$SCREEN" "ranks: $(rank_pids)"
fi

tap_done
