#!/usr/bin/env bash
# NCCL's debug lines (issue 20): ddptop sets NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,
# BOOTSTRAP,ENV when the user set neither, and leaves a user's own value alone; the dashboard's
# log pane folds NCCL's INFO lines away (its WARN lines stay), says how many it folded, shows
# them on I, and the rank's log file keeps every line.
# A local rank prints the two variables as it got them, then 30 INFO lines and one WARN line in
# NCCL's own format (src/debug.cc, ncclDebugLog: "HOST:PID:TID [DEV] NCCL INFO ..."; the
# messages from src/bootstrap.cc, src/transport/net_socket.cc, src/transport/p2p.cc and
# src/init.cc of NCCL 2.21-2.26) between lines of its own. Run under tmux (a private server),
# read back with capture-pane; headless runs check the environment with a user's value.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
SOCK=ddpt-nccl-$$
. tests/lib/tmux.sh
D=""
cleanup() {
    tmux_cleanup
    [ -n "$D" ] && rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in tmux "$DDPTOP"; do
    command -v "$tool" >/dev/null || { tap_fail "$tool is available"; tap_done; exit; }
done
D=$(mktemp -d /tmp/ddpt-nccl.XXXXXX) || { tap_fail "test directory"; tap_done; exit; }
mkdir -m 700 "$D/xdg" && export XDG_RUNTIME_DIR=$D/xdg
unset NCCL_DEBUG NCCL_DEBUG_SUBSYS

cat >"$D/rank.sh" <<'EOF'
#!/bin/sh
echo "env NCCL_DEBUG=${NCCL_DEBUG-unset} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS-unset}"
h=$(hostname); p=$$
n() { echo "$h:$p:$p [0] NCCL INFO $*"; }
echo "own line one: loading the data"
n "Bootstrap: Using eth0:10.0.0.1<0>"
n "cudaDriverVersion 12040"
echo "NCCL version 2.21.5+cuda12.4"
n "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."
n "NET/IB : No device found."
n "NET/Socket : Using [0]eth0:10.0.0.1<0>"
n "Using network Socket"
n "ncclCommInitRank comm 0x55d0c0a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1a2b3c4d5e6f - Init START"
i=0
while [ $i -lt 20 ]; do
    n "Channel $(printf %02d $i)/0 : 0[0] -> 1[1] via P2P/IPC/read"
    i=$((i + 1))
done
echo "own line two: model built"
n "Connected all rings"
n "Connected all trees"
n "ncclCommInitRank comm 0x55d0c0a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1a2b3c4d5e6f - Init COMPLETE"
echo "$h:$p:$p [0] NCCL WARN Call to ibv_open_device failed"
echo "own line three: training"
[ -n "$NCCL_RANK_EXIT" ] && exit 0
exec sleep 1000
EOF
chmod +x "$D/rank.sh"
NCCL_INFO=30   # the n lines above (20 channels and 10 others)

cmd="cd $D && LANG=C.UTF-8 TERM=screen-256color $DDPTOP --nproc-per-node 1 --log-dir $D/logs"
cmd+=" --run-id nccl --hang-timeout 0 -- $D/rank.sh; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s nccl -x 120 -y 40 "$cmd"
if ! wait_screen nccl 'own line three' 60; then
    tap_fail "the job runs and its rank's lines are on screen" "$SCREEN"
    tap_done
    exit
fi

if grep -q 'env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV' <<<"$SCREEN"; then
    tap_ok "unset by the user: the rank gets NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV"
else
    tap_fail "unset by the user: the rank gets NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV" "$SCREEN"
fi
if ! grep -q 'NCCL INFO' <<<"$SCREEN" && grep -q 'own line one' <<<"$SCREEN" &&
   grep -q 'own line two' <<<"$SCREEN" && grep -q 'NCCL version 2.21.5' <<<"$SCREEN"; then
    tap_ok "the log pane folds NCCL's INFO lines and shows the rank's own lines between them"
else
    tap_fail "the log pane folds NCCL's INFO lines and shows the rank's own lines between them" "$SCREEN"
fi
if grep -q 'NCCL WARN Call to ibv_open_device failed' <<<"$SCREEN"; then
    tap_ok "NCCL's WARN line stays in sight"
else
    tap_fail "NCCL's WARN line stays in sight" "$SCREEN"
fi
if grep -q "$NCCL_INFO NCCL lines folded (I shows)" <<<"$SCREEN"; then
    tap_ok "the pane's title says $NCCL_INFO NCCL lines are folded and that I shows them"
else
    tap_fail "the pane's title says $NCCL_INFO NCCL lines are folded and that I shows them" "$SCREEN"
fi

# a search finds what is shown (as less does): a folded line is not found until I shows it
T send-keys -t nccl / 'Init COMPLETE' Enter
if wait_screen nccl 'not found: Init COMPLETE' 10; then
    tap_ok "a search does not find a folded line"
else
    tap_fail "a search does not find a folded line" "$SCREEN"
fi
T send-keys -t nccl Escape
T send-keys -t nccl I
if wait_screen nccl 'NCCL INFO Connected all trees' 10 && grep -q 'NCCL lines shown (I folds)' <<<"$SCREEN" &&
   grep -q 'own line three' <<<"$SCREEN"; then
    tap_ok "I shows NCCL's lines in place, and the title says I folds them again"
else
    tap_fail "I shows NCCL's lines in place, and the title says I folds them again" "$SCREEN"
fi
T send-keys -t nccl I
if wait_screen nccl "$NCCL_INFO NCCL lines folded" 10 && ! grep -q 'NCCL INFO' <<<"$SCREEN"; then
    tap_ok "I again folds them"
else
    tap_fail "I again folds them" "$SCREEN"
fi

# the log file keeps every line, NCCL's too
LOG=$D/logs/nccl/attempt-0/rank-0.log
got=$(grep -c ' NCCL INFO ' "$LOG" 2>/dev/null)
if [ "$got" = "$NCCL_INFO" ] && grep -q 'NCCL WARN' "$LOG" && grep -q 'own line three' "$LOG"; then
    tap_ok "the rank's log file has all $NCCL_INFO INFO lines, the WARN line and the rank's own"
else
    tap_fail "the rank's log file has all $NCCL_INFO INFO lines, the WARN line and the rank's own" \
        "$got INFO lines in $LOG"
fi

T send-keys -t nccl q
wait_screen nccl 'y/n' 5 && T send-keys -t nccl y
wait_screen nccl 'DDPTOP-EXIT=' 30 || tap_fail "ddptop quits on q, y" "$SCREEN"

# A user's own value is never changed: from --env, and from ddptop's own environment; setting
# only the subsystems leaves NCCL_DEBUG unset.
cat >"$D/env.sh" <<'EOF'
#!/bin/sh
echo "env NCCL_DEBUG=${NCCL_DEBUG-unset} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS-unset}"
EOF
chmod +x "$D/env.sh"
check_env() {   # NAME EXPECTED ddptop-prefix...
    local name=$1 want=$2 k=$3
    shift 3
    "$@" --headless --nproc-per-node 1 --log-dir "$D/logs" --run-id "env$k" --hang-timeout 0 \
        -- "$D/env.sh" >"$D/env$k.out" 2>&1 </dev/null
    if grep -qx "$want" "$D/logs/env$k/attempt-0/rank-0.log" 2>/dev/null; then
        tap_ok "$name"
    else
        tap_fail "$name" "$(cat "$D/logs/env$k/attempt-0/rank-0.log" "$D/env$k.out" 2>&1 | tail -5)"
    fi
}
check_env "--env NCCL_DEBUG=WARN reaches the rank, NCCL_DEBUG_SUBSYS stays unset" \
    "env NCCL_DEBUG=WARN NCCL_DEBUG_SUBSYS=unset" 1 "$DDPTOP" --env NCCL_DEBUG=WARN
check_env "NCCL_DEBUG= (empty) in ddptop's environment reaches the rank empty" \
    "env NCCL_DEBUG= NCCL_DEBUG_SUBSYS=unset" 2 env NCCL_DEBUG= "$DDPTOP"
check_env "NCCL_DEBUG_SUBSYS=COLL alone leaves NCCL_DEBUG unset" \
    "env NCCL_DEBUG=unset NCCL_DEBUG_SUBSYS=COLL" 3 env NCCL_DEBUG_SUBSYS=COLL "$DDPTOP"
# The node's own NCCL configuration file (NCCL lets the environment win over it, so ddptop's
# INFO would): the agent leaves both variables unset there, and NCCL reads the file's WARN.
printf 'NCCL_SOCKET_IFNAME=lo\nNCCL_DEBUG=WARN\n' >"$D/nccl.conf"
check_env "NCCL_DEBUG in the node's NCCL_CONF_FILE: ddptop sets neither variable" \
    "env NCCL_DEBUG=unset NCCL_DEBUG_SUBSYS=unset" 4 env NCCL_CONF_FILE="$D/nccl.conf" "$DDPTOP"
printf 'NCCL_SOCKET_IFNAME=lo\n#NCCL_DEBUG=WARN\n' >"$D/nccl-other.conf"
check_env "a configuration file without NCCL_DEBUG: ddptop's defaults" \
    "env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV" 5 env NCCL_CONF_FILE="$D/nccl-other.conf" "$DDPTOP"
# Headless: NCCL's INFO lines that ddptop's default brought are left to the files (as the
# dashboard folds them) and counted in the last lines; the user's own NCCL_DEBUG prints them.
NCCL_RANK_EXIT=1 "$DDPTOP" --headless --nproc-per-node 1 --log-dir "$D/logs" --run-id hl1 \
    --hang-timeout 0 -- "$D/rank.sh" >"$D/hl1.out" 2>&1 </dev/null
if ! grep -q '^\[r0.*NCCL INFO' "$D/hl1.out" && grep -q 'own line three' "$D/hl1.out" &&
   grep -q 'NCCL WARN Call to ibv_open_device' "$D/hl1.out" &&
   grep -q "$NCCL_INFO NCCL INFO lines (ddptop's NCCL_DEBUG=INFO) not printed" "$D/hl1.out" &&
   [ "$(grep -c 'NCCL INFO' "$D/logs/hl1/attempt-0/rank-0.log")" = "$NCCL_INFO" ]; then
    tap_ok "headless, ddptop's default: NCCL INFO lines not printed ($NCCL_INFO counted), WARN printed, the log has them"
else
    tap_fail "headless, ddptop's default: NCCL INFO lines not printed, WARN printed, the log has them" \
        "$(grep -v '^\[r0' "$D/hl1.out" | tail -5)" "$(grep -c 'NCCL INFO' "$D/hl1.out") INFO lines printed"
fi
NCCL_RANK_EXIT=1 "$DDPTOP" --headless --nproc-per-node 1 --log-dir "$D/logs" --run-id hl2 \
    --env NCCL_DEBUG=INFO --hang-timeout 0 -- "$D/rank.sh" >"$D/hl2.out" 2>&1 </dev/null
if [ "$(grep -c '^\[r0.*NCCL INFO' "$D/hl2.out")" = "$NCCL_INFO" ] && ! grep -q 'not printed' "$D/hl2.out"; then
    tap_ok "headless, the user's NCCL_DEBUG=INFO: all $NCCL_INFO NCCL INFO lines printed"
else
    tap_fail "headless, the user's NCCL_DEBUG=INFO: all NCCL INFO lines printed" \
        "$(grep -c 'NCCL INFO' "$D/hl2.out") printed" "$(tail -3 "$D/hl2.out")"
fi
tap_done
