#!/usr/bin/env bash
# Integration: `ddptop check` against three real OpenSSH servers on loopback addresses
# (127.0.0.1-3, each on its own port): all pass; the table; known_hosts handling (accept-new,
# unknown key, changed key refused whatever the ssh config says); authentication failure; a
# closed port; a hostfile error; an ssh config alias; the agent uploaded once and reused.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/check_run.sh

trap 'check_run_cleanup; sshd_cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
ADDR=(127.0.0.1 127.0.0.2 127.0.0.3)
PORT=()
for i in 0 1 2; do
    if ! sshd_start_loopback "a$i" --addr "${ADDR[i]}"; then
        tap_fail "sshd $i on ${ADDR[i]} starts"; tap_done; exit
    fi
    PORT[i]=$SSHD_PORT
    sshd_known_hosts_line "${ADDR[i]}" "${PORT[i]}" >>"$D/known_hosts"
done
# Both spellings a user writes: with and without user@.
printf '%s\n' "# three loopback nodes" "${ADDR[0]}:${PORT[0]}" \
    "root@${ADDR[1]}:${PORT[1]} slots=1" "root@${ADDR[2]}:${PORT[2]}" >"$D/hosts.txt"
MP=$(sshd_pick_port)
# BASE: what every run passes; COMMON adds the test key and an empty ssh config.
BASE=(--agent-dir "$D/agent" --master-port "$MP" --timeout 10)
COMMON=(-i "$D/id_ed25519" -F "$D/ssh_config" "${BASE[@]}")
CHECKS="('clock','gpu','env','tcp','nccl')"

# --- all pass (JSON) ---
run_check "$D/all.json" "$D/hosts.txt" --json --known-hosts "$D/known_hosts" "${COMMON[@]}"
T_ALL=$ELAPSED_MS
expect_rc "all hosts up: check succeeds" 0
jassert "all pass: document shape, one entry per host in hostfile order" "$D/all.json" \
    "d['ddptop_check'] == 1" "len(H) == 3" \
    "[e['address'] for e in H] == ['127.0.0.1', '127.0.0.2', '127.0.0.3']" \
    "[e['port'] for e in H] == [${PORT[0]}, ${PORT[1]}, ${PORT[2]}]" \
    "d['summary']['fail'] == 0 and d['summary']['pass'] + d['summary']['warn'] == 3"
jassert "all pass: ssh, clock, env, tcp pass on every host" "$D/all.json" \
    "all(ssh_ok(k) and st(k, c) == 'pass' for k in range(3) for c in ('clock', 'env', 'tcp'))" \
    "all(e['status'] in ('pass', 'warn') for e in H)" \
    "all(st(k, c) not in ('fail', 'skip') for k in range(3) for c in ('gpu', 'nccl'))"
# Same clock on both ends: the agent read its clock inside the round trip, so the estimate is
# within half of it (error_ms) of zero whatever the load; 0.01 ms is for rounding.
jassert "clock: offset within the reported error of 0, error > 0" "$D/all.json" \
    "all(ck(k, 'clock')['error_ms'] > 0 for k in range(3))" \
    "all(abs(ck(k, 'clock')['offset_ms']) <= ck(k, 'clock')['error_ms'] + 0.01 for k in range(3))"

# The agent went into --agent-dir, as a copy of our own build.
agent=$(ls "$D"/agent/ddptop-agent-* 2>/dev/null | head -1)
if [ -n "$agent" ] && [ -x "$agent" ] && cmp -s "$agent" "$(dirname "$DDPTOP")/ddptop-agent"; then
    tap_ok "agent uploaded into --agent-dir ($(basename "$agent"))"
else
    tap_fail "agent uploaded into --agent-dir" "$(ls -la "$D/agent" 2>&1)"
fi
# It is one file: cJSON compiled in, nothing beside it; the node's basics and which agent it
# got, and why, are in --json.
left=$(ls -A "$D/agent" | grep -v '^ddptop-agent-')
if [ -z "$left" ] && ! readelf -d "$agent" 2>/dev/null | grep -q 'libcjson'; then
    tap_ok "the agent is one file: nothing uploaded beside it, no libcjson needed"
else
    tap_fail "the agent is one file" "$(ls -la "$D/agent" 2>&1; readelf -d "$agent" | grep NEEDED)"
fi
jassert "json: each host's node basics, and the agent chosen by its uname -m with its glibc need" "$D/all.json" \
    "all(e['node']['arch'] == os.uname().machine for e in H)" \
    "all(e['node']['glibc'] == os.confstr('CS_GNU_LIBC_VERSION').split()[1] for e in H)" \
    "all(e['node']['kernel'] == os.uname().release and e['node']['os'] for e in H)" \
    "all(ck(k, 'ssh')['agent']['arch'] == os.uname().machine and ck(k, 'ssh')['agent']['chosen_by'] == 'uname -m' for k in range(3))" \
    "all(ck(k, 'ssh')['agent']['file'] == 'ddptop-agent-' + os.uname().machine for k in range(3))" \
    "all((2, 0) < ver(ck(k, 'ssh')['agent']['glibc_needed']) <= (2, 28) for k in range(3))" \
    "all(ck(k, 'ssh')['agent']['glibc'] == h(k)['node']['glibc'] for k in range(3))" \
    "all('for its uname -m; needs glibc ' in ck(k, 'ssh')['detail'] for k in range(3) if st(k, 'ssh') == 'pass')"
agent_stamp=$(stat -c '%i %Y.%y' "$agent" 2>/dev/null)

# --- the table ---
run_check "$D/table.txt" "$D/hosts.txt" --known-hosts "$D/known_hosts" "${COMMON[@]}"
expect_rc "table run succeeds" 0
missing=""
for i in 0 1 2; do grep -q "${ADDR[i]}" "$D/table.txt" || missing="$missing ${ADDR[i]}"; done
if [ -z "$missing" ] && grep -qi 'ssh' "$D/table.txt" && grep -qi 'tcp' "$D/table.txt"; then
    tap_ok "table names every host and the checks"
else
    tap_fail "table names every host and the checks (missing:$missing)" "$(cat "$D/table.txt")"
fi
if [ -n "$agent" ] && [ "$(stat -c '%i %Y.%y' "$agent" 2>/dev/null)" = "$agent_stamp" ]; then
    tap_ok "second run reuses the uploaded agent (same file, mtime unchanged)"
else
    tap_fail "second run reuses the uploaded agent" "before: $agent_stamp" \
        "after: $(ls -la --time-style=full-iso "$D/agent" 2>&1)"
fi

# --- --accept-new-hosts on an empty known_hosts, then a run without it ---
: >"$D/kh_new"
run_check "$D/accept.json" "$D/hosts.txt" --json --known-hosts "$D/kh_new" --accept-new-hosts \
    "${COMMON[@]}"
expect_rc "--accept-new-hosts: unknown keys accepted" 0
jassert "--accept-new-hosts: ssh pass everywhere" "$D/accept.json" \
    "all(ssh_ok(k) for k in range(3))"
added=0
for i in 0 1 2; do
    want=$(sshd_known_hosts_line "${ADDR[i]}" "${PORT[i]}" | cut -d' ' -f2-)
    got=$(ssh-keygen -F "[${ADDR[i]}]:${PORT[i]}" -f "$D/kh_new" 2>/dev/null | grep -v '^#' |
          cut -d' ' -f2-)
    [ "$got" = "$want" ] && added=$((added + 1))
done
if [ $added = 3 ]; then tap_ok "--accept-new-hosts wrote [addr]:port entries with the right keys"
else tap_fail "--accept-new-hosts wrote [addr]:port entries ($added of 3)" "$(cat "$D/kh_new")"; fi
run_check "$D/accept2.json" "$D/hosts.txt" --json --known-hosts "$D/kh_new" "${COMMON[@]}"
expect_rc "keys written by --accept-new-hosts are trusted on the next run" 0

# --- unknown host key, no --accept-new-hosts ---
head -2 "$D/known_hosts" >"$D/kh_two"
cp "$D/kh_two" "$D/kh_two.orig"
run_check "$D/unknown.json" "$D/hosts.txt" --json --known-hosts "$D/kh_two" "${COMMON[@]}"
expect_rc "unknown host key: check fails" 1
jassert "unknown host key: ssh fail with how to trust it, other checks skip, others pass" \
    "$D/unknown.json" \
    "st(2, 'ssh') == 'fail' and h(2)['status'] == 'fail'" \
    "'ssh-keyscan' in txt(2, 'ssh') or '--accept-new-hosts' in txt(2, 'ssh')" \
    "all(st(2, c) == 'skip' for c in $CHECKS)" \
    "ssh_ok(0) and ssh_ok(1)" \
    "d['summary']['fail'] == 1"
tap_check "unknown host key: known_hosts left unchanged" cmp -s "$D/kh_two" "$D/kh_two.orig"

# --- changed host key: refused even when the ssh config says not to check ---
sshd_new_hostkey other_host
{ sshd_known_hosts_line "${ADDR[0]}" "${PORT[0]}" "$D/other_host"; tail -2 "$D/known_hosts"; } \
    >"$D/kh_changed"
cp "$D/kh_changed" "$D/kh_changed.orig"
printf '%s\n' "Host *" "    StrictHostKeyChecking no" "    UserKnownHostsFile $D/kh_changed" \
    "    GlobalKnownHostsFile /dev/null" >"$D/lax_config"
run_check "$D/changed.json" "$D/hosts.txt" --json --known-hosts "$D/kh_changed" \
    --accept-new-hosts -i "$D/id_ed25519" -F "$D/lax_config" "${BASE[@]}"
expect_rc "changed host key: check fails (StrictHostKeyChecking no, --accept-new-hosts)" 1
jassert "changed host key: ssh fail on that host only, other checks skip" "$D/changed.json" \
    "st(0, 'ssh') == 'fail'" "'changed' in low(txt(0, 'ssh'))" \
    "all(st(0, c) == 'skip' for c in $CHECKS)" \
    "ssh_ok(1) and ssh_ok(2)"
tap_check "changed host key: known_hosts not rewritten" cmp -s "$D/kh_changed" "$D/kh_changed.orig"

# --- authentication failure: a key the servers do not know ---
ssh-keygen -q -t ed25519 -N '' -f "$D/stranger"
printf '%s\n' "${ADDR[0]}:${PORT[0]}" >"$D/one.txt"
run_check "$D/auth.json" "$D/one.txt" --json --known-hosts "$D/known_hosts" -i "$D/stranger" \
    -F "$D/ssh_config" "${BASE[@]}"
expect_rc "authentication failure: check fails" 1
jassert "authentication failure: ssh fail mentioning authentication" "$D/auth.json" \
    "st(0, 'ssh') == 'fail'" "'authenticat' in low(txt(0, 'ssh'))" \
    "all(st(0, c) == 'skip' for c in $CHECKS)"

# --- a closed port among good hosts: fails at once, the others unaffected ---
sshd_closed_port
CLOSED=$SSHD_PORT
{ cat "$D/hosts.txt"; echo "127.0.0.1:$CLOSED"; } >"$D/closed.txt"
run_check "$D/closed.json" "$D/closed.txt" --json --known-hosts "$D/known_hosts" \
    -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent" --master-port "$MP" --timeout 30
expect_rc "closed port: check fails" 1
jassert "closed port: that host ssh fail, its checks skip; the others pass" "$D/closed.json" \
    "len(H) == 4 and h(3)['port'] == $CLOSED" \
    "st(3, 'ssh') == 'fail' and all(st(3, c) == 'skip' for c in $CHECKS)" \
    "'refused' in low(txt(3, 'ssh'))" \
    "all(ssh_ok(k) and st(k, c) == 'pass' for k in range(3) for c in ('clock', 'env', 'tcp'))" \
    "d['summary']['fail'] == 1"
if [ "$RC" = 1 ] && [ "$ELAPSED_MS" -lt 10000 ]; then
    tap_ok "closed port fails fast (${ELAPSED_MS} ms with --timeout 30; all-up run ${T_ALL} ms)"
else
    tap_fail "closed port fails fast: ${ELAPSED_MS} ms with --timeout 30"
fi

# --- a hostfile error: exit 2 naming FILE:LINE ---
printf '%s\n' "${ADDR[0]}:${PORT[0]}" "${ADDR[1]}:${PORT[1]} slots=0" >"$D/bad_hosts.txt"
run_check "$D/bad.out" "$D/bad_hosts.txt" --known-hosts "$D/known_hosts" "${COMMON[@]}"
expect_rc "hostfile error: usage exit status" 2
if grep -q "bad_hosts.txt:2:" "$D/bad.out.err"; then
    tap_ok "hostfile error names FILE:LINE"
else
    tap_fail "hostfile error names FILE:LINE" "stderr: $(cat "$D/bad.out.err")"
fi

# --- an ssh config alias (HostName, Port, User, IdentityFile), no -i ---
printf '%s\n' "Host nodealias" "    HostName ${ADDR[1]}" "    Port ${PORT[1]}" "    User root" \
    "    IdentityFile $D/id_ed25519" >"$D/alias_config"
echo "nodealias" >"$D/alias.txt"
run_check "$D/alias.json" "$D/alias.txt" --json --known-hosts "$D/known_hosts" \
    -F "$D/alias_config" "${BASE[@]}"
expect_rc "ssh config alias: check succeeds" 0
jassert "ssh config alias: resolved through HostName/Port, ssh pass" "$D/alias.json" \
    "h(0)['host'] == 'nodealias'" "h(0)['address'] == '${ADDR[1]}'" "h(0)['port'] == ${PORT[1]}" \
    "ssh_ok(0) and st(0, 'tcp') == 'pass'"

tap_done
