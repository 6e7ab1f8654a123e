# The scale test bed (issue 19): N simulated nodes on this one machine. Each node is a name,
# n0001 ... nNNNN, that resolves to 127.0.0.1 through an /etc/hosts bind-mounted in a private
# mount namespace (the real entries kept); PBS_NODEFILE lists them; the agents start through
# tests/pbs/pbs_tmrsh, a TEST DOUBLE of PBS's task manager (no SSH, so no login cost per node).
# Every process the bed starts runs in a cgroup of its own, so that the clean-up kills every
# agent, keeper and rank by id (they lead sessions of their own: a process group would miss
# them) and can prove that none is left.
#
# Use (as root: unshare --mount, the bind mount and the cgroup need it):
#   . "$(dirname "$0")/lib/scale.sh"
#   scale_bed_reexec "$@"          # first, before any cd: the script again, in a mount namespace
#   trap 'scale_bed_stop' EXIT      # or call it from the script's own EXIT trap
#   scale_bed_start 256 2           # 256 nodes, 2 slots (ranks) each
#   "$SCALE_DDPTOP" run --pbs ... -- "$SCALE_RANK" 5
# After scale_bed_start: SCALE_DIR (the bed's private directory), SCALE_NODES, SCALE_SLOTS,
# SCALE_DDPTOP (ddptop, started inside the bed's cgroup: use it for every ddptop command, also
# in tmux), SCALE_RANK (a rank program, see scale_rank_install), PBS_NODEFILE and PATH
# (pbs_tmrsh first) exported; the open-files limit raised.

SCALE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCALE_BUILD=${DDPTOP_BUILD:-$SCALE_ROOT/${BUILD:-build}}
SCALE_DIR=""
SCALE_CG=""
SCALE_NODES=0
SCALE_SLOTS=0
SCALE_DDPTOP=""
SCALE_RANK=""

# scale_bed_reexec ARGS...: unless already there, runs the calling script again (same
# arguments) in a private mount namespace, so that the bind-mounted /etc/hosts is seen by
# this script's processes only and goes with them. Call it before any cd ($0 is run again).
scale_bed_reexec() {
    [ -n "${DDPTOP_SCALE_NS:-}" ] && return 0
    exec unshare --mount --propagation private env DDPTOP_SCALE_NS=1 "$BASH" "$0" "$@"
}

# scale_node_name I: the name of node I (1-based), n0001 ...
scale_node_name() { printf 'n%04d' "$1"; }

# scale_bed_start NODES [SLOTS]: sets the bed up (see the header). Fails (1, saying why on
# stderr) outside the mount namespace or without a cgroup.
scale_bed_start() {
    SCALE_NODES=$1
    SCALE_SLOTS=${2:-1}
    if [ -z "${DDPTOP_SCALE_NS:-}" ]; then
        echo "scale bed: call scale_bed_reexec \"\$@\" first (a private mount namespace)" >&2
        return 1
    fi
    SCALE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ddptop-scale.XXXXXX") || return 1
    chmod 755 "$SCALE_DIR"
    # The cgroup: v1's pids hierarchy when mounted (it also counts the processes), else v2.
    local root
    if [ -d /sys/fs/cgroup/pids ]; then root=/sys/fs/cgroup/pids
    elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then root=/sys/fs/cgroup
    else echo "scale bed: no cgroup hierarchy to keep the bed's processes in" >&2; return 1
    fi
    SCALE_CG=$root/ddptop-scale-$$
    mkdir "$SCALE_CG" || { SCALE_CG=""; echo "scale bed: cannot make a cgroup under $root" >&2; return 1; }
    # ddptop, started inside the cgroup: everything it starts (agents through pbs_tmrsh,
    # keepers, ranks, a session server) is a descendant and stays in it.
    mkdir -m 700 "$SCALE_DIR/bin"
    SCALE_DDPTOP=$SCALE_DIR/bin/ddptop
    cat >"$SCALE_DDPTOP" <<EOF
#!/bin/sh
echo \$\$ >"$SCALE_CG/cgroup.procs" || exit 125
exec "$SCALE_BUILD/ddptop" "\$@"
EOF
    chmod 700 "$SCALE_DDPTOP"
    # /etc/hosts: the real entries, then one line per node.
    {
        cat /etc/hosts
        echo "# ddptop scale bed: $SCALE_NODES simulated nodes"
        local i
        for ((i = 1; i <= SCALE_NODES; i++)); do echo "127.0.0.1 $(scale_node_name "$i")"; done
    } >"$SCALE_DIR/hosts"
    mount --bind "$SCALE_DIR/hosts" /etc/hosts ||
        { echo "scale bed: cannot bind-mount $SCALE_DIR/hosts on /etc/hosts" >&2; return 1; }
    # PBS_NODEFILE: one line per slot, as PBS writes it.
    local i s
    for ((i = 1; i <= SCALE_NODES; i++)); do
        for ((s = 0; s < SCALE_SLOTS; s++)); do scale_node_name "$i"; echo; done
    done >"$SCALE_DIR/nodefile"
    export PBS_NODEFILE=$SCALE_DIR/nodefile
    export PATH=$SCALE_ROOT/tests/pbs:$PATH
    # Per node the controller holds a few pipes and the check a few sockets: 4 fds per node
    # and rank is ample.
    local want=$((SCALE_NODES * (SCALE_SLOTS + 4) + 1024))
    [ "$want" -lt 65536 ] && want=65536
    ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    scale_rank_install "$SCALE_DIR/rank"
    SCALE_RANK=$SCALE_DIR/rank
}

# scale_rank_install PATH: a rank program that prints the runtime's step line
# ({"event":"step","step":N,"loss":X,"step_ms":1000}, docs/metrics.md) at once and then once a
# second, COUNT lines in all (its one argument, default 3), and exits 0. A shell loop: fine
# for a few hundred ranks; the benchmark's thousands use build/bench/bench_ticker.
scale_rank_install() {
    cat >"$1" <<'SH'
#!/bin/sh
n=${1:-3}
i=1
while :; do
    echo "{\"event\":\"step\",\"v\":1,\"rank\":${RANK:-0},\"step\":$i,\"loss\":$((500 - i)).0,\"step_ms\":1000}"
    [ "$i" -ge "$n" ] && break
    i=$((i + 1))
    sleep 1
done
SH
    chmod 755 "$1"
}

# scale_bed_procs: the pids of every process the bed holds now, one a line.
scale_bed_procs() { [ -n "$SCALE_CG" ] && cat "$SCALE_CG/cgroup.procs" 2>/dev/null; }

# scale_bed_count: how many processes the bed holds now.
scale_bed_count() { scale_bed_procs | wc -l; }

# scale_bed_kill: SIGKILLs every process of the bed, by id, until none is left (at most 20 s);
# 0 when none is left.
scale_bed_kill() {
    [ -n "$SCALE_CG" ] && [ -d "$SCALE_CG" ] || return 0
    local end=$((SECONDS + 20)) p any
    while :; do
        any=""
        while read -r p; do any=1; kill -KILL "$p" 2>/dev/null; done <"$SCALE_CG/cgroup.procs"
        [ -z "$any" ] && return 0
        [ $SECONDS -ge $end ] && return 1
        sleep 0.2
    done
}

# scale_bed_agents_left: the ddptop-agent processes (pgrep -f) that belong to this bed, by
# their cgroup; other users of the machine may run agents of their own.
scale_bed_agents_left() {
    local p
    for p in $(pgrep -f ddptop-agent 2>/dev/null); do
        grep -qs "/${SCALE_CG##*/}\$" "/proc/$p/cgroup" && echo "$p"
    done
}

# scale_bed_stop: the clean-up (EXIT trap): kills what is left, removes the cgroup, the bind
# mount and the directory. Says on stderr when a process could not be ended.
scale_bed_stop() {
    if [ -n "$SCALE_CG" ] && [ -d "$SCALE_CG" ]; then
        scale_bed_kill || echo "scale bed: processes left in $SCALE_CG: $(scale_bed_procs | head -20 | tr '\n' ' ')" >&2
        rmdir "$SCALE_CG" 2>/dev/null
    fi
    if [ -n "$SCALE_DIR" ]; then
        mountpoint -q /etc/hosts && grep -qs '^# ddptop scale bed' /etc/hosts && umount /etc/hosts 2>/dev/null
        rm -rf "$SCALE_DIR"
        SCALE_DIR=""
    fi
}
