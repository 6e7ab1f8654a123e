#!/usr/bin/env bash
# GPUs on the dashboard, on a real terminal (ddptop under a private tmux server, read back with
# capture-pane), fed by tests/fakenvml, the TEST DOUBLE of libnvidia-ml.so.1 (docs/gpu.md,
# "Telemetry"). Two local ranks each put their pid on a GPU as a CUDA context would; then GPU 1
# starts throttling. At 120x40 the ranks table has the GPU columns with each rank's GPU's
# utilisation, memory, temperature and power; `G` opens the GPU view: the node, its GPUs with
# their ranks, a throttling GPU with its reason; Esc closes it; the same at 80x24 and 200x50.
# A job on a node without NVML has no GPU column. Every tmux server and process is ended by id.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
SOCK=ddpt-gpus-$$
. tests/lib/tmux.sh
D=""
cleanup() {
    tmux_cleanup
    [ -n "$D" ] && rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
[ -e "$BUILD_DIR/fakenvml/libnvidia-ml.so.1" ] || { tap_fail "the NVML test double is built (make tests)"; tap_done; exit; }
D=$(mktemp -d /tmp/ddpt.XXXXXX) || { tap_fail "test directory"; tap_done; exit; }
# the dashboard's session socket in this test's own directory (tests/it_attach.sh)
mkdir -m 700 "$D/xdg" && export XDG_RUNTIME_DIR=$D/xdg

check_screen() {   # check_screen NAME SESSION REGEX SECONDS
    if wait_screen "$2" "$3" "$4"; then tap_ok "$1"; else tap_fail "$1" "$SCREEN"; fi
}

cat >"$D/state" <<'S'
gpu 0 name=Fake_H100 util=98 mem_used=61440 mem_total=81920 power=612 limit=700 temp=71 sm=1980 throttle=0 ecc=0
gpu 1 name=Fake_H100 util=42 mem_used=20480 mem_total=81920 power=300 limit=700 temp=66 sm=1980 throttle=0 ecc=0
S
cat >"$D/rank.sh" <<'EOF2'
#!/bin/sh
echo "pid $LOCAL_RANK $$" >>"$STATE"
echo "rank $RANK is on its GPU"
sleep 3
[ "$LOCAL_RANK" = 1 ] && echo "gpu 1 name=Fake_H100 util=42 mem_used=20480 mem_total=81920 power=690 limit=700 temp=91 sm=1200 throttle=64 ecc=0" >>"$STATE"
exec sleep 1000
EOF2
chmod +x "$D/rank.sh"
cmd="cd $D && STATE=$D/state FAKE_NVML_STATE=$D/state LD_LIBRARY_PATH=$BUILD_DIR/fakenvml LANG=C.UTF-8"
cmd+=" TERM=screen-256color $DDPTOP --nproc-per-node 2 --gpu-interval 200 --log-dir $D/logs --run-id gpus"
cmd+=" --hang-timeout 0 -- $D/rank.sh; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s gpus -x 120 -y 40 "$cmd"
if ! wait_screen gpus 'rank 0 is on its GPU' 60; then
    tap_fail "the job runs and its ranks' lines are on screen" "$SCREEN"; tap_done; exit
fi
check_screen "120x40: the ranks table has a GPU% column, each rank its own GPU's: rank 0 98" gpus '^ *0 localhost .* 98 *$' 10
check_screen "120x40: rank 1's row 42" gpus '^ *1 localhost .* 42 *$' 10
T resize-window -t gpus -x 200 -y 50
check_screen "200x50: GPU%, GMEM, GTMP and GPOW columns" gpus 'GPU% +GMEM +GTMP +GPOW' 10
check_screen "200x50: rank 0's GPU: 98% 60G 71C 612W" gpus '^ *0 localhost .* 98 +60G +71C +612W' 10
T resize-window -t gpus -x 120 -y 40
check_screen "the throttling GPU is an event naming the rank and the reason" gpus 'throttling: thermal' 15
T send-keys -t gpus G
check_screen "G opens the GPU view: the node with its GPUs" gpus 'localhost: 2 GPUs, Fake H100' 5
check_screen "the GPU view: each GPU with its rank and utilisation" gpus 'GPU 0 +r0 +98%' 5
check_screen "the GPU view: the throttling GPU says so, with the reason" gpus 'GPU 1 +r1 +42%.*throttling: thermal \(hardware\)' 5
for size in 80x24 200x50; do
    T resize-window -t gpus -x "${size%x*}" -y "${size#*x}"
    sleep 0.5
    check_screen "$size: the GPU view fits and shows both GPUs" gpus 'GPU 1 +r1' 5
done
T send-keys -t gpus Escape
if wait_screen gpus 'GPU% ' 5 && ! grep -q 'localhost: 2 GPUs' <<<"$SCREEN"; then tap_ok "Esc closes the GPU view"
else tap_fail "Esc closes the GPU view" "$SCREEN"; fi
T send-keys -t gpus q
wait_screen gpus 'y/n|stop' 5 && T send-keys -t gpus y
check_screen "q, y: the job stops" gpus 'DDPTOP-EXIT=' 20

# A node without NVML: no GPU column.
cmd="cd $D && LANG=C.UTF-8 TERM=screen-256color $DDPTOP --nproc-per-node 1 --log-dir $D/logs --run-id cpu"
cmd+=" --hang-timeout 0 -- sh -c 'echo cpu rank up; exec sleep 1000'; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s cpu -x 120 -y 40 "$cmd"
if wait_screen cpu 'cpu rank up' 60 && sleep 1.5 && SCREEN=$(T capture-pane -p -t cpu) && grep -q 'RANK HOST' <<<"$SCREEN" &&
   ! grep -q 'GPU%' <<<"$SCREEN"; then tap_ok "a job without NVML has no GPU column"
else tap_fail "a job without NVML has no GPU column" "$SCREEN"; fi
T send-keys -t cpu q
wait_screen cpu 'y/n|stop' 5 && T send-keys -t cpu y
wait_screen cpu 'DDPTOP-EXIT=' 20 >/dev/null
tap_done
