#!/usr/bin/env bash
# Integration: the clock check finds an injected offset within its reported error bound.
# Three loopback sshd hosts; two of them start every session under libfaketime through
# sshd_config's SetEnv (LD_PRELOAD + FAKETIME), so the agent they run reads a clock 3 s
# (resp. 100 ms) ahead while sshd itself and the network are real. libfaketime is the named
# fake here: a remote clock cannot otherwise differ on one machine.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/check_run.sh

trap 'check_run_cleanup; sshd_cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

FAKELIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
[ -e "$FAKELIB" ] || FAKELIB=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)
if [ -z "$FAKELIB" ] || [ ! -e "$FAKELIB" ]; then
    tap_fail "libfaketime present (Debian package faketime, see make deps)"; tap_done; exit
fi
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
start() { # start NAME [FAKETIME]
    local extra=()
    [ -n "${2:-}" ] && extra=("SetEnv LD_PRELOAD=$FAKELIB FAKETIME=$2")
    sshd_start_loopback "$1" "${extra[@]}" || { tap_fail "sshd $1 starts"; tap_done; exit; }
    sshd_known_hosts_line 127.0.0.1 "$SSHD_PORT" >>"$D/known_hosts"
    echo "127.0.0.1:$SSHD_PORT" >>"$D/hosts.txt"
}
start normal
start ahead3s +3s
start ahead100ms +0.1s

# Does a session on the faked server really see the offset? (else the test proves nothing)
skew=$(ssh -F /dev/null -i "$D/id_ed25519" -o UserKnownHostsFile="$D/known_hosts" \
    -o BatchMode=yes -p "$SSHD_PORT" root@127.0.0.1 'echo $FAKETIME' 2>&1)
if [ "$skew" = "+0.1s" ]; then tap_ok "sshd SetEnv passes FAKETIME to sessions"
else tap_fail "sshd SetEnv passes FAKETIME to sessions" "got: $skew"; fi

MP=$(sshd_pick_port)
run_check "$D/c.json" "$D/hosts.txt" --json --known-hosts "$D/known_hosts" -i "$D/id_ed25519" \
    -F "$D/ssh_config" --agent-dir "$D/agent" --master-port "$MP" --timeout 10 --max-skew-ms 200
expect_rc "a node 3 s ahead: check fails" 1
jassert "unskewed node: clock pass, offset within its error of 0" "$D/c.json" \
    "st(0, 'clock') == 'pass'" \
    "abs(ck(0, 'clock')['offset_ms']) <= ck(0, 'clock')['error_ms'] + 0.01"
# The true offset is 3000 ms (libfaketime adds it to every clock read); the estimate must be
# within its reported error of it (+1 ms for libfaketime's and JSON's rounding).
jassert "node 3 s ahead: clock fail, offset_ms = 3000 within error_ms" "$D/c.json" \
    "st(1, 'clock') == 'fail' and h(1)['status'] == 'fail'" \
    "ck(1, 'clock')['error_ms'] > 0" \
    "abs(ck(1, 'clock')['offset_ms'] - 3000) <= ck(1, 'clock')['error_ms'] + 1"
jassert "node 100 ms ahead with --max-skew-ms 200: clock warn, offset ~100 ms" "$D/c.json" \
    "st(2, 'clock') == 'warn'" \
    "abs(ck(2, 'clock')['offset_ms'] - 100) <= ck(2, 'clock')['error_ms'] + 1"
jassert "clock skew fails only the clock check" "$D/c.json" \
    "all(ssh_ok(k) and st(k, 'tcp') == 'pass' for k in range(3))"

# The default limit (500 ms): 100 ms is above a tenth of it, so still a warning; 3 s fails.
run_check "$D/c2.json" "$D/hosts.txt" --json --known-hosts "$D/known_hosts" -i "$D/id_ed25519" \
    -F "$D/ssh_config" --agent-dir "$D/agent" --master-port "$MP" --timeout 10
jassert "default --max-skew-ms 500: 3 s fails, 100 ms warns" "$D/c2.json" \
    "st(1, 'clock') == 'fail'" "st(2, 'clock') == 'warn'" "st(0, 'clock') == 'pass'"

tap_done
