#!/usr/bin/env bash
# Integration: `ddptop check` on three "nodes", each a network namespace with its own sshd on
# port 22 at a private address, all on one bridge; the controller runs in the root namespace.
# Covers the node-to-node TCP mesh through real interfaces, a blocked rendezvous port, a node
# that cannot reach node 0, and NCCL_SOCKET_IFNAME naming an interface one node lacks.
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
if ! netns_setup 3; then tap_fail "three namespaces on a bridge"; tap_done; exit; fi
A=("${NETNS_ADDR[@]}")
for i in 0 1 2; do
    if ! sshd_start "n$i" "${A[i]}" 22 --netns "${NETNS_NODE[i]}"; then
        tap_fail "sshd in namespace $i"; tap_done; exit
    fi
    sshd_known_hosts_line "${A[i]}" 22 >>"$D/known_hosts"
done
printf 'root@%s\n' "${A[@]}" >"$D/hosts.txt"
MASTER=29500 # each node has its own network stack: the default port is ours to use
ARGS=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent"
      --timeout 10)

# --- all pass, the TCP mesh going node to node through the bridge ---
run_check "$D/all.json" "$D/hosts.txt" --json "${ARGS[@]}"
expect_rc "three namespaces: check succeeds" 0
jassert "three namespaces: ssh, clock, env, tcp pass on every node" "$D/all.json" \
    "[e['address'] for e in H] == ['${A[0]}', '${A[1]}', '${A[2]}']" \
    "all(e['port'] == 22 for e in H)" \
    "all(ssh_ok(k) and st(k, c) == 'pass' for k in range(3) for c in ('clock', 'env', 'tcp'))" \
    "all(st(k, 'nccl') in ('pass', 'warn') for k in range(3))"

# --- the rendezvous port is taken on node 0 ---
if sshd_start_silent 0.0.0.0 "${NETNS_NODE[0]}" "$MASTER"; then
    squatter=$SSHD_LAST_PID
    run_check "$D/port.json" "$D/hosts.txt" --json "${ARGS[@]}" --master-port "$MASTER"
    expect_rc "rendezvous port in use on node 0: check fails" 1
    jassert "rendezvous port in use: node 0 tcp fail naming the port" "$D/port.json" \
        "st(0, 'tcp') == 'fail'" "'$MASTER' in txt(0, 'tcp')" \
        "ssh_ok(0)"
    sshd_stop "$squatter"
else
    tap_fail "listener on node 0 port $MASTER"
fi

# --- node 2 cannot reach node 0 (and so node 0 cannot get answers from node 2) ---
if netns_unreachable 2 "${A[0]}"; then
    run_check "$D/route.json" "$D/hosts.txt" --json "${ARGS[@]}"
    expect_rc "node 2 cannot reach node 0: check fails" 1
    # The failing pair is named with its direction, "FROM -> TO[:PORT]".
    jassert "no route 2->0: node 2 tcp fail naming both ends; node 1 reaches both" \
        "$D/route.json" \
        "st(2, 'tcp') == 'fail'" \
        "'${A[2]} -> ${A[0]}' in txt(2, 'tcp')" \
        "ssh_ok(2) and ssh_ok(0)"
    netns_reachable 2 "${A[0]}"
else
    tap_fail "unreachable route in namespace 2"
fi

# --- NCCL_SOCKET_IFNAME=data0: nodes 0 and 1 have it, node 2 does not ---
ok=1
netns_add_iface 0 data0 10.78.0.1/24 || ok=0
netns_add_iface 1 data0 10.78.0.2/24 || ok=0
if [ $ok = 1 ]; then
    printf 'root@%s NCCL_SOCKET_IFNAME=data0\n' "${A[@]}" >"$D/ifname.txt"
    run_check "$D/ifname.json" "$D/ifname.txt" --json "${ARGS[@]}"
    expect_rc "NCCL_SOCKET_IFNAME missing on one node: check fails" 1
    jassert "NCCL_SOCKET_IFNAME=data0: node 2 nccl fail, nodes 0 and 1 not" "$D/ifname.json" \
        "st(2, 'nccl') == 'fail'" "'data0' in txt(2, 'nccl')" \
        "st(0, 'nccl') != 'fail' and st(1, 'nccl') != 'fail'"
    # eth0 is UP with an address on every node: the value that works everywhere.
    jassert "NCCL_SOCKET_IFNAME: the hint suggests a value that works (eth0 is on every node)" \
        "$D/ifname.json" "'NCCL_SOCKET_IFNAME=eth' in (ck(2, 'nccl').get('hint') or '')"
    # The same through --env instead of the hostfile.
    run_check "$D/ifname2.json" "$D/hosts.txt" --json "${ARGS[@]}" --env NCCL_SOCKET_IFNAME=data0
    jassert "--env NCCL_SOCKET_IFNAME=data0: node 2 nccl fail" "$D/ifname2.json" \
        "st(2, 'nccl') == 'fail'" "st(0, 'nccl') != 'fail' and st(1, 'nccl') != 'fail'"
else
    tap_fail "data0 interfaces on nodes 0 and 1"
fi

tap_done
