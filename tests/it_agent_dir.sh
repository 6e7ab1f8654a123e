#!/usr/bin/env bash
# Integration: the agent directory on a node is one nobody else can write (real sshd on
# loopback, the other user played by uid 65534 through setpriv). The agent runs as the user
# from --agent-dir, so:
#   - another user's 0777 directory with a planted "agent" (under the very name ddptop looks
#     for) is refused before anything runs: the message names the host, the directory, its
#     owner and what to do; the planted program's marker is never written;
#   - our own directory made 0777, with a file planted in it: refused, the hint says chmod 700;
#     once it is 700 the planted file (not ours) is not run but replaced by our copy;
#   - a parent writable by others (no sticky bit), a symbolic link: refused; a parent like /tmp
#     (1777) is fine;
#   - a rebuilt agent (other bytes, same version) gets another name and is uploaded and run; a
#     copy under our name whose bytes are not ours (SHA-256 on the node) is uploaded again, not
#     run.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/check_run.sh

cleanup() {
    check_run_cleanup
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

OTHER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
for b in "$DDPTOP" "$(dirname "$DDPTOP")/ddptop-agent"; do
    [ -x "$b" ] || { tap_fail "binary exists: $b (make all)"; tap_done; exit 1; }
done
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
AGENT_LOCAL=$(dirname "$DDPTOP")/ddptop-agent
if ! sshd_start_loopback n1 --no-sftp; then tap_fail "sshd starts"; tap_done; exit; fi
P1=$SSHD_PORT
if ! sshd_start_loopback n2 --addr 127.0.0.2; then tap_fail "sshd with sftp starts"; tap_done; exit; fi
P2=$SSHD_PORT
sshd_known_hosts_line 127.0.0.1 "$P1" >>"$D/known_hosts"
sshd_known_hosts_line 127.0.0.2 "$P2" >>"$D/known_hosts"
echo "127.0.0.1:$P1" >"$D/n1.txt"
echo "127.0.0.2:$P2" >"$D/n2.txt"
MP=$(sshd_pick_port)   # the rendezvous port the check listens on: not the default, which other runs may hold
COMMON=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --timeout 10 --json --master-port "$MP")
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# The name ddptop looks for: learnt from a first check into a private directory.
run_check "$D/c0.json" "$D/n1.txt" "${COMMON[@]}" --agent-dir "$D/private"
expect_rc "a private --agent-dir: check succeeds" 0
agent=$(ls "$D"/private/ddptop-agent-* 2>/dev/null | head -1)
NAME=$(basename "${agent:-none}")
h=$(sha "$AGENT_LOCAL")
if [ "$NAME" != "${NAME%-"${h:0:16}"}" ] && cmp -s "$agent" "$AGENT_LOCAL" &&
   [ "$(stat -c %a "$D/private")" = 700 ]; then
    tap_ok "the agent's name ends in its SHA-256 prefix ($NAME), the directory is 700"
else
    tap_fail "the agent's name ends in its SHA-256 prefix" "name $NAME, sha $h" "$(ls -la "$D/private" 2>&1)"
fi

# plant DIR: another user's program under our name in DIR, that would leave
# $D/shared/pwned-* behind if anyone ran it.
mkdir -m 1777 "$D/shared"
plant() {
    "${OTHER[@]}" sh -c 'printf "#!/bin/sh\ntouch %s/pwned-\$(id -u)\necho {}\n" "$2" >"$1/$3" &&
        chmod 777 "$1/$3"' \
        sh "$1" "$D/shared" "$NAME"
}
pwned() { ls "$D"/shared/pwned-* 2>/dev/null; }

# --- 1. another user's 0777 directory with a planted agent ---
"${OTHER[@]}" mkdir -m 777 "$D/shared/agents"
"${OTHER[@]}" chmod 777 "$D/shared/agents"
plant "$D/shared/agents"
run_check "$D/c1.json" "$D/n1.txt" "${COMMON[@]}" --agent-dir "$D/shared/agents"
expect_rc "another user's directory: check fails" 1
jassert "another user's directory: refused, naming host, directory, owner, and what to do" "$D/c1.json" \
    "st(0, 'ssh') == 'fail'" \
    "'127.0.0.1' in ck(0, 'ssh')['detail'] and '$D/shared/agents' in ck(0, 'ssh')['detail']" \
    "'belongs to uid 65534' in ck(0, 'ssh')['detail'] and 'nothing was run' in ck(0, 'ssh')['detail']" \
    "'--agent-dir' in ck(0, 'ssh').get('hint', '')"
if [ -z "$(pwned)" ]; then tap_ok "another user's directory: the planted program never ran"
else tap_fail "another user's directory: the planted program never ran" "$(pwned)"; fi

# --- 2. our directory, made 0777, a file planted in it ---
mkdir -m 777 "$D/shared/ours"
chmod 777 "$D/shared/ours"
plant "$D/shared/ours"
run_check "$D/c2.json" "$D/n1.txt" "${COMMON[@]}" --agent-dir "$D/shared/ours"
expect_rc "our directory writable by others: check fails" 1
jassert "our directory writable by others: refused, the hint says chmod 700 DIR" "$D/c2.json" \
    "st(0, 'ssh') == 'fail'" \
    "'writable by others (drwxrwxrwx)' in ck(0, 'ssh')['detail'] and '$D/shared/ours' in ck(0, 'ssh')['detail']" \
    "'chmod 700 $D/shared/ours' in ck(0, 'ssh').get('hint', '')"
chmod 700 "$D/shared/ours"
run_check "$D/c3.json" "$D/n1.txt" "${COMMON[@]}" --agent-dir "$D/shared/ours"
expect_rc "made 700: check succeeds" 0
jassert "made 700: the planted file (not ours) was replaced by an upload" "$D/c3.json" \
    "ssh_ok(0) and ck(0, 'ssh')['agent_uploaded'] is True"
if [ -z "$(pwned)" ] && cmp -s "$D/shared/ours/$NAME" "$AGENT_LOCAL" &&
   [ "$(stat -c %u "$D/shared/ours/$NAME")" = 0 ]; then
    tap_ok "made 700: the planted program never ran; our bytes are there now"
else
    tap_fail "made 700: the planted program never ran; our bytes are there now" "$(pwned)" \
        "$(ls -la "$D/shared/ours" 2>&1)"
fi

# --- 3. a parent others can write (no sticky bit), a link; a sticky parent is fine ---
mkdir -m 777 "$D/open"
chmod 777 "$D/open"
mkdir -m 700 "$D/open/agents"
run_check "$D/c4.json" "$D/n2.txt" "${COMMON[@]}" --agent-dir "$D/open/agents"
expect_rc "a parent writable by others: check fails" 1
jassert "a parent writable by others: refused, the parent named" "$D/c4.json" \
    "st(0, 'ssh') == 'fail' and 'the parent of --agent-dir $D/open is writable by others' in ck(0, 'ssh')['detail']" \
    "'127.0.0.2' in ck(0, 'ssh')['detail'] and 'chmod go-w $D/open' in ck(0, 'ssh').get('hint', '')"
ln -s "$D/private" "$D/link"
run_check "$D/c5.json" "$D/n2.txt" "${COMMON[@]}" --agent-dir "$D/link"
expect_rc "a symbolic link: check fails" 1
jassert "a symbolic link: refused" "$D/c5.json" \
    "st(0, 'ssh') == 'fail' and '$D/link is a symbolic link' in ck(0, 'ssh')['detail']"
run_check "$D/c6.json" "$D/n2.txt" "${COMMON[@]}" --agent-dir "$D/shared/mine"
expect_rc "a new directory in a sticky 1777 parent: check succeeds" 0
tap_check "a new directory in a sticky parent: made 700 by ddptop" \
    test "$(stat -c %a "$D/shared/mine" 2>/dev/null)" = 700

# --- 4. a rebuilt agent of the same version ---
mkdir -p "$D/bin"
cp "$DDPTOP" "$AGENT_LOCAL" "$D/bin/"
printf 'rebuilt' >>"$D/bin/ddptop-agent"   # other bytes; an ELF with a tail still runs
DDPTOP_SAVED=$DDPTOP
DDPTOP=$D/bin/ddptop
run_check "$D/c7.json" "$D/n1.txt" "${COMMON[@]}" --agent-dir "$D/private"
DDPTOP=$DDPTOP_SAVED
h2=$(sha "$D/bin/ddptop-agent")
expect_rc "a rebuilt agent: check succeeds" 0
jassert "a rebuilt agent: uploaded again" "$D/c7.json" "ssh_ok(0) and ck(0, 'ssh')['agent_uploaded'] is True"
new=$(ls "$D"/private/ddptop-agent-*-"${h2:0:16}" 2>/dev/null | head -1)
if [ -n "$new" ] && cmp -s "$new" "$D/bin/ddptop-agent" && [ "$new" != "$agent" ]; then
    tap_ok "a rebuilt agent: its own name ($(basename "$new")), its bytes"
else
    tap_fail "a rebuilt agent: its own name, its bytes" "$(ls -la "$D/private" 2>&1)"
fi
# a copy under our name with other bytes (ours, in our directory: a stale or damaged one) is
# checked with sha256sum on the node, not run, and replaced
printf '#!/bin/sh\ntouch %s/pwned-stale\necho {}\n' "$D/shared" >"$D/private/$NAME"
chmod 700 "$D/private/$NAME"
run_check "$D/c8.json" "$D/n1.txt" "${COMMON[@]}" --agent-dir "$D/private"
expect_rc "a copy whose SHA-256 is not ours: check succeeds" 0
jassert "a copy whose SHA-256 is not ours: uploaded again" "$D/c8.json" \
    "ssh_ok(0) and ck(0, 'ssh')['agent_uploaded'] is True"
if [ -z "$(pwned)" ] && cmp -s "$D/private/$NAME" "$AGENT_LOCAL"; then
    tap_ok "a copy whose SHA-256 is not ours: never run, our bytes back"
else
    tap_fail "a copy whose SHA-256 is not ours: never run, our bytes back" "$(pwned)"
fi

tap_done
