#!/usr/bin/env bash
# `make demo-check`: two throwaway OpenSSH servers on loopback ports, a
# hostfile, known_hosts and ssh config for them in a temporary directory, then `ddptop check`
# against them in the foreground so a newcomer sees the table fill in. Everything started is
# stopped and the directory removed on the way out, also on Ctrl-C.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/sshd.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
trap sshd_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" != 0 ]; then
    echo "demo: starting sshd servers needs root (they run as root on loopback ports)" >&2
    exit 2
fi
[ -x "$DDPTOP" ] || { echo "demo: $DDPTOP not built; run make" >&2; exit 2; }
sshd_setup || exit 1
D=$SSHD_DIR
for name in node1 node2; do
    sshd_start_loopback "$name" || { echo "demo: sshd $name did not start" >&2; exit 1; }
    sshd_known_hosts_line 127.0.0.1 "$SSHD_PORT" >>"$D/known_hosts"
    sshd_write_ssh_config "$D/ssh_config" "$name" 127.0.0.1 "$SSHD_PORT"
    echo "$name slots=1" >>"$D/hosts.txt"
done
MP=$(sshd_pick_port)

echo "demo: two throwaway sshd servers on 127.0.0.1 (hosts node1 node2), files in $D"
echo "demo: \$ ddptop check hosts.txt -F ssh_config --known-hosts known_hosts --master-port $MP"
echo
"$DDPTOP" check "$D/hosts.txt" -F "$D/ssh_config" --known-hosts "$D/known_hosts" \
    --agent-dir "$D/agent" --master-port "$MP" --timeout 10
rc=$?
echo
echo "demo: ddptop check exited $rc (0: every check passed or warned); stopping the servers" \
     "and removing $D"
exit $rc
