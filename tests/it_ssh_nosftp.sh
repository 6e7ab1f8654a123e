#!/usr/bin/env bash
# Integration: deploying the agent to nodes whose sshd has no `Subsystem sftp` line (real
# OpenSSH servers on loopback, started with sshd_start --no-sftp; sftp is shown refused).
# `ddptop check` with an empty --agent-dir uploads the agent over an exec channel
# and says so (detail and agent_upload "exec"); the files have our bytes and modes and no
# temporary file is left; a second check reuses them; `ddptop run` (headless, its own connection
# uploading) runs a command there; a node whose sha256sum reports another hash (a fake first on
# the PATH that sshd sets) refuses the copy with a clear error and leaves nothing under the
# final names; a node without sha256sum says so. An sshd with sftp still gets the agent by SFTP.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/check_run.sh
. tests/lib/run_job.sh

D=""
cleanup() {
    check_run_cleanup
    rj_cleanup
    [ -n "$D" ] && kill_marker_pids "$D/agent"
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for b in "$DDPTOP" "$(dirname "$DDPTOP")/ddptop-agent"; do
    [ -x "$b" ] || { tap_fail "binary exists: $b (make all)"; tap_done; exit 1; }
done
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
AGENT_LOCAL=$(dirname "$DDPTOP")/ddptop-agent

# "odd": a node whose PATH (set by its sshd) holds only the tools the upload needs, in $D/odd;
# the test puts a fake sha256sum there, or none.
mkdir -p "$D/odd"
for t in sh uname id ls mkdir mktemp cat rm chmod mv; do ln -s "$(command -v "$t")" "$D/odd/$t"; done
if ! sshd_start_loopback nosftp --no-sftp; then tap_fail "sshd without sftp starts"; tap_done; exit; fi
P_NO=$SSHD_PORT
if ! sshd_start_loopback odd --addr 127.0.0.2 --no-sftp "SetEnv PATH=$D/odd"; then
    tap_fail "sshd without sftp (odd PATH) starts"; tap_done; exit
fi
P_ODD=$SSHD_PORT
if ! sshd_start_loopback withsftp --addr 127.0.0.3; then tap_fail "sshd with sftp starts"; tap_done; exit; fi
P_SFTP=$SSHD_PORT
sshd_known_hosts_line 127.0.0.1 "$P_NO" >>"$D/known_hosts"
sshd_known_hosts_line 127.0.0.2 "$P_ODD" >>"$D/known_hosts"
sshd_known_hosts_line 127.0.0.3 "$P_SFTP" >>"$D/known_hosts"
sshd_write_ssh_config "$D/client_config" nosftp 127.0.0.1 "$P_NO"
sshd_write_ssh_config "$D/client_config" withsftp 127.0.0.3 "$P_SFTP"
echo "127.0.0.1:$P_NO" >"$D/nosftp.txt"
echo "127.0.0.2:$P_ODD" >"$D/odd.txt"
echo "127.0.0.3:$P_SFTP" >"$D/sftp.txt"
SSH_OPTS=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config")
COMMON=("${SSH_OPTS[@]}" --timeout 10)

# --- the servers are what they claim ---
if ! timeout 20 sftp -b /dev/null -F "$D/client_config" nosftp >"$D/sftp_no.out" 2>&1; then
    tap_ok "sftp is refused by the sshd without a Subsystem sftp line"
else
    tap_fail "sftp is refused by the sshd without a Subsystem sftp line" "$(cat "$D/sftp_no.out")"
fi
tap_check "sftp works against the control sshd" \
    timeout 20 sftp -q -b /dev/null -F "$D/client_config" withsftp

# file_mode FILE: its permission bits in octal (e.g. 700).
file_mode() { stat -c '%a' "$1" 2>/dev/null; }
sha() { sha256sum <"$1" | cut -d' ' -f1; }

# --- 1. check with an empty --agent-dir: uploaded over exec ---
A=$D/agent-no
run_check "$D/c1.json" "$D/nosftp.txt" --json "${COMMON[@]}" --agent-dir "$A"
expect_rc "no sftp subsystem: check succeeds" 0
jassert "no sftp subsystem: ssh pass, uploaded over exec and says so" "$D/c1.json" \
    "ssh_ok(0)" \
    "ck(0, 'ssh')['agent_uploaded'] is True and ck(0, 'ssh')['agent_upload'] == 'exec'" \
    "'uploaded over exec' in ck(0, 'ssh')['detail'] and 'no sftp subsystem' in ck(0, 'ssh')['detail']"
agent=$(ls "$A"/ddptop-agent-* 2>/dev/null | head -1)
if [ -n "$agent" ] && [ "$(file_mode "$agent")" = 700 ] && cmp -s "$agent" "$AGENT_LOCAL"; then
    tap_ok "agent installed over exec: our bytes, mode 700 ($(basename "$agent"))"
else
    tap_fail "agent installed over exec: our bytes, mode 700" "$(ls -la "$A" 2>&1)"
fi
left=$(ls -A "$A" 2>/dev/null | grep -v -e '^ddptop-agent-')
if [ -z "$left" ]; then tap_ok "no temporary file left in --agent-dir"
else tap_fail "no temporary file left in --agent-dir" "$left"; fi
stamp=$(stat -c '%i %Y.%y' "$agent" 2>/dev/null)

# --- 2. a second check reuses it ---
run_check "$D/c2.json" "$D/nosftp.txt" --json "${COMMON[@]}" --agent-dir "$A"
expect_rc "second check succeeds" 0
jassert "second check: no upload" "$D/c2.json" \
    "ssh_ok(0)" \
    "ck(0, 'ssh')['agent_uploaded'] is False and ck(0, 'ssh')['agent_upload'] is None" \
    "'uploaded' not in ck(0, 'ssh')['detail']"
if [ -n "$agent" ] && [ "$(stat -c '%i %Y.%y' "$agent" 2>/dev/null)" = "$stamp" ]; then
    tap_ok "second check reuses the files (same inodes, mtimes unchanged)"
else
    tap_fail "second check reuses the files" "before: $stamp" "$(ls -la --time-style=full-iso "$A" 2>&1)"
fi

# --- 3. ddptop run, its own connection uploading into a fresh --agent-dir ---
MP=$(sshd_pick_port)
rj_run "$D/run.out" --limit 60 "$D/nosftp.txt" --headless --no-check "${COMMON[@]}" \
    --agent-dir "$D/agent-run" --log-dir "$D/logs" --master-port "$MP" -- echo hi-from-nosftp
rj_expect_rc "ddptop run on the node without sftp: echo succeeds" 0
if grep -q '^\[r0 [^]]*\] hi-from-nosftp$' "$RJ_OUT" && ls "$D"/agent-run/ddptop-agent-* >/dev/null 2>&1; then
    tap_ok "ddptop run: the agent was uploaded over exec and the rank's line came back"
else
    tap_fail "ddptop run: the agent was uploaded over exec and the rank's line came back" \
        "$(tail -20 "$RJ_OUT")" "$(ls -la "$D/agent-run" 2>&1)"
fi

# --- 4. a corrupted transfer: the node's sha256sum reports another hash ---
printf '#!/bin/sh\ncat >/dev/null\necho %s  -\n' \
    0000000000000000000000000000000000000000000000000000000000000bad >"$D/odd/sha256sum"
chmod 755 "$D/odd/sha256sum"
B=$D/agent-odd
run_check "$D/c4.json" "$D/odd.txt" --json "${COMMON[@]}" --agent-dir "$B"
expect_rc "corrupted upload: check fails" 1
jassert "corrupted upload: ssh fail naming host and file, SHA-256 mismatch, a hint" "$D/c4.json" \
    "st(0, 'ssh') == 'fail'" \
    "'corrupted' in ck(0, 'ssh')['detail'] and 'SHA-256' in ck(0, 'ssh')['detail']" \
    "'127.0.0.2' in ck(0, 'ssh')['detail'] and 'ddptop-agent-' in ck(0, 'ssh')['detail']" \
    "'0bad' in ck(0, 'ssh')['detail'] and ck(0, 'ssh').get('hint')"
if [ -d "$B" ] && [ -z "$(ls -A "$B")" ]; then
    tap_ok "corrupted upload: nothing under the final names, no temporary file left"
else
    tap_fail "corrupted upload: nothing under the final names, no temporary file left" "$(ls -la "$B" 2>&1)"
fi

# --- a node that hangs mid-upload: the upload stage's deadline (--timeout x 3) still holds ---
printf '#!/bin/sh\nexec /bin/sleep 9\n' >"$D/odd/sha256sum"
run_check "$D/c4t.json" "$D/odd.txt" --json "${SSH_OPTS[@]}" --timeout 2 --agent-dir "$B"
expect_rc "hung upload: check fails" 1
jassert "hung upload: ssh fail 'timed out' after about 3 x --timeout 2 ($ELAPSED_MS ms)" "$D/c4t.json" \
    "st(0, 'ssh') == 'fail' and 'timed out' in ck(0, 'ssh')['detail']" \
    "5500 <= $ELAPSED_MS < 20000"
if ! ls "$B"/ddptop-agent-* >/dev/null 2>&1; then
    tap_ok "hung upload: nothing under the final names"
else
    tap_fail "hung upload: nothing under the final names" "$(ls -la "$B" 2>&1)"
fi
# Cut off mid-way, the node's command goes on until its sha256sum returns, finds no match and
# removes its temporary file.
dir_empty() { [ -z "$(ls -A "$1" 2>/dev/null)" ]; }
if wait_until 20 dir_empty "$B"; then tap_ok "hung upload: the node removes its temporary file once its command ends"
else tap_fail "hung upload: the node removes its temporary file once its command ends" "$(ls -la "$B" 2>&1)"; fi

# --- 5. no sha256sum on the node ---
rm -f "$D/odd/sha256sum"
run_check "$D/c5.json" "$D/odd.txt" --json "${COMMON[@]}" --agent-dir "$B"
expect_rc "no sha256sum on the node: check fails" 1
jassert "no sha256sum: the error says so, and that there is no sftp subsystem" "$D/c5.json" \
    "st(0, 'ssh') == 'fail'" \
    "'sha256sum' in ck(0, 'ssh')['detail'] and 'no sftp subsystem' in ck(0, 'ssh')['detail']" \
    "'127.0.0.2' in ck(0, 'ssh')['detail']" \
    "'--agent-dir' not in ck(0, 'ssh')['detail']" \
    "'sha256sum' in ck(0, 'ssh').get('hint', '')"
if [ -z "$(ls -A "$B" 2>/dev/null)" ]; then tap_ok "no sha256sum: nothing written"
else tap_fail "no sha256sum: nothing written" "$(ls -la "$B" 2>&1)"; fi

# --- 6. with sftp: still by SFTP ---
run_check "$D/c6.json" "$D/sftp.txt" --json "${COMMON[@]}" --agent-dir "$D/agent-sftp"
expect_rc "sshd with sftp: check succeeds" 0
jassert "sshd with sftp: uploaded by SFTP" "$D/c6.json" \
    "ssh_ok(0)" \
    "ck(0, 'ssh')['agent_upload'] == 'sftp' and ck(0, 'ssh')['agent_uploaded'] is True" \
    "'(uploaded)' in ck(0, 'ssh')['detail'] and 'over exec' not in ck(0, 'ssh')['detail']"
tap_check "sshd with sftp: agent in place" cmp -s "$(ls "$D"/agent-sftp/ddptop-agent-* 2>/dev/null | head -1)" \
    "$AGENT_LOCAL"

tap_done
