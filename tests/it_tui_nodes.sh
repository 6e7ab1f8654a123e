#!/usr/bin/env bash
# Issue 19, the dashboard by node, on a real terminal (tmux, a private server, read back with
# capture-pane): 1,024 ranks on 16 nodes (127.0.0.1 .. 127.0.0.16, agents started through the
# pbs_tmrsh TEST DOUBLE, tests/pbs/pbs_tmrsh), each rank a small C program printing a step
# line a second. Rank 700 is frozen with SIGSTOP: with --hang-timeout 3 it becomes stalled and
# is the first row of the rank table without any scrolling (attention first: 1,024 ranks do
# not fit). `v` shows one row per node, 16 rows, the stalled rank's node first; Enter on it
# shows that node's 64 ranks; F filters by state, H by host (a glob); Esc shows them all. The
# time from a key to the changed screen is measured (printed as a TAP comment, recorded in
# docs/performance.md; not asserted: the machine is shared). Every tmux server and process is
# ended by id on the way out, the stopped rank included.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
SOCK=ddpt-nodes-$$
. tests/lib/tmux.sh
D=""
cleanup() {
    tmux_cleanup
    [ -n "$D" ] && rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in tmux cc "$DDPTOP"; do
    command -v "$tool" >/dev/null || { tap_fail "$tool is available"; tap_done; exit; }
done
D=$(mktemp -d /tmp/ddpt-nodes.XXXXXX) || { tap_fail "test directory"; tap_done; exit; }
mkdir -m 700 "$D/xdg" "$D/pids" && export XDG_RUNTIME_DIR=$D/xdg
NODES=16 PER=64
# one wake-up and one write a second per rank (a shell loop would fork 1,024 sleeps a second)
cc -O2 -o "$D/ticker" tests/bench/bench_ticker.c || { tap_fail "the ticker builds"; tap_done; exit; }
cat >"$D/rank.sh" <<EOF
#!/bin/sh
echo \$\$ >"$D/pids/\$RANK"
exec "$D/ticker" 1000
EOF
chmod +x "$D/rank.sh"
for n in $(seq 1 $NODES); do for s in $(seq 1 $PER); do echo "127.0.0.$n"; done; done >"$D/nodefile"

cmd="cd $D && PATH=$PWD/tests/pbs:\$PATH PBS_NODEFILE=$D/nodefile LANG=C.UTF-8 TERM=screen-256color"
cmd+=" $DDPTOP --pbs --no-check --log-dir $D/logs --run-id nodes --hang-timeout 3 --on-hang none"
cmd+=" -- $D/rank.sh; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s nodes -x 120 -y 40 "$cmd"
if ! wait_screen nodes 'Ranks 1024 .*1024 running' 120; then
    tap_fail "1,024 ranks on 16 nodes run" "$SCREEN"
    tap_done
    exit
fi
tap_ok "1,024 ranks on 16 nodes run, the dashboard says so"

# first_row: the first rank (or node) row, the one under the column header
first_row() { awk '/^ *(RANK|NODE) /{getline; print; exit}' <<<"$SCREEN"; }

kill -STOP "$(cat "$D/pids/700")"
if wait_screen nodes '^ +700 .*stalled' 30 && [[ $(first_row) =~ ^\ +700\ .*stalled ]] &&
   grep -q 'attention first' <<<"$SCREEN"; then
    tap_ok "rank 700, stopped, is stalled and the first row (attention first), no scrolling"
else
    tap_fail "rank 700, stopped, is stalled and the first row (attention first), no scrolling" "$SCREEN"
fi

# key_ms KEY REGEX: sends KEY, polls the screen into $SCREEN until REGEX matches; the
# milliseconds it took in $MS (-1: not within 10 s)
MS=0
key_ms() {
    local t0 end
    t0=$(date +%s%N)
    T send-keys -t nodes "$1"
    end=$((SECONDS + 10))
    while :; do
        SCREEN=$(T capture-pane -p -t nodes)
        grep -Eq -- "$2" <<<"$SCREEN" && break
        [ $SECONDS -ge $end ] && { MS=-1; return; }
    done
    MS=$((($(date +%s%N) - t0) / 1000000))
}

key_ms v 'Nodes 16 \(1024 ranks\)'
ms=$MS
# tmux can show the pane's new header before the rows under it (a capture in the middle of
# the redraw): the rows are waited for too, up to 5 s more (a view that never draws them fails)
end=$((SECONDS + 5))
until [ "$(grep -Ec '^127\.0\.0\.[0-9]+ ' <<<"$SCREEN")" -ge 16 ] || [ $SECONDS -ge $end ]; do
    sleep 0.1
    SCREEN=$(T capture-pane -p -t nodes)
done
rows=$(grep -Ec '^127\.0\.0\.[0-9]+ ' <<<"$SCREEN")
distinct=$(grep -Eo '^127\.0\.0\.[0-9]+ ' <<<"$SCREEN" | sort -u | wc -l)
if [ "$ms" -ge 0 ] && [ "$rows" = 16 ] && [ "$distinct" = 16 ] &&
   [[ $(first_row) =~ ^127\.0\.0\.11\ .*(S|◐)1\  ]]; then
    tap_ok "v: one row per node (16), the stalled rank's node 127.0.0.11 first with S1"
else
    tap_fail "v: one row per node (16 rows: $rows, $distinct distinct), 127.0.0.11 first with S1" "$SCREEN"
fi

# the time a key takes to show: v back and forth, 10 times
times=()
for i in $(seq 1 5); do
    key_ms v 'Ranks 1024'
    times+=("$MS")
    key_ms v 'Nodes 16 '
    times+=("$MS")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
echo "# key to screen with 1,024 ranks (v, ms, sorted): $sorted"
if ! grep -q -- '-1' <<<"$sorted"; then
    tap_ok "every v was answered on screen (median $(printf '%s\n' "${times[@]}" | sort -n | sed -n 5p) ms)"
else
    tap_fail "every v was answered on screen" "$sorted"
fi

# Enter on the first node (the stalled rank's): the rank table shows its 64 ranks, 700 first
T send-keys -t nodes Home
sleep 0.3
key_ms Enter '64 shown: node 127\.0\.0\.11'
if [[ $(first_row) =~ ^\ +700\ .*stalled ]] && ! grep -Eq '^ +(0|1|699|704) +127' <<<"$SCREEN"; then
    tap_ok "Enter on node 127.0.0.11: its 64 ranks only, rank 700 first"
else
    tap_fail "Enter on node 127.0.0.11: its 64 ranks only, rank 700 first" "$SCREEN"
fi

# Esc: every rank again; F: attention (the stalled rank, maybe stragglers); F again: failed, none
key_ms Escape 'every rank shown'
key_ms F 'state filter: attention'
others=$(awk '/^ *RANK /{on=1; next} on && /^ +[0-9]+ +127/' <<<"$SCREEN" | grep -Evc 'stalled|straggler')
if grep -Eq '^ +700 .*stalled' <<<"$SCREEN" && [ "$others" = 0 ]; then
    tap_ok "F: attention: the stalled rank, nothing running normally"
else
    tap_fail "F: attention: the stalled rank, nothing running normally ($others others)" "$SCREEN"
fi
key_ms F 'state filter: failed, 0 ranks'
if grep -q 'no rank passes the filter' <<<"$SCREEN"; then
    tap_ok "F again: failed: no rank, and the pane says so"
else
    tap_fail "F again: failed: no rank, and the pane says so" "$SCREEN"
fi
T send-keys -t nodes Escape
sleep 0.3
T send-keys -t nodes H
wait_screen nodes 'host \(glob or part of a name\)' 5
T send-keys -t nodes '127.0.0.1?'
key_ms Enter 'host 127\.0\.0\.1\?: 448 ranks, 7 nodes'
ms=$MS
hosts=$(awk '/^ *RANK /{on=1; next} on && /^ +[0-9]+ +127/ {print $2}' <<<"$SCREEN" | sort -u | tr '\n' ' ')
if [ "$ms" -ge 0 ] && grep -q '448 shown' <<<"$SCREEN" && ! grep -Eq '127\.0\.0\.[1-9] ' <<<"$hosts"; then
    tap_ok "H 127.0.0.1? : 448 ranks of 7 nodes (127.0.0.10-16), no other host"
else
    tap_fail "H 127.0.0.1? : 448 ranks of 7 nodes, hosts: $hosts" "$SCREEN"
fi
# the help lists the new keys (its second page: the ranks pane's section)
key_ms '?' 'this help'
key_ms NPage 'one row per rank'
if grep -q 'one row per rank / one row per node' <<<"$SCREEN" && grep -q 'attention first / by rank' <<<"$SCREEN"; then
    tap_ok "the help lists v and o"
else
    tap_fail "the help lists v and o" "$SCREEN"
fi
T send-keys -t nodes Escape
kill -CONT "$(cat "$D/pids/700")" 2>/dev/null
T send-keys -t nodes q
sleep 0.3
T send-keys -t nodes y
wait_screen nodes 'DDPTOP-EXIT=' 60 || tap_fail "ddptop quits on q y" "$SCREEN"
tap_done
