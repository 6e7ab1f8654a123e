#!/usr/bin/env bash
# Integration: dead and hung hosts never delay the verdict on the others beyond --timeout.
# Two good loopback sshd hosts, plus: a listener that accepts TCP and never sends the SSH
# banner (a hung host), and a real sshd in a network namespace whose every reply to us is
# dropped (a host that swallows packets: our SYNs get no answer). With --timeout 3 the run
# ends in about 3 s, the dead ones fail "timed out" with their other checks skipped, and the
# good ones pass.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/netns.sh
. tests/lib/check_run.sh

trap 'check_run_cleanup; sshd_cleanup; netns_cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
for i in 0 1; do
    if ! sshd_start_loopback "good$i"; then tap_fail "sshd good$i starts"; tap_done; exit; fi
    GOOD[i]=$SSHD_PORT
    sshd_known_hosts_line 127.0.0.1 "$SSHD_PORT" >>"$D/known_hosts"
done
if ! sshd_start_silent 127.0.0.1; then tap_fail "silent listener starts"; tap_done; exit; fi
HUNG=$SSHD_PORT
# The hung host's key is "known", so only the missing banner can fail it.
sshd_known_hosts_line 127.0.0.1 "$HUNG" >>"$D/known_hosts"

if ! netns_setup 1 || ! sshd_start drop "${NETNS_ADDR[0]}" 22 --netns "${NETNS_NODE[0]}"; then
    tap_fail "namespace with sshd for the packet-dropping host"; tap_done; exit
fi
DROP=${NETNS_ADDR[0]}
sshd_known_hosts_line "$DROP" 22 >>"$D/known_hosts"
# Reachable a moment ago; from now on the node swallows every packet meant for us.
if ! netns_drop_replies_to 0 "$NETNS_HOST_ADDR"; then tap_fail "blackhole route"; tap_done; exit; fi

printf '%s\n' "127.0.0.1:${GOOD[0]}" "127.0.0.1:$HUNG" "root@$DROP" "127.0.0.1:${GOOD[1]}" \
    >"$D/hosts.txt"
MP=$(sshd_pick_port)
CHECKS="('clock','gpu','env','tcp','nccl')"
run_check "$D/t.json" "$D/hosts.txt" --json --known-hosts "$D/known_hosts" -i "$D/id_ed25519" \
    -F "$D/ssh_config" --agent-dir "$D/agent" --master-port "$MP" --timeout 3
expect_rc "dead hosts: check fails" 1
jassert "hung host (no banner): ssh fail 'timed out', other checks skip" "$D/t.json" \
    "h(1)['port'] == $HUNG and st(1, 'ssh') == 'fail'" "'timed out' in low(txt(1, 'ssh'))" \
    "all(st(1, c) == 'skip' for c in $CHECKS)"
jassert "packet-dropping host: ssh fail 'timed out', other checks skip" "$D/t.json" \
    "h(2)['address'] == '$DROP' and st(2, 'ssh') == 'fail'" "'timed out' in low(txt(2, 'ssh'))" \
    "all(st(2, c) == 'skip' for c in $CHECKS)"
jassert "good hosts unaffected: ssh, clock, env, tcp pass" "$D/t.json" \
    "all(ssh_ok(k) and st(k, c) == 'pass' for k in (0, 3) for c in ('clock', 'env', 'tcp'))" \
    "d['summary']['fail'] == 2"
# Both dead hosts time out at the same time, not one after the other: about 3 s in all. The
# slack is for two shared cores; a sequential or per-stage timeout would take 6 s or more. The
# good hosts' login shells have a deadline of their own (60 s): on a loaded machine root's
# ~/.bashrc (pyenv) can take seconds, and then the run lasts as long as they do, not longer.
LOGIN_MS=$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(max(int(d["hosts"][k]["checks"]["ssh"].get("login_shell_ms") or 0) for k in (0, 3)))' "$D/t.json")
MAX_MS=$((5500 + ${LOGIN_MS:-0}))
if [ "$ELAPSED_MS" -ge 2500 ] && [ "$ELAPSED_MS" -le "$MAX_MS" ]; then
    tap_ok "whole run within --timeout 3 plus slack (${ELAPSED_MS} ms; the good hosts' login shells ${LOGIN_MS} ms)"
else
    tap_fail "whole run within --timeout 3 plus slack: ${ELAPSED_MS} ms (want 2500..${MAX_MS}: 5500 + the good hosts' login shells)"
fi

tap_done
