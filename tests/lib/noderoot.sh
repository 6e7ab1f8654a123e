# Other nodes for the integration tests: a Debian 11 root (glibc 2.31, older than this machine's)
# for amd64 and one for arm64 (run through qemu-user and binfmt_misc), each node an OpenSSH
# server on a loopback port, chrooted into such a root inside its own mount, PID and UTS
# namespaces. A test can then log in to a machine whose libc or architecture is not ours,
# which is what a real cluster looks like and what a loopback sshd on this machine never is.
#
# Use:   . tests/lib/sshd.sh; . tests/lib/noderoot.sh
#        sshd_setup || exit 1; trap 'noderoot_cleanup; sshd_cleanup' EXIT
#        noderoot_start old amd64 || exit 1; noderoot_start arm arm64 || exit 1
#        ssh -F "$SSHD_DIR/pdsh_config" arm uname -m     # aarch64
# Needs root, debootstrap, and for the other architecture qemu-user-static and binfmt-support.
#
# The roots are built once (debootstrap, about a minute for amd64 and a few for arm64 under
# emulation) and kept in $NODEROOT_CACHE. A node never writes to them: inside its namespace the
# root is bind-mounted read-only, and /root, /tmp, /var/tmp, /var/log, /run and /dev are
# tmpfs, so whatever a test leaves on a node is gone with the namespace. sshd is PID 1 of the
# node's PID namespace: killing it kills every process started on the node (agents, ranks,
# `sleep &` from an ssh command), as a machine going away would.

NODEROOT_CACHE=${NODEROOT_CACHE:-/var/tmp/ddptop-noderoot}
NODEROOT_MIRROR=${NODEROOT_MIRROR:-http://deb.debian.org/debian}
NODEROOT_SUITE=bullseye          # Debian 11, glibc 2.31 (Debian 10 is no longer served)
# The least a node needs: sshd (minbase has coreutils, getconf, bash). No -dev package and no
# libssh: tests rely on a node that has none.
NODEROOT_INCLUDE=openssh-server
# Bumped when the way a root is built changes, so that older cached roots are built again.
NODEROOT_FORMAT=1
NODEROOT_PORT=""                 # port of the last node started
declare -gA NODEROOT_PORTS=()    # NAME -> port
declare -gA NODEROOT_INIT=()     # NAME -> pid (in our namespace) of the node's PID 1, its sshd
declare -gA NODEROOT_RUNNER=()   # NAME -> pid of the unshare that waits for it (our child)
declare -gA NODEROOT_PIDNS=()    # NAME -> inode of the node's PID namespace
declare -gA NODEROOT_ROOTS=()    # NAME -> the cached root it runs on

# The cache directory, made 0700 if missing. Roots in it are run as root, so one that someone
# else could have put there or changed (a symlink, another owner's directory) is refused.
noderoot_cache_dir() {
    local d=$NODEROOT_CACHE
    [ -e "$d" ] || (umask 077 && mkdir "$d") 2>/dev/null
    if [ -L "$d" ] || [ ! -d "$d" ] || [ "$(stat -c %u "$d")" != "$(id -u)" ]; then
        echo "noderoot: $d is not a directory of ours (a symlink or another owner's); refusing it" >&2
        return 1
    fi
    chmod 700 "$d" && echo "$d"
}

# What a root was built with; a root whose stamp differs is built again.
noderoot_stamp() {
    echo "format=$NODEROOT_FORMAT suite=$NODEROOT_SUITE arch=$1 variant=minbase include=$NODEROOT_INCLUDE"
}

noderoot_complete() { # ROOT ARCH
    [ -x "$1/usr/sbin/sshd" ] && [ "$(cat "$1/etc/ddptop-noderoot.stamp" 2>/dev/null)" = "$(noderoot_stamp "$2")" ]
}

# rm -rf, but never across a mount point: a leftover bind mount of /dev under a root would
# otherwise take this machine's devices with it.
noderoot_rm_tree() {
    if awk -v d="$1" '$2 == d || index($2, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
        echo "noderoot: something is mounted under $1; not removing it" >&2
        return 1
    fi
    rm -rf "$1"
}

# noderoot_binfmt ARCH: lets this machine run ARCH's binaries when it is not its own. The F
# (fix binary) flag makes the kernel open qemu when registering, so it runs inside a chroot
# that has no qemu of its own.
noderoot_binfmt() {
    local qemu
    case $1 in amd64) qemu="qemu-x86_64" ;; arm64) qemu="qemu-aarch64" ;; esac
    [ "$1" = "$(dpkg --print-architecture)" ] && return 0
    local b=/proc/sys/fs/binfmt_misc
    if [ ! -e "$b/register" ]; then
        mount -t binfmt_misc binfmt_misc "$b" || { echo "noderoot: cannot mount $b" >&2; return 1; }
    fi
    if ! grep -qx enabled "$b/$qemu" 2>/dev/null; then
        update-binfmts --enable "$qemu" >&2 ||
            { echo "noderoot: update-binfmts --enable $qemu failed (qemu-user-static, binfmt-support installed?)" >&2; return 1; }
    fi
    if ! grep -qx enabled "$b/$qemu" || ! grep -q '^flags:.*F' "$b/$qemu"; then
        echo "noderoot: $b/$qemu is not enabled with the F flag:" >&2; cat "$b/$qemu" >&2
        return 1
    fi
}

# noderoot_build ARCH ROOT LOG: debootstrap into a temporary directory beside ROOT, checked and
# then renamed to ROOT, so that a root at ROOT is always complete. Called holding the lock.
noderoot_build() {
    local arch=$1 root=$2 log=$3 tmp f
    for f in "$root".build.*; do [ -d "$f" ] && { noderoot_rm_tree "$f" || return 1; }; done
    tmp=$(mktemp -d "$root.build.XXXXXX") || return 1
    chmod 755 "$tmp"
    echo "noderoot: building $root (debootstrap, log in $log)" >&2
    # In private mount and PID namespaces: whatever debootstrap mounts in the target, or starts
    # there, cannot outlive it.
    if ! unshare --mount --propagation private --pid --fork --mount-proc --kill-child \
        debootstrap --variant=minbase --include="$NODEROOT_INCLUDE" --arch="$arch" \
        "$NODEROOT_SUITE" "$tmp" "$NODEROOT_MIRROR" >"$log" 2>&1 </dev/null; then
        echo "noderoot: debootstrap $NODEROOT_SUITE $arch failed; the end of $log:" >&2
        tail -n 25 "$log" >&2
        noderoot_rm_tree "$tmp"
        return 1
    fi
    local missing=""
    for f in usr/sbin/sshd usr/bin/sha256sum usr/bin/getconf bin/ls usr/bin/id bin/uname bin/bash; do
        [ -x "$tmp/$f" ] || missing+=" /$f"
    done
    local extra
    extra=$(compgen -G "$tmp/usr/lib/*/libssh*"; dpkg-query --admindir="$tmp/var/lib/dpkg" -W -f '${Package}\n' | grep -- '-dev$')
    if [ -n "$missing" ] || [ -n "$extra" ]; then
        echo "noderoot: the new $arch root lacks$missing${extra:+, has $extra}" >&2
        noderoot_rm_tree "$tmp"
        return 1
    fi
    # Host keys made by openssh-server's postinst would be the same on every node of this
    # root; a node gets its own from the test (noderoot_start).
    rm -f "$tmp"/etc/ssh/ssh_host_* "$tmp"/var/cache/apt/archives/*.deb
    noderoot_stamp "$arch" >"$tmp/etc/ddptop-noderoot.stamp"
    if [ -e "$root" ]; then
        mv "$root" "$root.build.old" && noderoot_rm_tree "$root.build.old" || return 1
    fi
    mv "$tmp" "$root"
}

# noderoot_make ARCH (amd64|arm64): prints the path of the cached Debian 11 root for ARCH,
# building it first when it is missing or incomplete, and makes sure this machine can run it.
noderoot_make() {
    local arch=$1 cache
    case $arch in amd64 | arm64) ;; *) echo "noderoot_make: unknown arch '$arch'" >&2; return 1 ;; esac
    cache=$(noderoot_cache_dir) || return 1
    noderoot_binfmt "$arch" || return 1
    local root=$cache/$NODEROOT_SUITE-$arch
    if ! noderoot_complete "$root" "$arch"; then
        # Tests running at the same time build a root once, the later ones wait for it.
        (
            flock -w 1800 9 || { echo "noderoot: $cache/lock held for 30 min" >&2; exit 1; }
            noderoot_complete "$root" "$arch" || noderoot_build "$arch" "$root" "$root.log"
        ) 9>"$cache/lock" || return 1
    fi
    echo "$root"
}

# PID 1 of a node, run by unshare in the node's new namespaces with this machine's / still
# visible: sets the root up (read-only, with fresh tmpfs where anything is written, the files
# from DIR copied in) and becomes sshd inside it.
noderoot_init() {
    local root=$1 name=$2 dir=$3 d
    set -e
    mount --bind "$root" "$root"
    mount -o remount,bind,ro "$root"
    mount -t proc -o nosuid,nodev,noexec proc "$root/proc"    # this PID namespace's
    mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
    # A /dev of its own, not this machine's: no disks, a pty instance of its own.
    mount -t tmpfs -o mode=755,nosuid tmpfs "$root/dev"
    mknod -m 666 "$root/dev/null" c 1 3; mknod -m 666 "$root/dev/zero" c 1 5
    mknod -m 666 "$root/dev/full" c 1 7; mknod -m 666 "$root/dev/random" c 1 8
    mknod -m 666 "$root/dev/urandom" c 1 9; mknod -m 666 "$root/dev/tty" c 5 0
    mkdir "$root/dev/pts" "$root/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$root/dev/pts"
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
    ln -s pts/ptmx "$root/dev/ptmx"; ln -s /proc/self/fd "$root/dev/fd"
    ln -s /proc/self/fd/0 "$root/dev/stdin"; ln -s /proc/self/fd/1 "$root/dev/stdout"
    ln -s /proc/self/fd/2 "$root/dev/stderr"
    for d in tmp var/tmp; do mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/$d"; done
    mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"     # sshd's pid file, utmp
    mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/var/log" # sshd's wtmp, lastlog
    mount -t tmpfs -o mode=700,nosuid,nodev tmpfs "$root/root"
    mkdir -m 755 "$root/run/sshd"    # privilege separation directory, must exist and be root's
    # What a booted Debian has, else every pty login complains about lastlog.
    install -m 664 -g 43 /dev/null "$root/run/utmp"; install -m 664 -g 43 /dev/null "$root/var/log/wtmp"
    install -m 664 -g 43 /dev/null "$root/var/log/lastlog"; install -m 600 /dev/null "$root/var/log/btmp"
    mkdir -m 700 "$root/run/ddptop-node" "$root/root/.ssh"
    install -m 600 "$dir/$name.sshd_config" "$root/run/ddptop-node/sshd_config"
    install -m 600 "$dir/$name.host_ed25519" "$root/run/ddptop-node/host_ed25519"
    install -m 600 "$dir/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
    hostname "$name"
    exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        chroot "$root" /usr/sbin/sshd -D -e -f /run/ddptop-node/sshd_config
}

# Nodes of a test that was SIGKILLed before its trap ran: their unshare is still there, its
# owner (the test shell, named on its command line) is gone. Killing it kills the node.
noderoot_sweep_dead() {
    local pid owner init
    for pid in $(pgrep -x unshare); do
        owner=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -A1 -x ddptop-noderoot-init | sed -n 2p)
        [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null || continue
        # its PID 1 rather than itself: unshare then reaps it and exits, as in noderoot_stop
        init=$(pgrep -P "$pid")
        kill -KILL ${init:-$pid} 2>/dev/null
    done
    return 0
}

# noderoot_spawn NAME ROOT PORT: one try at starting the node; 0 once its sshd listens.
noderoot_spawn() {
    local name=$1 root=$2 port=$3 log=$SSHD_DIR/$1.sshd.log
    local init_sh
    init_sh="$(declare -f noderoot_init); noderoot_init \"\$2\" \"\$3\" \"\$4\""
    unshare --mount --propagation private --pid --fork --uts --kill-child -- \
        bash -c "$init_sh" ddptop-noderoot-init "$$" "$root" "$name" "$SSHD_DIR" \
        >"$log" 2>&1 </dev/null &
    local runner=$! init="" i
    NODEROOT_RUNNER[$name]=$runner
    # Under qemu sshd takes a while to start (about a second); 30 s is for a loaded machine.
    for i in $(seq 1 600); do
        [ -n "$init" ] || init=$(pgrep -P "$runner")
        if ! kill -0 "$runner" 2>/dev/null; then
            wait "$runner" 2>/dev/null
            echo "node $name (sshd on 127.0.0.1:$port) exited:" >&2
            return 1
        fi
        if [ -n "$init" ] && sshd_listening 127.0.0.1 "$port" && grep -q "Server listening" "$log"; then
            NODEROOT_INIT[$name]=$init
            NODEROOT_PIDNS[$name]=$(stat -L -c %i "/proc/$init/ns/pid")
            return 0
        fi
        sleep 0.05
    done
    echo "node $name (sshd on 127.0.0.1:$port) did not listen within 30 s:" >&2
    noderoot_stop "$name"
    return 1
}

# noderoot_start NAME ARCH [--no-sftp] [CONFIG LINE...]: a node named NAME (its hostname too)
# on the ARCH root: sshd on 127.0.0.1 at a free port (NODEROOT_PORT, NODEROOT_PORTS[NAME]),
# letting root in with the test key ($SSHD_DIR/id_ed25519) and showing its own host key
# ($SSHD_DIR/NAME.host_ed25519). Like sshd_fleet_add, it is put in $SSHD_DIR/known_hosts and
# as Host NAME in $SSHD_DIR/pdsh_config. CONFIG LINEs are added to its sshd_config;
# --no-sftp leaves sftp out. Needs sshd_setup first. Returns 1 with the log on stderr.
noderoot_start() {
    local name=$1 arch=$2 sftp=1 root; shift 2
    if [ "${1:-}" = --no-sftp ]; then sftp=""; shift; fi
    [ -n "$SSHD_DIR" ] || { echo "noderoot_start: call sshd_setup first" >&2; return 1; }
    [ -z "${NODEROOT_RUNNER[$name]:-}" ] || { echo "noderoot_start: node $name exists" >&2; return 1; }
    noderoot_sweep_dead
    root=$(noderoot_make "$arch") || return 1
    [ -e "$SSHD_DIR/$name.host_ed25519" ] || sshd_new_hostkey "$name.host_ed25519" || return 1
    local try port line log=$SSHD_DIR/$name.sshd.log
    for try in 1 2 3 4 5; do
        port=$(sshd_pick_port) || return 1
        {
            echo "ListenAddress 127.0.0.1:$port"
            echo "HostKey /run/ddptop-node/host_ed25519"
            echo "PidFile /run/sshd.pid"
            echo "AuthorizedKeysFile .ssh/authorized_keys"
            # PAM would want /etc/pam.d and a login session setup a chroot does not have.
            echo "UsePAM no"
            echo "PermitRootLogin prohibit-password"
            echo "PasswordAuthentication no"
            echo "KbdInteractiveAuthentication no"
            echo "UseDNS no"
            echo "PrintMotd no"
            echo "PrintLastLog no"
            [ -n "$sftp" ] && echo "Subsystem sftp internal-sftp"
            for line in "$@"; do echo "$line"; done
        } >"$SSHD_DIR/$name.sshd_config"
        if noderoot_spawn "$name" "$root" "$port" 2>"$SSHD_DIR/$name.start.err"; then
            NODEROOT_PORT=$port
            NODEROOT_PORTS[$name]=$port
            NODEROOT_ROOTS[$name]=$root
            sshd_known_hosts_line 127.0.0.1 "$port" "$SSHD_DIR/$name.host_ed25519" >>"$SSHD_DIR/known_hosts"
            sshd_write_ssh_config "$SSHD_DIR/pdsh_config" "$name" 127.0.0.1 "$port" root
            return 0
        fi
        unset "NODEROOT_RUNNER[$name]"
        # Only a port taken meanwhile is worth another try.
        grep -q "Address already in use" "$log" || break
    done
    cat "$SSHD_DIR/$name.start.err" "$log" >&2
    return 1
}

# noderoot_exec NAME CMD...: runs CMD as root on node NAME (its namespaces and root, a clean
# environment), e.g. to look at what a test left in its /tmp.
noderoot_exec() {
    local name=$1 init=${NODEROOT_INIT[$1]:-}; shift
    [ -n "$init" ] || { echo "noderoot_exec: no node $name" >&2; return 1; }
    nsenter -t "$init" -m -p -u -r -w -- \
        /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
}

# noderoot_stop NAME: stops one node. SIGKILL to a PID namespace's PID 1 makes the kernel kill
# every process in it, and the namespace's mounts go with the last of them.
noderoot_stop() {
    local name=$1 runner=${NODEROOT_RUNNER[$1]:-} init=${NODEROOT_INIT[$1]:-} ns=${NODEROOT_PIDNS[$1]:-}
    [ -n "$runner" ] || return 0
    [ -n "$init" ] || init=$(pgrep -P "$runner")
    # The unshare is left to reap its child: it exits only once the kernel has taken down
    # every process of the namespace (qemu's take a moment), so its exit is the end of the
    # node. Killed first, it would leave PID 1 dying unwaited-for.
    if [ -n "$init" ]; then kill -KILL "$init" 2>/dev/null; else kill -KILL "$runner" 2>/dev/null; fi
    wait "$runner" 2>/dev/null
    unset "NODEROOT_RUNNER[$name]" "NODEROOT_INIT[$name]" "NODEROOT_PIDNS[$name]" \
        "NODEROOT_PORTS[$name]" "NODEROOT_ROOTS[$name]"
    if [ -n "$ns" ] && stat -L -c %i /proc/[0-9]*/ns/pid 2>/dev/null | grep -qx "$ns"; then
        echo "noderoot: processes of node $name outlived it" >&2
        return 1
    fi
    return 0
}

# Stops every node started here. Safe to call twice and from a trap (before sshd_cleanup,
# which removes the directory the nodes' logs are in).
noderoot_cleanup() {
    local name rc=0
    for name in "${!NODEROOT_RUNNER[@]}"; do noderoot_stop "$name" || rc=1; done
    NODEROOT_PORT=""
    return $rc
}
