# Throwaway OpenSSH servers for the integration tests, the benchmark and the demo: a test
# directory with a client key and a host key, real sshd processes on loopback ports (or inside
# a network namespace, see tests/lib/netns.sh), writers for known_hosts, hostfiles and ssh
# configs, the "bad host" cases (a closed port, a listener that never speaks SSH) and one
# cleanup that stops everything started here and removes the directory.
#
# Use:   . tests/lib/sshd.sh; sshd_setup || exit 1; trap sshd_cleanup EXIT
#        sshd_start_loopback h1 || ...; echo "$SSHD_PORT"
# Every server runs as root with its own config in $SSHD_DIR, so nothing outside that
# directory is read or written (no ~/.ssh, no /etc/ssh keys), except the throwaway user's own
# ~/.ssh/authorized_keys once sshd_user_create made one (see there).

SSHD_BIN=${SSHD_BIN:-/usr/sbin/sshd}
SSHD_DIR=""        # the test directory (mktemp -d), removed by sshd_cleanup
SSHD_PIDS=()       # every server/listener started here, stopped by sshd_cleanup
SSHD_LAST_PID=""   # pid of the last server/listener started (for sshd_stop)
SSHD_PORT=""       # port of the last sshd_start_loopback / sshd_start_silent / sshd_closed_port
# Ports the tests pick stay below the kernel's ephemeral range, so a client socket of some
# other process never holds the port we are about to listen on.
SSHD_PORT_MIN=${SSHD_PORT_MIN:-20000}
SSHD_PORT_MAX=${SSHD_PORT_MAX:-32000}
SSHD_USER=""       # the throwaway login user (sshd_user_create), removed by sshd_cleanup
SSHD_USER_KEY=""   # its client key (private half in $SSHD_DIR, public half in its authorized_keys)

# Creates the directory, a client key ($SSHD_DIR/id_ed25519, authorized for root) and the
# default host key ($SSHD_DIR/host_ed25519).
sshd_setup() {
    SSHD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ddptop-it.XXXXXX") || return 1
    chmod 755 "$SSHD_DIR"
    ssh-keygen -q -t ed25519 -N '' -C ddptop-test-client -f "$SSHD_DIR/id_ed25519" || return 1
    ssh-keygen -q -t ed25519 -N '' -C ddptop-test-host -f "$SSHD_DIR/host_ed25519" || return 1
    cp "$SSHD_DIR/id_ed25519.pub" "$SSHD_DIR/authorized_keys"
    : >"$SSHD_DIR/ssh_config"   # an empty config, so the user's ~/.ssh/config never leaks in
    mkdir -p /run/sshd          # sshd's privilege separation directory
    # The tests authenticate with -i only: keys in a running ssh-agent must not change results.
    unset SSH_AUTH_SOCK
}

# sshd_new_hostkey NAME: a second host key ($SSHD_DIR/NAME), e.g. for the changed-key case.
sshd_new_hostkey() {
    ssh-keygen -q -t ed25519 -N '' -C "ddptop-test-$1" -f "$SSHD_DIR/$1"
}

# sshd_listening ADDR PORT [NS]: is anything listening on TCP PORT (on any address, so that a
# port we pick is free everywhere), in network namespace NS if given? ADDR is for the reader.
sshd_listening() {
    local addr=$1 port=$2 ns=${3:-}
    local -a pre=()
    [ -n "$ns" ] && pre=(ip netns exec "$ns")
    "${pre[@]}" ss -ltnH "sport = :$port" 2>/dev/null | grep -q .
}

# A random port in [SSHD_PORT_MIN, SSHD_PORT_MAX] that nothing listens on right now.
sshd_pick_port() {
    local p i
    for i in $(seq 1 200); do
        p=$((SSHD_PORT_MIN + RANDOM % (SSHD_PORT_MAX - SSHD_PORT_MIN)))
        sshd_listening 127.0.0.1 "$p" || { echo "$p"; return 0; }
    done
    return 1
}

# sshd_start NAME ADDR PORT [--netns NS] [--hostkey FILE] [--no-sftp] [CONFIG LINE...]
# Starts /usr/sbin/sshd -D -e with $SSHD_DIR/NAME.sshd_config listening on ADDR:PORT (IPv6 as
# ::1), optionally inside namespace NS; extra arguments are appended to the config as lines
# (e.g. "SetEnv FAKETIME=+3s"). --no-sftp leaves out the "Subsystem sftp" line, like many
# clusters' sshd: sftp is then refused. Waits until it listens. Returns 1 (with the log on
# stderr) when it exits or does not listen within 5 s, e.g. because the port was taken.
sshd_start() {
    local name=$1 addr=$2 port=$3; shift 3
    local ns="" hostkey="$SSHD_DIR/host_ed25519" sftp=1
    while [ $# -gt 0 ]; do
        case $1 in
        --netns) ns=$2; shift 2 ;;
        --hostkey) hostkey=$2; shift 2 ;;
        --no-sftp) sftp=""; shift ;;
        *) break ;;
        esac
    done
    local cfg="$SSHD_DIR/$name.sshd_config" log="$SSHD_DIR/$name.sshd.log" listen=$addr
    [[ $addr == *:* ]] && listen="[$addr]"
    {
        echo "ListenAddress $listen:$port"
        echo "HostKey $hostkey"
        echo "PidFile $SSHD_DIR/$name.sshd.pid"
        echo "AuthorizedKeysFile $SSHD_DIR/authorized_keys"
        echo "UsePAM no"
        echo "StrictModes no"
        echo "PermitRootLogin prohibit-password"
        echo "PasswordAuthentication no"
        echo "KbdInteractiveAuthentication no"
        echo "UseDNS no"
        echo "PrintMotd no"
        [ -n "$sftp" ] && echo "Subsystem sftp internal-sftp"
        local line
        for line in "$@"; do echo "$line"; done
        # Last: a Match block takes every line after it.
        if [ -n "$SSHD_USER" ]; then
            echo "Match User $SSHD_USER"
            echo "    AuthorizedKeysFile .ssh/authorized_keys"
        fi
    } >"$cfg"
    local -a pre=()
    [ -n "$ns" ] && pre=(ip netns exec "$ns")
    "${pre[@]}" "$SSHD_BIN" -D -e -f "$cfg" >"$log" 2>&1 </dev/null &
    local pid=$!
    SSHD_PIDS+=("$pid")
    SSHD_LAST_PID=$pid
    local i
    for i in $(seq 1 100); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "sshd $name ($addr:$port) exited:" >&2; cat "$log" >&2
            return 1
        fi
        # Listening, and the socket is sshd's own (not someone else's on the same port).
        if sshd_listening "$addr" "$port" "$ns" && grep -q "Server listening" "$log"; then
            return 0
        fi
        sleep 0.05
    done
    echo "sshd $name ($addr:$port) did not listen within 5 s:" >&2; cat "$log" >&2
    return 1
}

# sshd_start_loopback NAME [--addr 127.0.0.N] [--hostkey FILE] [--no-sftp] [CONFIG LINE...]: sshd on a
# loopback address (default 127.0.0.1) at a free port, retried on another port when the chosen
# one was taken meanwhile. Sets SSHD_PORT.
sshd_start_loopback() {
    local name=$1 addr=127.0.0.1; shift
    if [ "${1:-}" = --addr ]; then addr=$2; shift 2; fi
    local try port
    for try in 1 2 3 4 5 6 7 8; do
        port=$(sshd_pick_port) || return 1
        if sshd_start "$name" "$addr" "$port" "$@" 2>"$SSHD_DIR/$name.start.err"; then
            SSHD_PORT=$port
            return 0
        fi
    done
    cat "$SSHD_DIR/$name.start.err" >&2
    return 1
}

# sshd_closed_port: sets SSHD_PORT to a loopback port nothing listens on (connects get RST).
sshd_closed_port() {
    SSHD_PORT=$(sshd_pick_port)
}

# sshd_start_silent ADDR [NS [PORT]]: a TCP listener that accepts connections and never sends
# a byte, like a hung host or a firewall that completes the handshake; also what holds a port
# that should be free. PORT 0 or none: any free port. Sets SSHD_PORT.
sshd_start_silent() {
    local addr=$1 ns=${2:-} want=${3:-0} portfile
    portfile=$(mktemp "$SSHD_DIR/silent.XXXXXX")
    local -a pre=()
    [ -n "$ns" ] && pre=(ip netns exec "$ns")
    "${pre[@]}" /usr/bin/python3 -c '
import socket, sys, os
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT from a previous run
s.bind((sys.argv[1], int(sys.argv[3]))); s.listen(128)
with open(sys.argv[2] + ".tmp", "w") as f: f.write(str(s.getsockname()[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
held = []
while True:
    c, _ = s.accept(); held.append(c)
' "$addr" "$portfile.port" "$want" </dev/null >/dev/null 2>"$SSHD_DIR/silent.log" &
    local pid=$! i
    SSHD_PIDS+=("$pid")
    SSHD_LAST_PID=$pid
    for i in $(seq 1 100); do
        if [ -s "$portfile.port" ]; then SSHD_PORT=$(cat "$portfile.port"); return 0; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    cat "$SSHD_DIR/silent.log" >&2
    echo "silent listener on $addr did not start" >&2
    return 1
}

# sshd_known_hosts_line ADDR PORT [HOSTKEY]: the known_hosts line OpenSSH writes for the
# server, "[addr]:port ssh-ed25519 AAAA..." (bare addr for port 22).
sshd_known_hosts_line() {
    local addr=$1 port=$2 key=${3:-$SSHD_DIR/host_ed25519}
    local kt kb
    read -r kt kb _ <"$key.pub"
    if [ "$port" = 22 ]; then echo "$addr $kt $kb"; else echo "[$addr]:$port $kt $kb"; fi
}

# sshd_write_ssh_config FILE ALIAS ADDR PORT [USER [KEY]]: appends a Host block using the test
# key (or KEY).
sshd_write_ssh_config() {
    local file=$1 alias=$2 addr=$3 port=$4 user=${5:-root} key=${6:-$SSHD_DIR/id_ed25519}
    cat >>"$file" <<EOF
Host $alias
    HostName $addr
    Port $port
    User $user
    IdentityFile $key
    IdentitiesOnly yes
    UserKnownHostsFile $SSHD_DIR/known_hosts
    StrictHostKeyChecking yes
    BatchMode yes
EOF
}

# sshd_fleet_add NAME [CONFIG LINE...]: one sshd on 127.0.0.1 (sshd_start_loopback), put in
# $SSHD_DIR/known_hosts and as Host alias NAME in $SSHD_DIR/pdsh_config (for pdsh and plain
# ssh), logging in as the throwaway user with its key once sshd_user_create made one, else as
# root with the test key. Its log is $SSHD_DIR/NAME.sshd.log; sets SSHD_PORT.
sshd_fleet_add() {
    local name=$1; shift
    sshd_start_loopback "$name" "$@" || { echo "sshd $name did not start" >&2; return 1; }
    sshd_known_hosts_line 127.0.0.1 "$SSHD_PORT" >>"$SSHD_DIR/known_hosts"
    if [ -n "$SSHD_USER" ]; then
        sshd_write_ssh_config "$SSHD_DIR/pdsh_config" "$name" 127.0.0.1 "$SSHD_PORT" "$SSHD_USER" "$SSHD_USER_KEY"
    else
        sshd_write_ssh_config "$SSHD_DIR/pdsh_config" "$name" 127.0.0.1 "$SSHD_PORT"
    fi
}

# sshd_start_fleet PREFIX N [CONFIG LINE...]: N servers (sshd_fleet_add PREFIX01, PREFIX02, ...,
# each with the CONFIG LINEs, e.g. "LogLevel VERBOSE"); their ports in SSHD_FLEET_PORTS, in
# order. The benches compare ddptop with pdsh on these.
sshd_start_fleet() {
    local prefix=$1 n=$2 i; shift 2
    SSHD_FLEET_PORTS=()
    for ((i = 1; i <= n; i++)); do
        sshd_fleet_add "$(printf '%s%02d' "$prefix" "$i")" "$@" || return 1
        SSHD_FLEET_PORTS+=("$SSHD_PORT")
    done
}

# sshd_user_create NAME: a throwaway local user to log in as (needs root), for when root's own
# login is not what is measured (root's ~/.bashrc may be slow: bash sources it for every
# `ssh host CMD`). Login shell /bin/bash with an empty ~/.bashrc, so a login costs only
# bash's start; its own ed25519 key ($SSHD_DIR/NAME_ed25519, public half in its
# ~/.ssh/authorized_keys, which the servers started from now on read for it and only for it).
# Sets SSHD_USER and SSHD_USER_KEY; call before starting the servers. sshd_cleanup kills its
# processes and removes it with its home (userdel -r).
sshd_user_create() {
    local name=$1 home
    if getent passwd "$name" >/dev/null; then echo "user $name exists already" >&2; return 1; fi
    # -p '*': no password, yet not locked ("!"), which sshd (UsePAM no) would refuse outright.
    useradd -m -s /bin/bash -p '*' -c "ddptop throwaway bench user" "$name" || return 1
    SSHD_USER=$name
    home=$(getent passwd "$name" | cut -d: -f6)
    SSHD_USER_KEY=$SSHD_DIR/${name}_ed25519
    ssh-keygen -q -t ed25519 -N '' -C "ddptop-test-$name" -f "$SSHD_USER_KEY" || return 1
    : >"$home/.bashrc"
    mkdir -p "$home/.ssh"
    cp "$SSHD_USER_KEY.pub" "$home/.ssh/authorized_keys"
    chown -R "$name:" "$home"
    chmod 700 "$home/.ssh"
    chmod 600 "$home/.ssh/authorized_keys"
}

# sshd_user_remove: kills every process of the throwaway user (by pid) and removes the user
# and its home. Safe to call twice.
sshd_user_remove() {
    [ -n "$SSHD_USER" ] || return 0
    local uid i pids
    if uid=$(id -u "$SSHD_USER" 2>/dev/null); then
        for i in $(seq 1 20); do
            pids=$(pgrep -u "$uid")
            [ -n "$pids" ] || break
            kill -KILL $pids 2>/dev/null
            sleep 0.05
        done
        userdel -r "$SSHD_USER" 2>/dev/null || userdel -r -f "$SSHD_USER" 2>/dev/null ||
            echo "could not remove user $SSHD_USER (userdel -r)" >&2
        # what its agents kept in this machine's /tmp (their private directory, its cache
        # and sockets): the next user with its uid starts clean
        [ -d "/tmp/ddptop-$uid" ] && [ "$(stat -c %u "/tmp/ddptop-$uid")" = "$uid" ] && rm -rf "/tmp/ddptop-$uid"
    fi
    SSHD_USER=""
    SSHD_USER_KEY=""
}

# The pids of PID's descendants, deepest first (sshd's per-connection children and the
# agents they run).
sshd_descendants() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do
        sshd_descendants "$c"
        echo "$c"
    done
}

sshd_any_alive() {
    local p
    for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done
    return 1
}

# sshd_stop PID: stops one server/listener started here (and its session children) early.
sshd_stop() {
    local all
    all=($(sshd_descendants "$1") "$1")
    kill -TERM "${all[@]}" 2>/dev/null
    local i
    for i in $(seq 1 40); do
        sshd_any_alive "${all[@]}" || break
        sleep 0.05
    done
    kill -KILL "${all[@]}" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

# Stops every server and listener started here (and their session children), removes the
# throwaway user if there is one (sshd_user_remove), then the directory. Safe to call twice and from a trap.
sshd_cleanup() {
    local pid kids=() all=()
    for pid in "${SSHD_PIDS[@]}"; do
        kids=($(sshd_descendants "$pid"))
        all+=("$pid" "${kids[@]}")
    done
    if [ ${#all[@]} -gt 0 ]; then
        kill -TERM "${all[@]}" 2>/dev/null
        local i
        for i in $(seq 1 40); do
            sshd_any_alive "${all[@]}" || break
            sleep 0.05
        done
        kill -KILL "${all[@]}" 2>/dev/null
        wait "${SSHD_PIDS[@]}" 2>/dev/null
    fi
    SSHD_PIDS=()
    sshd_user_remove
    if [ -n "$SSHD_DIR" ] && [ -d "$SSHD_DIR" ]; then rm -rf "$SSHD_DIR"; fi
    SSHD_DIR=""
}
