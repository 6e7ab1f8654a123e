#!/usr/bin/env bash
# Integration: tcp failures grouped by cause and node sets (issue 19), through real interfaces.
# Four "nodes", each a network namespace with its own sshd on one bridge (tests/lib/netns.sh);
# the controller in the root namespace. Shown: node 2's address is also on the other nodes' lo,
# so their connects to it are refused there (nothing listens on that port): one finding
# "connection refused from <the three others> to node2:PORT", the same words on every node it
# concerns; then nodes {0,1} and {2,3} cannot route to each other (unreachable routes both
# ways): "no route to host between <0,1> and <2,3> (a partition...)", not pair by pair.
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
if ! netns_setup 4; then tap_fail "four namespaces on a bridge"; tap_done; exit; fi
A=("${NETNS_ADDR[@]}")
for i in 0 1 2 3; do
    if ! sshd_start "n$i" "${A[i]}" 22 --netns "${NETNS_NODE[i]}"; then
        tap_fail "sshd in namespace $i"; tap_done; exit
    fi
    sshd_known_hosts_line "${A[i]}" 22 >>"$D/known_hosts"
done
printf 'root@%s\n' "${A[@]}" >"$D/hosts.txt"
ARGS=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent"
      --timeout 30) # a loaded machine: login shells took 30 s at times
S=$NETNS_SUBNET # the nodes are $S.2 .. $S.5: as a hostlist, $S.[2-3,5]

# --- node 2 refused by everyone: its address is local (lo) on the other three ---
ok=1
for i in 0 1 3; do ip -n "${NETNS_NODE[i]}" addr add "${A[2]}/32" dev lo || ok=0; done
if [ $ok = 1 ]; then
    run_check "$D/refused.json" "$D/hosts.txt" --json "${ARGS[@]}"
    expect_rc "node 2 refused by its peers: check fails" 1
    jassert "one finding: 'connection refused from $S.[2-3,5] to ${A[2]}:PORT' on node 2 (fail)" "$D/refused.json" \
        "st(2, 'tcp') == 'fail'" \
        "'connection refused from $S.[2-3,5] to ${A[2]}:' in txt(2, 'tcp')" \
        "ssh_ok(0) and ssh_ok(1) and ssh_ok(2) and ssh_ok(3)"
    jassert "the peers that tried carry the same words (a folded report prints it once)" "$D/refused.json" \
        "all('connection refused from $S.[2-3,5] to ${A[2]}:' in txt(k, 'tcp') for k in (0, 1, 3))" \
        "all(ck(k, 'tcp')['detail'].count('connection refused') == 1 for k in range(4))"
    /usr/bin/python3 -c "import json,sys; [print('#   %s: %s' % (h['host'], h['checks']['tcp']['detail'])) for h in json.load(open(sys.argv[1]))['hosts']]" "$D/refused.json"
    for i in 0 1 3; do ip -n "${NETNS_NODE[i]}" addr del "${A[2]}/32" dev lo; done
else
    tap_fail "node 2's address on the other nodes' lo"
fi

# --- a partition: {0,1} and {2,3} have no route to each other ---
ok=1
for a in 0 1; do for b in 2 3; do
    netns_unreachable "$a" "${A[b]}" || ok=0
    netns_unreachable "$b" "${A[a]}" || ok=0
done; done
if [ $ok = 1 ]; then
    run_check "$D/part.json" "$D/hosts.txt" --json "${ARGS[@]}"
    expect_rc "two halves without a route between them: check fails" 1
    jassert "one finding: 'no route to host between $S.[2-3] and $S.[4-5] (a partition', on all four" "$D/part.json" \
        "all(st(k, 'tcp') == 'fail' for k in range(4))" \
        "all('no route to host between $S.[2-3] and $S.[4-5] (a partition' in txt(k, 'tcp') for k in range(4))" \
        "all(' -> ' not in txt(k, 'tcp') for k in range(4))"
    jassert "the far half cannot reach the rendezvous port either: one finding naming both" "$D/part.json" \
        "all('no route to host from $S.[4-5] to ${A[0]}:29500 (the rendezvous port)' in txt(k, 'tcp') for k in (2, 3))"
    /usr/bin/python3 -c "import json,sys; [print('#   %s: %s' % (h['host'], h['checks']['tcp']['detail'])) for h in json.load(open(sys.argv[1]))['hosts']]" "$D/part.json"
else
    tap_fail "unreachable routes between the halves"
fi

tap_done
