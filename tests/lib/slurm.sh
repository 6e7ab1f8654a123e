# A real Slurm cluster on this one machine for the integration tests (recipe A of the Slurm
# testbed notes; what srun does on it is in docs/slurm-facts.md): one munged, one slurmctld
# and N slurmd, each node in its own network + UTS namespace (hostname ctl, n1 .. nN) with a
# private address on a bridge that lives in its own namespace, names in a hosts file
# bind-mounted over /etc/hosts inside a private mount namespace. Nothing is added to the root network namespace, the
# machine's /etc/hosts and /etc/slurm are never written, and every process, namespace and
# file started or made here is removed by slurm_down.
#
# Use:   . tests/lib/slurm.sh
#        trap slurm_down EXIT
#        slurm_node_env n2 NCCL_SOCKET_IFNAME=eth9   # optional, before slurm_up
#        SLURM_EXTRA_CONF="SlurmdTimeout=30"           # optional, before slurm_up
#        SLURM_FAKE_GPUS=2                              # optional: gres/gpu:2 per node
#        slurm_up 2 || exit 1
#        slurm_login salloc -N2 --ntasks-per-node=2 srun hostname
#        slurm_login_bg ddptop run --slurm ... >out 2>&1; ...; kill "$SLURM_LOGIN_PID"
#        slurm_node n2 ps -o pid,args -p "$(ip netns pids "$(slurm_netns n2)")"
# Needs root (namespaces, veths, mounts) and slurm-wlm + munge (`make deps`).
#
# The cluster: nodes n1..nN at $SLURM_SUBNET.11 .., CPUs=4 each (more than the machine has:
# SlurmdParameters=config_overrides), partition "main" (Default=YES) over all of them,
# KillWait=5, no memory accounting, proctrack/linuxproc, task/none (so `--cpu-bind=...` makes
# srun print "cluster configuration lacks support for cpu binding"). The login node is the
# controller's namespace "ctl" ($SLURM_SUBNET.10): slurm_login runs commands there. Inside
# the cluster's mount namespace /etc/slurm is the cluster's own directory too, so Slurm
# commands work even with SLURM_CONF removed from the environment. Nodes share the machine's
# file system (sbcast to the same path on two nodes writes one file: use sbcast -f).
# With SLURM_FAKE_GPUS=N each node has N GPUs as gres/gpu over /dev/loop0.. (never opened):
# `--gpus-per-node=N` then gives tasks CUDA_VISIBLE_DEVICES=0,..., SLURM_GPUS_ON_NODE=N, and
# `scontrol show job` TresPerNode=gres:gpu:N.

SLURM_DIR=""          # the cluster's directory (mktemp -d): slurm.conf, logs, spool, state
SLURM_CONF_FILE=""    # $SLURM_DIR/etc/slurm.conf (exported as SLURM_CONF by slurm_login/node)
SLURM_SUBNET=""       # "10.77.X", X picked per slurm_up so parallel runs never share names
SLURM_NS_PREFIX=""    # "ddsl-X": namespaces are $SLURM_NS_PREFIX-br, -ctl, -n1, ...
SLURM_NODES=()        # node names n1 .. nN
SLURM_ADDRS=()        # their addresses, same order
SLURM_CTL_ADDR=""     # the controller's (and login node's) address
SLURM_LOGIN_PID=""    # pid of the command slurm_login_bg started last (the command itself)
SLURM_EXTRA_CONF=${SLURM_EXTRA_CONF:-}   # lines appended to slurm.conf by slurm_up
SLURM_TASK_PROLOG=${SLURM_TASK_PROLOG:-} # a TaskProlog script of the test's own (optional)
SLURM_UP_TIMEOUT=${SLURM_UP_TIMEOUT:-30} # seconds slurm_up waits for every node idle
SLURM_NODE_CONF=${SLURM_NODE_CONF:-}     # words appended to every NodeName line
SLURM_FAKE_GPUS=${SLURM_FAKE_GPUS:-0}    # N > 0: every node has N "GPUs" (gres/gpu, see slurm_up)
_SLURM_NODE_ENV=()    # "node VAR=VALUE" pairs from slurm_node_env
_SLURM_NS_MADE=()     # namespaces created (deleted by slurm_down)

# slurm_available: root, namespaces and the Slurm binaries present (for a clean SKIP).
slurm_available() {
    [ "$(id -u)" = 0 ] || return 1
    local b
    for b in slurmctld slurmd munged sinfo srun unshare nsenter ip; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || return 1
    done
}

# slurm_node_env NODE VAR=VALUE...: before slurm_up, makes every task started on NODE see
# VAR=VALUE (exported by the cluster's TaskProlog, which checks $SLURMD_NODENAME). E.g.
# slurm_node_env n2 NCCL_SOCKET_IFNAME=eth9. Values must not contain newlines.
slurm_node_env() {
    local node=$1 kv; shift
    for kv in "$@"; do _SLURM_NODE_ENV+=("$node $kv"); done
}

# slurm_netns NODE: the network namespace of NODE (ctl, n1, ...), e.g. for `ip netns pids`.
slurm_netns() { echo "$SLURM_NS_PREFIX-$1"; }

# slurm_addr NODE: NODE's address.
slurm_addr() {
    local i
    [ "$1" = ctl ] && { echo "$SLURM_CTL_ADDR"; return 0; }
    for i in "${!SLURM_NODES[@]}"; do
        [ "${SLURM_NODES[i]}" = "$1" ] && { echo "${SLURM_ADDRS[i]}"; return 0; }
    done
    return 1
}

_slurm_holder_pid() { cat "$SLURM_DIR/run/$1.holder.pid" 2>/dev/null; }

# _slurm_enter NODE: the command prefix that runs in NODE's mount, network and UTS
# namespaces (those of its holder process) with SLURM_CONF set and the current directory kept.
_slurm_enter() {
    local h
    h=$(_slurm_holder_pid "$1") || return 1
    [ -n "$h" ] && kill -0 "$h" 2>/dev/null || { echo "slurm: node $1 is not up" >&2; return 1; }
    _SLURM_PRE=(nsenter -t "$h" -m -n -u --wd="$PWD" env SLURM_CONF="$SLURM_CONF_FILE")
}

# _slurm_run PREFIX... -- CMD...: runs it; in a subshell (e.g. `slurm_login CMD &` or a
# pipeline) the command runs as a child whose TERM/INT/HUP/USR1/USR2 are forwarded, so
# `kill $!` of a backgrounded slurm_login reaches the command. (`kill -9 $!` does not: use
# slurm_login_bg for the command's own pid.)
_slurm_run() {
    if [ "$BASHPID" = "$$" ]; then
        "$@"
        return
    fi
    local child rc sig
    "$@" <&0 &
    child=$!
    for sig in TERM INT HUP USR1 USR2; do
        trap "kill -$sig $child 2>/dev/null" "$sig"
    done
    while :; do
        wait "$child"
        rc=$?
        kill -0 "$child" 2>/dev/null || break
    done
    return $rc
}

# slurm_login CMD...: runs CMD on the login node (the controller's namespace, hostname ctl)
# with the environment and the current directory passed through and SLURM_CONF set, e.g.
# slurm_login salloc -N2 --ntasks-per-node=2 srun hostname.
slurm_login() {
    _slurm_enter ctl || return 1
    _slurm_run "${_SLURM_PRE[@]}" "$@"
}

# slurm_login_bg CMD...: starts CMD on the login node in the background (redirections on the
# call apply); SLURM_LOGIN_PID is CMD's own pid (nsenter execs it), a child of this shell, so
# `kill -KILL "$SLURM_LOGIN_PID"` and `wait "$SLURM_LOGIN_PID"` reach the command itself.
slurm_login_bg() {
    _slurm_enter ctl || return 1
    "${_SLURM_PRE[@]}" "$@" <&0 &
    SLURM_LOGIN_PID=$!
}

# slurm_node NODE CMD...: runs CMD inside NODE's namespaces (hostname NODE, its address),
# environment and current directory passed through. Processes of the node: `ip netns pids
# "$(slurm_netns NODE)"` (there is no pid namespace: `ps` shows every process of the machine).
slurm_node() {
    local node=$1; shift
    _slurm_enter "$node" || return 1
    _slurm_run "${_SLURM_PRE[@]}" "$@"
}

# slurm_node_bg NODE CMD...: like slurm_login_bg on NODE (pid in SLURM_LOGIN_PID).
slurm_node_bg() {
    local node=$1; shift
    _slurm_enter "$node" || return 1
    "${_SLURM_PRE[@]}" "$@" <&0 &
    SLURM_LOGIN_PID=$!
}

# _slurm_tail: the end of every daemon log, for a failure message.
_slurm_tail() {
    local f
    for f in "$SLURM_DIR"/log/*.log "$SLURM_DIR"/log/*.out; do
        [ -s "$f" ] || continue
        echo "--- $(basename "$f") (last 15 lines)"
        tail -n 15 "$f"
    done
}

# _slurm_pick_subnet: claims a prefix ddsl-X by creating its bridge namespace (`ip netns add`
# fails when another run holds it, so two runs never share one) for an X no interface of the
# root namespace uses either (tests/lib/netns.sh puts 10.77.X.1 there).
_slurm_pick_subnet() {
    local x
    for x in $(shuf -i 1-254); do
        ip netns list 2>/dev/null | grep -q "^ddsl-$x-" && continue
        ip -4 -o addr show 2>/dev/null | grep -q " 10\.77\.$x\." && continue
        ip netns add "ddsl-$x-br" 2>/dev/null || continue
        _SLURM_NS_MADE+=("ddsl-$x-br")
        SLURM_NS_PREFIX="ddsl-$x"
        SLURM_SUBNET="10.77.$x"
        return 0
    done
    echo "slurm: no free 10.77.X subnet / ddsl-X namespace prefix" >&2
    return 1
}

# _slurm_holder NAME HOSTNAME [NETNS]: a `sleep infinity` that holds a mount namespace
# (inside the cluster's private one), a UTS namespace named HOSTNAME and, with NETNS, that
# network namespace; its pid in $SLURM_DIR/run/NAME.holder.pid. Without NETNS it is the
# cluster's private mount namespace itself, with the hosts file over /etc/hosts.
_slurm_holder() {
    local name=$1 host=$2 ns=${3:-} pidf="$SLURM_DIR/run/$1.holder.pid" i
    if [ -z "$ns" ]; then
        # setsid -f: not a job of the test's shell (a bare `wait` in a test must not hang).
        setsid -f sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"
            exec unshare --mount --propagation private sh -c "
                mount --bind \"\$0\" /etc/hosts || exit 1
                [ ! -d /etc/slurm ] || mount --bind \"\$1\" /etc/slurm || exit 1
                exec sleep infinity" "$2" "$3"' sh "$pidf" \
            "$SLURM_DIR/etc/hosts" "$SLURM_DIR/etc" </dev/null >/dev/null 2>>"$SLURM_DIR/log/holder.log"
    else
        local mnt
        mnt=$(_slurm_holder_pid mnt)
        # ip netns exec: the node's network namespace and /sys; unshare --uts: its hostname.
        setsid -f nsenter -t "$mnt" -m ip netns exec "$ns" unshare --uts sh -c \
            'hostname "$1" || exit 1; echo $$ >"$2.tmp"; mv "$2.tmp" "$2"; exec sleep infinity' \
            sh "$host" "$pidf" </dev/null >/dev/null 2>>"$SLURM_DIR/log/holder.log"
    fi
    for i in $(seq 1 100); do
        [ -s "$pidf" ] && break
        sleep 0.02
    done
    [ -s "$pidf" ] || { echo "slurm: namespace holder $name did not start" >&2; cat "$SLURM_DIR/log/holder.log" >&2; return 1; }
    # The mount holder writes its pid before unshare: wait until the bind mounts are in place.
    if [ -z "$ns" ]; then
        local h
        h=$(cat "$pidf")
        for i in $(seq 1 100); do
            [ "$(readlink "/proc/$h/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] &&
                [ "$(cat "/proc/$h/comm" 2>/dev/null)" = sleep ] && return 0
            kill -0 "$h" 2>/dev/null || break
            sleep 0.02
        done
        echo "slurm: private mount namespace not ready" >&2; cat "$SLURM_DIR/log/holder.log" >&2
        return 1
    fi
}

_slurm_write_conf() {
    local d=$SLURM_DIR i
    {
        echo "ClusterName=ddpt${SLURM_SUBNET##*.}"
        echo "SlurmctldHost=ctl($SLURM_CTL_ADDR)"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$d/run/munge.sock"
        echo "MpiDefault=none"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "SlurmdParameters=config_overrides"
        echo "SchedulerType=sched/backfill"
        echo "KillWait=5"
        echo "MessageTimeout=10"
        echo "InactiveLimit=0"
        echo "ReturnToService=2"
        echo "StateSaveLocation=$d/state"
        echo "SlurmdSpoolDir=$d/spool/%n"
        echo "SlurmctldPidFile=$d/run/slurmctld.pid"
        echo "SlurmdPidFile=$d/run/slurmd-%n.pid"
        echo "SlurmctldLogFile=$d/log/slurmctld.log"
        echo "SlurmdLogFile=$d/log/slurmd-%n.log"
        echo "SlurmctldDebug=info"
        echo "SlurmdDebug=info"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobCompType=jobcomp/none"
        echo "TaskProlog=$d/etc/task_prolog.sh"
        local gres=""
        if [ "$SLURM_FAKE_GPUS" -gt 0 ]; then
            echo "GresTypes=gpu"
            gres="Gres=gpu:$SLURM_FAKE_GPUS"
        fi
        for i in "${!SLURM_NODES[@]}"; do
            echo "NodeName=${SLURM_NODES[i]} NodeAddr=${SLURM_ADDRS[i]} CPUs=4 $gres State=UNKNOWN $SLURM_NODE_CONF"
        done
        echo "PartitionName=main Nodes=$(IFS=,; echo "${SLURM_NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
        [ -n "$SLURM_EXTRA_CONF" ] && printf '%s\n' "$SLURM_EXTRA_CONF"
    } >"$d/etc/slurm.conf"
    # This machine mounts cgroup v1 under a tmpfs: autodetection fails without these.
    printf '%s\n' CgroupPlugin=cgroup/v1 CgroupMountpoint=/sys/fs/cgroup CgroupAutomount=no \
        >"$d/etc/cgroup.conf"
    # Fake GPUs: gres/gpu backed by /dev/loop0.. (device files that exist everywhere; nothing
    # opens them): Slurm then allocates them and sets CUDA_VISIBLE_DEVICES, SLURM_GPUS_ON_NODE.
    : >"$d/etc/gres.conf"
    if [ "$SLURM_FAKE_GPUS" -gt 0 ]; then
        echo "Name=gpu File=/dev/loop[0-$((SLURM_FAKE_GPUS - 1))]" >"$d/etc/gres.conf"
    fi
    # The private /etc/slurm also gets the machine's plugstack.conf (spank), if any.
    [ -f /etc/slurm/plugstack.conf ] && cp /etc/slurm/plugstack.conf "$d/etc/" 2>/dev/null
    [ -d /etc/slurm/plugstack.conf.d ] && cp -r /etc/slurm/plugstack.conf.d "$d/etc/" 2>/dev/null
    # The TaskProlog: per-node variables (slurm_node_env), then the test's own script. Lines
    # "export NAME=VALUE" on its stdout go into the task's environment.
    {
        echo '#!/bin/sh'
        local e node kv
        for e in "${_SLURM_NODE_ENV[@]}"; do
            node=${e%% *}; kv=${e#* }
            printf '[ "$SLURMD_NODENAME" = %q ] && echo %q\n' "$node" "export $kv"
        done
        [ -n "$SLURM_TASK_PROLOG" ] && printf 'exec %q\n' "$SLURM_TASK_PROLOG"
        echo 'exit 0'
    } >"$d/etc/task_prolog.sh"
    chmod 755 "$d/etc/task_prolog.sh"
    {
        echo "127.0.0.1 localhost"
        echo "$SLURM_CTL_ADDR ctl"
        for i in "${!SLURM_NODES[@]}"; do echo "${SLURM_ADDRS[i]} ${SLURM_NODES[i]}"; done
        grep -v '^[[:space:]]*127\.0\.0\.1[[:space:]]\+localhost[[:space:]]*$' /etc/hosts
    } >"$d/etc/hosts"
}

# _slurm_ns NAME ADDR: a node namespace with lo and eth0 (ADDR/24) on the bridge.
_slurm_ns() {
    local ns="$SLURM_NS_PREFIX-$1" br="$SLURM_NS_PREFIX-br"
    ip netns add "$ns" || return 1
    _SLURM_NS_MADE+=("$ns")
    ip -n "$ns" link set lo up &&
        ip -n "$br" link add "p-$1" type veth peer name eth0 netns "$ns" &&
        ip -n "$br" link set "p-$1" master br0 up &&
        ip -n "$ns" addr add "$2/24" dev eth0 &&
        ip -n "$ns" link set eth0 up
}

# slurm_up N: the cluster with nodes n1..nN; returns when sinfo shows every node idle, or 1
# with the daemons' log tails on stderr (what was started stays for slurm_down, the trap's).
# Call it in the test's own shell, not in $(...): the variables it sets are the cluster.
slurm_up() {
    local n=$1 i
    slurm_available || { echo "slurm: needs root, slurm-wlm and munge (make deps)" >&2; return 1; }
    SLURM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ddptop-slurm.XXXXXX") || return 1
    chmod 755 "$SLURM_DIR"
    mkdir -p "$SLURM_DIR"/{etc,log,run,state,spool}
    chmod 755 "$SLURM_DIR/run"   # munged: the socket's directory searchable, not writable, by all
    SLURM_CONF_FILE=$SLURM_DIR/etc/slurm.conf
    _slurm_pick_subnet || return 1
    SLURM_CTL_ADDR=$SLURM_SUBNET.10
    SLURM_NODES=() SLURM_ADDRS=()
    for ((i = 1; i <= n; i++)); do
        SLURM_NODES+=("n$i")
        SLURM_ADDRS+=("$SLURM_SUBNET.$((10 + i))")
    done
    _slurm_write_conf
    local br="$SLURM_NS_PREFIX-br"
    ip -n "$br" link set lo up && ip -n "$br" link add br0 type bridge && ip -n "$br" link set br0 up ||
        { echo "slurm: bridge" >&2; return 1; }
    _slurm_ns ctl "$SLURM_CTL_ADDR" || { echo "slurm: namespace ctl" >&2; return 1; }
    for i in "${!SLURM_NODES[@]}"; do
        _slurm_ns "${SLURM_NODES[i]}" "${SLURM_ADDRS[i]}" || { echo "slurm: namespace ${SLURM_NODES[i]}" >&2; return 1; }
    done

    # munge: one daemon for every node (one file system), its own key, socket and files.
    dd if=/dev/urandom bs=1 count=1024 of="$SLURM_DIR/run/munge.key" status=none
    chmod 400 "$SLURM_DIR/run/munge.key"
    munged --force --key-file="$SLURM_DIR/run/munge.key" --socket="$SLURM_DIR/run/munge.sock" \
        --pid-file="$SLURM_DIR/run/munged.pid" --log-file="$SLURM_DIR/log/munged.log" \
        --seed-file="$SLURM_DIR/run/munged.seed" </dev/null >/dev/null 2>>"$SLURM_DIR/log/munged.log" ||
        { echo "slurm: munged did not start" >&2; _slurm_tail >&2; return 1; }

    _slurm_holder mnt "" || return 1
    _slurm_holder ctl ctl "$SLURM_NS_PREFIX-ctl" || return 1
    for i in "${SLURM_NODES[@]}"; do
        _slurm_holder "$i" "$i" "$SLURM_NS_PREFIX-$i" || return 1
    done
    # The daemons fork into the background (their pid files), inside their node's namespaces.
    _slurm_enter ctl && "${_SLURM_PRE[@]}" slurmctld -c -i </dev/null >>"$SLURM_DIR/log/slurmctld.out" 2>&1 ||
        { echo "slurm: slurmctld did not start" >&2; _slurm_tail >&2; return 1; }
    for i in "${SLURM_NODES[@]}"; do
        _slurm_enter "$i" && "${_SLURM_PRE[@]}" slurmd </dev/null >>"$SLURM_DIR/log/slurmd-$i.out" 2>&1 ||
            { echo "slurm: slurmd $i did not start" >&2; _slurm_tail >&2; return 1; }
    done
    local end=$((SECONDS + SLURM_UP_TIMEOUT)) states
    while :; do
        states=$(slurm_login sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
        if [ "$(grep -c ' idle$' <<<"$states")" -eq "$n" ]; then
            return 0
        fi
        if [ $SECONDS -ge $end ]; then
            echo "slurm: nodes not idle within ${SLURM_UP_TIMEOUT}s; sinfo: ${states:-(no answer)}" >&2
            _slurm_tail >&2
            return 1
        fi
        sleep 0.2
    done
}

# _slurm_alive PID...: is any of them running (a zombie waiting for init to reap it is not)?
_slurm_alive() {
    local p st
    for p in "$@"; do
        st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || continue
        [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] && return 0
    done
    return 1
}

# _slurm_kill_pidfiles FILE...: SIGTERM to the pids in the FILEs at once, SIGKILL to those
# still running 3 s later.
_slurm_kill_pidfiles() {
    local f p i pids=()
    for f in "$@"; do
        p=$(cat "$f" 2>/dev/null) || continue
        [ -n "$p" ] && _slurm_alive "$p" && pids+=("$p")
    done
    [ ${#pids[@]} -gt 0 ] || return 0
    kill -TERM "${pids[@]}" 2>/dev/null
    for i in $(seq 1 60); do _slurm_alive "${pids[@]}" || return 0; sleep 0.05; done
    kill -KILL "${pids[@]}" 2>/dev/null
    return 0
}

# slurm_down: stops every daemon (pid files), kills whatever is left in the cluster's
# namespaces (slurmstepd, tasks, commands of slurm_login/slurm_node), deletes the namespaces
# (bridge included) and the directory; the private mount namespace goes with its holder.
# Idempotent; safe from an EXIT trap.
# slurm_up_or_end N: for tests (tests/lib/tap.sh sourced): slurm_up N, or a failed TAP line
# with the reason (the testbed's needs, the daemons' logs) and the end of the test.
slurm_up_or_end() {
    local errf
    if ! slurm_available; then
        tap_fail "slurm testbed: needs root, slurm-wlm and munge (make deps)"
        tap_done; exit
    fi
    errf=$(mktemp)
    if ! slurm_up "$1" 2>"$errf"; then
        tap_fail "slurm_up $1" "$(cat "$errf")"; rm -f "$errf"; tap_done; exit
    fi
    rm -f "$errf"
}

slurm_down() {
    local f ns pids i
    if [ -n "$SLURM_DIR" ] && [ -d "$SLURM_DIR" ]; then
        _slurm_kill_pidfiles "$SLURM_DIR"/run/slurmd-*.pid "$SLURM_DIR/run/slurmctld.pid"
    fi
    for ns in "${_SLURM_NS_MADE[@]}"; do
        for i in 1 2 3 4 5; do
            pids=$(ip netns pids "$ns" 2>/dev/null)
            [ -n "$pids" ] || break
            kill -KILL $pids 2>/dev/null
            sleep 0.05
        done
    done
    if [ -n "$SLURM_DIR" ] && [ -d "$SLURM_DIR" ]; then
        for f in "$SLURM_DIR"/run/*.holder.pid; do
            [ -f "$f" ] || continue
            local h
            h=$(cat "$f" 2>/dev/null)
            [ -n "$h" ] && [ "$(cat "/proc/$h/comm" 2>/dev/null)" = sleep ] && kill -KILL "$h" 2>/dev/null
        done
        _slurm_kill_pidfiles "$SLURM_DIR/run/munged.pid"
    fi
    for ns in "${_SLURM_NS_MADE[@]}"; do
        ip netns del "$ns" 2>/dev/null
    done
    _SLURM_NS_MADE=()
    # notes of runs whose environment named no cluster (--jobid from the login node, whose
    # shell has no SLURM_CLUSTER_NAME: srun-JOBID-HASH16), written since this cluster started
    # (its directory's slurm.conf is older than them)
    if [ -n "$SLURM_DIR" ] && [ -f "$SLURM_DIR/etc/slurm.conf" ]; then
        find "/tmp/ddptop-$(id -u)" -maxdepth 1 -type f -regextype posix-extended \
            -regex '.*/srun-[0-9]+-[0-9a-f]{16}' -newer "$SLURM_DIR/etc/slurm.conf" -delete 2>/dev/null
    fi
    if [ -n "$SLURM_DIR" ] && [ -d "$SLURM_DIR" ]; then
        if [ -n "${SLURM_KEEP_DIR:-}" ]; then
            echo "slurm: kept $SLURM_DIR" >&2
        else
            rm -rf "$SLURM_DIR"
        fi
    fi
    SLURM_DIR=""
    # what ddptop's agents and controller kept in this machine's /tmp for the cluster's jobs
    # (docs/slurm.md, "The agent's copy by hash"): the notes of its jobs and this build's
    # copy of the agent (the simulated nodes share this machine's /tmp)
    if [ -n "$SLURM_SUBNET" ]; then
        rm -f "/tmp/ddptop-$(id -u)/srun-ddpt${SLURM_SUBNET##*.}-"* 2>/dev/null
        local agent=${DDPTOP_BUILD:-$PWD/build}/ddptop-agent sum
        sum=$(sha256sum "$agent" 2>/dev/null | cut -d' ' -f1)
        [ -n "$sum" ] && rm -f "/tmp/ddptop-$(id -u)/bin/ddptop-agent-$sum" 2>/dev/null
    fi
    return 0
}
