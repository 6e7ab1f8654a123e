# Network namespaces for the integration tests: N "nodes", each its own namespace with lo and
# an eth0 holding a private address, all on one bridge that lives in a dedicated "switch"
# namespace; the root namespace (where the controller runs) joins the bridge through one veth
# with the .1 address. Nothing but that one veth is added to the root namespace, and the
# subnet 10.77.X.0/24 is one no other interface there uses, so parallel runs never clash.
#
# Use:   . tests/lib/sshd.sh; . tests/lib/netns.sh
#        trap 'sshd_cleanup; netns_cleanup' EXIT
#        netns_setup 3 || exit 1; sshd_start n0 "${NETNS_ADDR[0]}" 22 --netns "${NETNS_NODE[0]}"
# Needs root with CAP_NET_ADMIN (veth and bridge links, `ip netns`).

NETNS_PREFIX="ddpt-$$"
NETNS_ALL=()       # every namespace created (deleted by netns_cleanup)
NETNS_NODE=()      # node namespaces, index = node number
NETNS_ADDR=()      # each node's eth0 address
NETNS_SUBNET=""    # "10.77.X"
NETNS_HOST_ADDR="" # the root namespace's address on the bridge (10.77.X.1)
NETNS_ROOT_LINK="" # the root namespace's veth
NETNS_SWITCH=""

# Can this process make namespaces and veths? (root with CAP_NET_ADMIN)
netns_available() {
    local probe="$NETNS_PREFIX-probe"
    ip netns add "$probe" 2>/dev/null || return 1
    ip -n "$probe" link add probe0 type veth peer name probe1 2>/dev/null
    local rc=$?
    ip netns del "$probe" 2>/dev/null
    return $rc
}

netns_ns() { # netns_ns NAME: create a namespace with lo up and remember it
    ip netns add "$1" || return 1
    NETNS_ALL+=("$1")
    ip -n "$1" link set lo up
}

# Namespaces of an earlier run that was killed before its trap ran (SIGKILL, a lost machine
# session): ddpt-PID-* whose PID is gone. Removed, with their root veth (dptPIDr), so that a
# killed run leaves nothing for long.
netns_sweep_dead() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^ddpt-[0-9]+-'); do
        pid=${ns#ddpt-}
        pid=${pid%%-*}
        kill -0 "$pid" 2>/dev/null && continue
        local pids
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
        ip link del "dpt${pid}r" 2>/dev/null
    done
}

# netns_setup N: N node namespaces 10.77.X.2 .. 10.77.X.(N+1), plus switch and root veth.
netns_setup() {
    local n=$1 i x
    netns_sweep_dead
    NETNS_SWITCH="$NETNS_PREFIX-sw"
    netns_ns "$NETNS_SWITCH" || return 1
    ip -n "$NETNS_SWITCH" link add br0 type bridge || return 1
    ip -n "$NETNS_SWITCH" link set br0 up || return 1
    NETNS_ROOT_LINK="dpt$$r"
    # Choosing the subnet and taking it must not interleave with another run doing the same.
    exec {lockfd}>"/tmp/ddptop-netns.lock"
    flock "$lockfd"
    for x in $(shuf -i 1-254); do
        ip -4 -o addr show | grep -q " 10\.77\.$x\." && continue
        ip -4 route show | grep -q "^10\.77\.$x\." && continue
        NETNS_SUBNET="10.77.$x"
        break
    done
    if [ -z "$NETNS_SUBNET" ]; then
        flock -u "$lockfd"; exec {lockfd}>&-
        echo "netns: no free 10.77.X.0/24 subnet" >&2
        return 1
    fi
    NETNS_HOST_ADDR="$NETNS_SUBNET.1"
    ip link add "$NETNS_ROOT_LINK" type veth peer name uplink netns "$NETNS_SWITCH" &&
        ip addr add "$NETNS_HOST_ADDR/24" dev "$NETNS_ROOT_LINK" &&
        ip link set "$NETNS_ROOT_LINK" up
    local rc=$?
    flock -u "$lockfd"; exec {lockfd}>&-
    [ $rc -eq 0 ] || return 1
    ip -n "$NETNS_SWITCH" link set dev uplink master br0 up || return 1
    for ((i = 0; i < n; i++)); do
        local ns="$NETNS_PREFIX-n$i"
        netns_ns "$ns" || return 1
        NETNS_NODE[i]=$ns
        NETNS_ADDR[i]="$NETNS_SUBNET.$((i + 2))"
        ip -n "$NETNS_SWITCH" link add "p$i" type veth peer name eth0 netns "$ns" || return 1
        ip -n "$NETNS_SWITCH" link set "p$i" master br0 up || return 1
        ip -n "$ns" addr add "${NETNS_ADDR[i]}/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
    done
    # Wait until the bridge forwards (no STP delay on a new bridge, but links come up async).
    for ((i = 0; i < n; i++)); do
        netns_wait_ping "${NETNS_ADDR[i]}" || { echo "netns: ${NETNS_ADDR[i]} unreachable" >&2; return 1; }
    done
}

# netns_wait_ping ADDR [NS]: until ADDR answers a TCP-free reachability probe (ping if present,
# else an ARP entry via a connect attempt), at most 5 s.
netns_wait_ping() {
    local addr=$1 ns=${2:-} i
    local -a pre=()
    [ -n "$ns" ] && pre=(ip netns exec "$ns")
    for i in $(seq 1 50); do
        # A connect to port 9 of the address: refused (RST) proves two-way reachability.
        if "${pre[@]}" timeout 1 bash -c "exec 3<>/dev/tcp/$addr/9" 2>&1 | grep -q "refused"; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# netns_add_iface NODE NAME ADDR/PREFIX: one more UP interface with an address on node NODE
# (a veth whose peer stays in the same namespace; no "dummy" driver needed).
netns_add_iface() {
    local ns=${NETNS_NODE[$1]} name=$2 cidr=$3
    ip -n "$ns" link add "$name" type veth peer name "${name:0:12}-p" || return 1
    ip -n "$ns" addr add "$cidr" dev "$name" || return 1
    ip -n "$ns" link set "${name:0:12}-p" up && ip -n "$ns" link set "$name" up
}

# netns_drop_replies_to NODE ADDR: node NODE silently drops every packet it would send to ADDR
# (a blackhole route): seen from ADDR, the node swallows packets (SYNs get no answer).
netns_drop_replies_to() {
    ip -n "${NETNS_NODE[$1]}" route add blackhole "$2/32"
}

# netns_unreachable NODE ADDR: node NODE cannot reach ADDR (connects fail at once with
# "no route to host"); netns_reachable NODE ADDR undoes it.
netns_unreachable() {
    ip -n "${NETNS_NODE[$1]}" route add unreachable "$2/32"
}
netns_reachable() {
    ip -n "${NETNS_NODE[$1]}" route del unreachable "$2/32"
}

# Deletes every namespace and link created here. Safe to call twice and from a trap; run it
# after sshd_cleanup so no process still holds a namespace.
netns_cleanup() {
    local ns
    for ns in "${NETNS_ALL[@]}"; do
        # Any process left in the namespace (a listener started by hand) is ended first.
        local pids
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    NETNS_ALL=()
    if [ -n "$NETNS_ROOT_LINK" ] && ip link show "$NETNS_ROOT_LINK" >/dev/null 2>&1; then
        ip link del "$NETNS_ROOT_LINK" 2>/dev/null
    fi
    NETNS_ROOT_LINK=""
}
