#!/usr/bin/env bash
# Integration: one connection per node. Three real OpenSSH servers on loopback (127.0.0.1-3);
# the third node's login takes 12 s more: its sshd's ForceCommand sleeps 12 s before it runs
# the command the client asked for, as a slow ~/.bashrc would (Debian's bash under sshd reads
# ~/.bashrc, not BASH_ENV, and root's ~/.bashrc is not ours to change). Checks, reading sshd's
# own logs:
#  - `ddptop run` with its preflight logs in to every node exactly once, and launches on the
#    slow node with the default options (the login shell is a stage of its own, 60 s);
#  - `ddptop check` names the slow node: its login-shell time, a warning above 5 s and the
#    likely cause; --login-timeout 8 fails that node only, naming the login shell;
#  - `ddptop check` also logs in once per node;
#  - the dashboard during the preflight: the check table fills in, `?` shows the help and `q`
#    stops at once, leaving no agent behind.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/run_job.sh

SOCK=ddpo-$$
T() { tmux -L "$SOCK" "$@"; }
D=""
cleanup() {
    T kill-server 2>/dev/null
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK"
    rj_cleanup
    [ -n "$D" ] && { kill_marker_pids "$D/slowlogin.sh"; kill_marker_pids "$D/agent"; }
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }
sshd_setup || { tap_fail "test directory and keys"; tap_done; exit; }
D=$SSHD_DIR
# The slow login: 12 s, then the client's command (the sftp subsystem, for the agent's upload,
# comes as SSH_ORIGINAL_COMMAND=internal-sftp).
cat >"$D/slowlogin.sh" <<'EOF'
#!/bin/sh
case "${SSH_ORIGINAL_COMMAND:-}" in
internal-sftp|sftp|"") exec /usr/lib/openssh/sftp-server ;;
esac
sleep 12
exec sh -c "$SSH_ORIGINAL_COMMAND"
EOF
chmod 755 "$D/slowlogin.sh"
ADDR=(127.0.0.1 127.0.0.2 127.0.0.3)
for i in 0 1 2; do
    extra=()
    [ "$i" = 2 ] && extra=("ForceCommand $D/slowlogin.sh")
    if ! sshd_start_loopback "o$i" --addr "${ADDR[i]}" "${extra[@]}"; then
        tap_fail "sshd $i on ${ADDR[i]} starts"; tap_done; exit
    fi
    PORT[i]=$SSHD_PORT
    sshd_known_hosts_line "${ADDR[i]}" "${PORT[i]}" >>"$D/known_hosts"
    echo "${ADDR[i]}:${PORT[i]} slots=1" >>"$D/hosts.txt"
done
SSH_OPTS=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent")

# logins I: how many sessions node I's sshd accepted so far (its own log, LogLevel INFO).
logins() { grep -c 'Accepted publickey' "$D/o$1.sshd.log"; }

# --- the slow login shell is real ------------------------------------------------------------
t0=$SECONDS
ssh -F /dev/null -i "$D/id_ed25519" -o UserKnownHostsFile="$D/known_hosts" -o BatchMode=yes \
    -p "${PORT[2]}" root@"${ADDR[2]}" true 2>/dev/null
dt=$((SECONDS - t0))
if [ "$dt" -ge 12 ]; then tap_ok "the third node's login shell takes 12 s (plain ssh: ${dt} s)"
else tap_fail "the third node's login shell takes 12 s (plain ssh: ${dt} s)"; fi

# --- ddptop run with its preflight: one login per node, launches past the slow shell ----------
before=("$(logins 0)" "$(logins 1)" "$(logins 2)")
rj_run "$D/run.out" --limit 120 "$D/hosts.txt" --headless "${SSH_OPTS[@]}" --log-dir "$D/logs" \
    --run-id once -- /bin/sh -c 'echo "hello from rank $RANK"'
rj_expect_rc "run with the preflight and a 12 s login shell succeeds with default options" 0
n=""
for i in 0 1 2; do n+="$(($(logins "$i") - ${before[i]})) "; done
if [ "$n" = "1 1 1 " ]; then tap_ok "one login per node for a run with its preflight (sshd logs: $n)"
else tap_fail "one login per node for a run with its preflight (sshd logs: $n)" "$(cat "$D/run.out")"; fi
if [ "$(grep -c 'hello from rank' "$D/run.out")" = 3 ] && grep -q 'preflight: .* 0 fail$' "$D/run.out" &&
    grep -Eq "${ADDR[2]} +ssh +warn .*login shell took (1[2-9]|[2-9][0-9])\." "$D/run.out"; then
    tap_ok "every rank ran; the preflight passed, naming the slow login shell as a warning"
else
    tap_fail "every rank ran; the preflight passed, naming the slow login shell as a warning" "$(cat "$D/run.out")"
fi

# --- ddptop check names the slow login shell ---------------------------------------------------
before=("$(logins 0)" "$(logins 1)" "$(logins 2)")
"$DDPTOP" check "$D/hosts.txt" --json "${SSH_OPTS[@]}" >"$D/check.json" 2>"$D/check.err"
rc=$?
n=""
for i in 0 1 2; do n+="$(($(logins "$i") - ${before[i]})) "; done
if [ "$n" = "1 1 1 " ]; then tap_ok "ddptop check logs in once per node (sshd logs: $n)"
else tap_fail "ddptop check logs in once per node (sshd logs: $n)"; fi
if [ "$rc" = 0 ] && /usr/bin/python3 tests/lib/json_assert.py "$D/check.json" \
    "st(2, 'ssh') == 'warn' and ck(2, 'ssh')['login_shell_ms'] >= 12000" \
    "'login shell took' in txt(2, 'ssh') and 'bashrc' in txt(2, 'ssh')" \
    "ssh_ok(0) and ssh_ok(1) and ck(0, 'ssh')['login_shell_ms'] < ck(2, 'ssh')['login_shell_ms']" \
    "st(2, 'tcp') == 'pass' and st(2, 'clock') == 'pass'"; then
    tap_ok "check: the slow node warns with its login-shell time and the likely cause (exit 0)"
else
    tap_fail "check: the slow node warns with its login-shell time and the likely cause (exit $rc)" "$(cat "$D/check.err")"
fi

"$DDPTOP" check "$D/hosts.txt" --json --login-timeout 8 "${SSH_OPTS[@]}" >"$D/check5.json" 2>/dev/null
rc=$?
if [ "$rc" = 1 ] && /usr/bin/python3 tests/lib/json_assert.py "$D/check5.json" \
    "st(2, 'ssh') == 'fail' and 'login shell' in txt(2, 'ssh') and 'within 8 s' in txt(2, 'ssh')" \
    "'--login-timeout' in txt(2, 'ssh')" "ssh_ok(0) and ssh_ok(1)"; then
    tap_ok "--login-timeout 8: the slow node fails, naming its login shell and the option"
else
    tap_fail "--login-timeout 8: the slow node fails, naming its login shell and the option (exit $rc)"
fi

# --- the dashboard while the preflight waits for the slow node ---------------------------------
SCREEN=""
wait_screen() {
    local re=$1 limit=$2 end=$((SECONDS + $2))
    while :; do
        SCREEN=$(T capture-pane -p -t pf 2>/dev/null)
        grep -Eq -- "$re" <<<"$SCREEN" && return 0
        [ $SECONDS -ge $end ] && return 1
        sleep 0.2
    done
}
cmd="LANG=C.UTF-8 TERM=screen-256color $DDPTOP run $D/hosts.txt ${SSH_OPTS[*]} --log-dir $D/logs"
cmd+=" -- sleep 60; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s pf -x 120 -y 40 "$cmd"
if wait_screen 'preflight running' 30 && wait_screen "${ADDR[0]}:[0-9]+ +(pass|warn) " 90; then
    tap_ok "dashboard: the check table fills in while the preflight runs"
else
    tap_fail "dashboard: the check table fills in while the preflight runs" "$SCREEN"
fi
T send-keys -t pf '?'
if wait_screen 'Keys|keys' 5 && grep -q 'preflight running\|help' <<<"$SCREEN"; then
    tap_ok "dashboard: ? shows the help during the preflight"
else
    tap_fail "dashboard: ? shows the help during the preflight" "$SCREEN"
fi
T send-keys -t pf Escape
sleep 0.3
t0=$SECONDS
T send-keys -t pf q
sleep 0.5
# a confirmation, if the dashboard asks for one
grep -qi 'quit?\|(y/n)\|y/N' <<<"$(T capture-pane -p -t pf)" && T send-keys -t pf y
if wait_screen 'DDPTOP-EXIT=' 10; then
    tap_ok "dashboard: q during the preflight stops within $((SECONDS - t0)) s ($(grep -o 'DDPTOP-EXIT=[0-9]*' <<<"$SCREEN"))"
else
    tap_fail "dashboard: q during the preflight stops" "$SCREEN"
fi
# a login shell that was still starting ends by itself: the agent it then starts reads end of
# file at once (its connection is gone) and exits
# (the slow one sleeps in slowlogin.sh, no longer a child of sshd once the client went: it is
# waited for by its name, or it would run its command after the test removed $D)
T kill-session -t pf 2>/dev/null   # its shell (sleep 600) names $D/agent too
left_after_q() { no_marker_pids "$D/slowlogin.sh" && no_marker_pids "$D/agent"; }
if wait_until 60 left_after_q; then tap_ok "nothing left after q (agents, login shells)"
else tap_fail "nothing left after q" "$(ps -o pid,args -p "$( (marker_pids "$D/agent"; marker_pids "$D/slowlogin.sh") | paste -sd,)")"; fi
tap_done
