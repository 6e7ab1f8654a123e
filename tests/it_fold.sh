#!/usr/bin/env bash
# Integration: one line for N ranks (issue 30). 64 ranks on 8 nodes n01..n08 (the tests' fork
# kind of transport: each node's agent started here through `sh -c`, tests/it_transport_kind.sh)
# meet at a barrier (a file per rank), then each prints the same warning; rank 37 prints a
# line of its own after it.
# - Headless: the warning is one line, "[r0-63 n[01-08]] UserWarning: ...", before rank 37's
#   line, which looks as a rank's line always did ("[r37 n05] ..."); every rank's log file has
#   the warning; with --no-fold, 64 lines, one per rank, as before.
# - The dashboard in tmux (120x40): `a` (all ranks) shows the warning once with r0-63 and rank
#   37's line alone; `u` unfolds (one line per rank, the title says so), `u` folds again; a
#   search finds the folded line; q, y ends the job with nothing left running.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
SOCK=ddpt-fold-$$
. tests/lib/tmux.sh
D=""
cleanup() {
    tmux_cleanup
    rj_cleanup
    if [ -n "$D" ]; then kill_marker_pids "$D/"; rm -rf "$D"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export NO_COLOR=1 CUDA_VISIBLE_DEVICES= DDPTOP_TEST_TRANSPORTS=1

for tool in tmux "$DDPTOP"; do
    command -v "$tool" >/dev/null || { tap_fail "$tool is available"; tap_done; exit; }
done
D=$(mktemp -d /tmp/ddpt-fold.XXXXXX) || { tap_fail "test directory"; tap_done; exit; }
mkdir -m 700 "$D/xdg" && export XDG_RUNTIME_DIR=$D/xdg
for i in 1 2 3 4 5 6 7 8; do echo "n0$i slots=8"; done >"$D/hosts"
WARN='/opt/lib/api.py:12: UserWarning: old_api() is deprecated'
# The barrier: each rank leaves a file in a directory of the run (FOLD_TAG) and waits on a
# FIFO; the rank that finds all 64 files writes a line for each into the FIFO (and holds it
# open a while for the slow ones), so the warnings come close together, with no polling that
# would load the machine.
cat >"$D/rank.sh" <<EOF
#!/bin/sh
b=$D/barrier-\$FOLD_TAG
: >"\$b/\$RANK"
last=
if [ "\$(ls "\$b" | wc -l)" -ge "\$WORLD_SIZE" ]; then
    last=1
    exec 3<>"\$b.fifo"
    i=0
    while [ \$i -lt "\$WORLD_SIZE" ]; do echo go >&3; i=\$((i + 1)); done
fi
read go <"\$b.fifo"
echo '$WARN'
if [ "\$RANK" = 37 ]; then echo "rank 37 has a line of its own"; fi
if [ -n "\${FOLD_HOLD:-}" ]; then sleep 1000; fi
if [ -n "\$last" ]; then sleep 5; fi
EOF
for tag in h1 h2 t; do mkdir "$D/barrier-$tag" && mkfifo "$D/barrier-$tag.fifo"; done
chmod +x "$D/rank.sh"
RUN=(--transport fork --agent-dir "$D/agents" --no-check --hang-timeout 0 --log-dir "$D/logs")

# ---- headless ----
rj_run "$D/h1.out" --limit 120 "$D/hosts" --headless "${RUN[@]}" --run-id fold1 --env FOLD_TAG=h1 -- "$D/rank.sh"
rj_expect_rc "64 ranks on 8 nodes print the same warning (headless)" 0
folded=$(grep -c "^\[r0-63 n\[01-08\]\] $WARN\$" "$D/h1.out")
all=$(grep -c "UserWarning" "$D/h1.out")
tap_check "headless: the warning is one line, [r0-63 n[01-08]] (got $folded such of $all lines with the warning)" \
    test "$folded" = 1 -a "$all" = 1
own=$(grep -n '^\[r37 n05\] rank 37 has a line of its own$' "$D/h1.out" | cut -d: -f1)
warn_at=$(grep -n "^\[r0-63 " "$D/h1.out" | cut -d: -f1)
tap_check "headless: rank 37's own line is alone, as a rank's line always looked, after the warning (lines $warn_at, $own)" \
    test -n "$own" -a -n "$warn_at" -a "${own:-0}" -gt "${warn_at:-0}"
logs_ok=0
for r in $(seq 0 63); do grep -qxF "$WARN" "$D/logs/fold1/attempt-0/rank-$r.log" 2>/dev/null && logs_ok=$((logs_ok + 1)); done
tap_check "the files keep every line: all 64 rank logs have the warning ($logs_ok)" test "$logs_ok" = 64
if [ "$folded" != 1 ]; then echo "# headless output:"; sed 's/^/#   /' "$D/h1.out" | head -30; fi

rj_run "$D/h2.out" --limit 120 "$D/hosts" --headless --no-fold "${RUN[@]}" --run-id fold2 --env FOLD_TAG=h2 -- "$D/rank.sh"
rj_expect_rc "the same with --no-fold" 0
each=$(grep -F "] $WARN" "$D/h2.out" | grep -cE '^\[r([0-9]|[1-5][0-9]|6[0-3]) n0[1-8]\] /opt')
ranks=$(grep -oE "^\[r[0-9]+ " "$D/h2.out" | sort -u | wc -l)
tap_check "--no-fold: one line per rank, as before (got $each lines from $ranks ranks)" test "$each" = 64 -a "$ranks" = 64

# ---- the dashboard ----
# (from a script: the pane's command line names neither the ranks' script nor the agents)
cat >"$D/dash.sh" <<EOF
cd $D && LANG=C.UTF-8 TERM=screen-256color $DDPTOP $D/hosts ${RUN[*]} --run-id fold3 \\
    --env FOLD_TAG=t --env FOLD_HOLD=1 -- $D/rank.sh
echo DDPTOP-EXIT=\$?
sleep 600
EOF
T new-session -d -s fold -x 120 -y 40 "sh $D/dash.sh"
if ! wait_screen fold '64 running' 90; then
    tap_fail "the dashboard runs 64 ranks" "$SCREEN"
    tap_done
    exit
fi
# every rank printed (the files), then the all-ranks view
printed() { [ "$(grep -lxF "$WARN" "$D"/logs/fold3/attempt-0/rank-*.log 2>/dev/null | wc -l)" = 64 ]; }
wait_until 60 printed || tap_fail "the 64 ranks printed the warning" "$(ls "$D/logs/fold3/attempt-0" | head)"
T send-keys -t fold a
if wait_screen fold '\[r0-63 n\[01-08\]\] /opt/lib/api.py:12: UserWarning' 10; then
    tap_ok "dashboard, all ranks (a): the warning once, [r0-63 n[01-08]]"
else
    tap_fail "dashboard, all ranks (a): the warning once, [r0-63 n[01-08]]" "$SCREEN"
fi
grep -E 'Log of all|r0-63|\[r37\]' <<<"$SCREEN" | sed 's/^/# screen: /'
n_warn=$(grep -c 'UserWarning' <<<"$SCREEN")
n_own=$(grep -c '\[r37\] rank 37 has a line of its own' <<<"$SCREEN")
tap_check "dashboard: no other line of the warning on screen ($n_warn), rank 37's line alone, [r37] ($n_own)" \
    test "$n_warn" = 1 -a "$n_own" = 1
tap_check "dashboard: the title counts what is folded (63 lines folded, u unfolds)" \
    grep -q '63 lines folded (u unfolds)' <<<"$SCREEN"
T send-keys -t fold u
if wait_screen fold 'unfolded \(u folds\)' 10 && ! grep -q 'r0-63' <<<"$SCREEN" &&
   [ "$(grep -cE '\[r[0-9]+\] /opt/lib/api.py:12: UserWarning' <<<"$SCREEN")" -ge 5 ]; then
    tap_ok "u unfolds: a line per rank ($(grep -c UserWarning <<<"$SCREEN") on screen)"
else
    tap_fail "u unfolds: a line per rank" "$SCREEN"
fi
T send-keys -t fold u
wait_screen fold '\[r0-63 n\[01-08\]\] /opt' 10
tap_check "u again folds" grep -q '63 lines folded' <<<"$SCREEN"
T send-keys -t fold / && T send-keys -t fold -l 'deprecated' && T send-keys -t fold Enter
wait_screen fold 'search: deprecated' 10
tap_check "a search finds the folded line" test "$(grep -c 'not found' <<<"$SCREEN")" = 0
T send-keys -t fold q
wait_screen fold 'y' 5
T send-keys -t fold y
if wait_screen fold 'DDPTOP-EXIT=' 60; then
    tap_ok "q, y ends the job ($(grep -o 'DDPTOP-EXIT=[0-9]*' <<<"$SCREEN"))"
else
    tap_fail "q, y ends the job" "$SCREEN"
fi
gone() { no_marker_pids "$D/rank.sh" && no_marker_pids "$D/agents"; }
tap_check "no rank or agent left" wait_until 20 gone
tap_done
