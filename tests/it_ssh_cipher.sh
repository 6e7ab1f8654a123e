#!/usr/bin/env bash
# Integration: the cipher ddptop's SSH connections use (issue 22, the log path). On a CPU with
# AES instructions ddptop offers aes128-gcm@openssh.com first (libssh and sshd then spend a
# fraction of what chacha20-poly1305 costs on every byte of rank output); a "Ciphers" line in
# the ssh config given with -F still wins; nothing weaker than libssh's own defaults is ever
# offered (a server that allows only aes128-cbc is refused). The cipher is read from the real
# sshd's debug log ("kex: client->server cipher: ...").
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/run_job.sh

D=""
cleanup() {
    rj_cleanup
    [ -n "$D" ] && kill_marker_pids "$D/agent"
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
if ! sshd_start_loopback c1 "LogLevel DEBUG1"; then tap_fail "sshd starts"; tap_done; exit; fi
P1=$SSHD_PORT
sshd_known_hosts_line 127.0.0.1 "$P1" >>"$D/known_hosts"
echo "127.0.0.1:$P1 slots=1" >"$D/hosts1"
# A server that allows only a cipher libssh knows but does not offer by default.
if ! sshd_start_loopback cbc "LogLevel DEBUG1" "Ciphers aes128-cbc"; then tap_fail "cbc-only sshd starts"; tap_done; exit; fi
P2=$SSHD_PORT
sshd_known_hosts_line 127.0.0.1 "$P2" >>"$D/known_hosts"
echo "127.0.0.1:$P2 slots=1" >"$D/hosts2"
COMMON=(--headless --known-hosts "$D/known_hosts" -i "$D/id_ed25519" --agent-dir "$D/agent"
        --timeout 10 --log-dir "$D/logs" --no-check)

# cipher LOG: the client->server cipher of the last session in an sshd log.
cipher() { grep -o 'kex: client->server cipher: [^ ]*' "$1" | tail -n 1 | awk '{print $4}'; }

tap_is() {  # tap_is GOT WANT NAME
    if [ "$1" = "$2" ]; then tap_ok "$3"; else tap_fail "$3" "got '$1', want '$2'"; fi
}

run1() {   # run1 CONFIG HOSTS: one `ddptop run` of `echo hi`; sets RJ_RC
    rj_start "$D/out" "$2" "${COMMON[@]}" -F "$1" --master-port "$(sshd_pick_port)" -- sh -c 'echo hi'
    rj_wait 60
}

if grep -qw aes /proc/cpuinfo && grep -qw pclmulqdq /proc/cpuinfo; then
    want=aes128-gcm@openssh.com
else
    want=chacha20-poly1305@openssh.com   # libssh's own first choice
fi
run1 "$D/ssh_config" "$D/hosts1"
tap_is "$RJ_RC" 0 "ddptop run over SSH succeeds"
tap_is "$(cipher "$D/c1.sshd.log")" "$want" "the session's cipher is $want (AES instructions: $(grep -qw aes /proc/cpuinfo && echo yes || echo no))"

cp "$D/ssh_config" "$D/ssh_config.chacha"
printf 'Host *\n    Ciphers chacha20-poly1305@openssh.com\n' >>"$D/ssh_config.chacha"
run1 "$D/ssh_config.chacha" "$D/hosts1"
tap_is "$RJ_RC" 0 "ddptop run with a Ciphers line in the ssh config succeeds"
tap_is "$(cipher "$D/c1.sshd.log")" chacha20-poly1305@openssh.com "the ssh config's Ciphers line wins over ddptop's order"

run1 "$D/ssh_config" "$D/hosts2"
tap_check "a server that allows only aes128-cbc is refused (exit $RJ_RC): nothing weaker is offered" \
    test "$RJ_RC" != 0
tap_check "its sshd saw no cipher in common: $(grep -o -m1 'no matching cipher found.*' "$D/cbc.sshd.log" | cut -c1-160)" \
    grep -q 'no matching cipher found' "$D/cbc.sshd.log"
tap_done
