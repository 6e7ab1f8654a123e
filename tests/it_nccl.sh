#!/usr/bin/env bash
# Issue 20, NCCL's own account of every rank: a 4-node job (127.0.0.1 .. 127.0.0.4, agents
# started through the pbs_tmrsh TEST DOUBLE, tests/pbs/pbs_tmrsh), 2 ranks a node, each rank a
# real process that prints NCCL's INFO lines from tests/fixtures/nccl/ (NCCL's exact formats,
# the sources named there) with realistic timing, then step lines. 127.0.0.3's NCCL finds no IB
# device and falls back to Socket; 127.0.0.4 runs NCCL 2.19.3 (the others 2.18.3) and
# bootstraps over ib7 (an interface the preflight, which runs, did not expect); a rank on 127.0.0.2 prints an IB completion error naming
# 127.0.0.4's address. Asserted: the "nccl" events in events.jsonl, attempt-0/nccl.json, the
# dashboard's NCCL node view (C, tmux 120x40), `ddptop logs --nccl` (and --json, and again from
# the rank logs alone with nccl.json removed), and `ddptop view` of the finished run. Every
# tmux server and process is ended by id on the way out.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
FIX=$PWD/tests/fixtures/nccl
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

for tool in tmux "$DDPTOP" /usr/bin/python3; do
    command -v "$tool" >/dev/null || { tap_fail "$tool is available"; tap_done; exit; }
done
D=$(mktemp -d /tmp/ddpt-nccl.XXXXXX) || { tap_fail "test directory"; tap_done; exit; }
mkdir -m 700 "$D/xdg" && export XDG_RUNTIME_DIR=$D/xdg
RID=nccl$$

# A rank: its node's NCCL lines (the template of its node, placeholders filled, @SLEEP lines as
# pauses), then a step line every half second for ~10 s; rank 2 (on 127.0.0.2) prints an IB
# completion error whose peer is 127.0.0.4's bootstrap address after 3 s.
cat >"$D/rank.sh" <<EOF
#!/bin/bash
node=\$((NODE_RANK + 1))
case \$node in 3) t=init-socket-2.18.3 ;; 4) t=init-ib-2.19.3 ;; *) t=init-ib-2.18.3 ;; esac
ifc=\$NCCL_SOCKET_IFNAME; [ \$node = 4 ] && ifc=ib7
nr=\$(( (RANK + 1) % WORLD_SIZE ))
play() {
    sed -e "s/@H@/gpu-n\$node/g" -e "s/@P@/\$\$/g" -e "s/@D@/\$LOCAL_RANK/g" -e "s/@R@/\$RANK/g" \\
        -e "s/@N@/\$WORLD_SIZE/g" -e "s/@IF@/\$ifc/g" -e "s/@IP@/10.0.0.\$node/g" -e "s/@NR@/\$nr/g" \\
        -e "s/@ND@/\$((nr % 2))/g" -e "s/@PIP@/10.0.0.4/g" "$FIX/\$1.tmpl" |
    while IFS= read -r l; do
        case \$l in
        "@SLEEP "*) ms=\${l#@SLEEP }; sleep "\$((ms / 1000)).\$(printf %03d \$((ms % 1000)))" ;;
        *) printf '%s\n' "\$l" ;;
        esac
    done
}
play \$t
for s in \$(seq 1 20); do
    echo "step \$s loss 2.\$((50 - s))"
    [ \$s = 6 ] && [ \$RANK = 2 ] && play warn-ib-completion-2.18.3
    sleep 0.5
done
EOF
chmod +x "$D/rank.sh"
for n in 1 2 3 4; do echo "127.0.0.$n"; echo "127.0.0.$n"; done >"$D/nodefile"
LOGS=$D/logs
# The preflight runs: NCCL_SOCKET_IFNAME names this machine's interface (what nodes 1-3's NCCL
# prints); node 4's NCCL prints ib7, which the preflight did not expect.
IF=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
IF=${IF:-lo}
. tests/lib/sshd.sh
PORT=$(sshd_pick_port) || { tap_fail "a free port"; tap_done; exit; }

cmd="cd $D && PATH=$PWD/tests/pbs:\$PATH PBS_NODEFILE=$D/nodefile LANG=C.UTF-8 TERM=screen-256color"
cmd+=" $DDPTOP --pbs --log-dir $LOGS --run-id $RID --master-port $PORT --env NCCL_SOCKET_IFNAME=$IF -- $D/rank.sh; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s run -x 120 -y 40 "$cmd"
if ! wait_screen run 'Ranks 8 .*8 running' 60; then
    tap_fail "8 ranks on 4 nodes run" "$SCREEN"
    tap_done
    exit
fi
tap_ok "8 ranks on 4 nodes run"

EV=$LOGS/$RID/events.jsonl

# C: the node view with NCCL's columns, while the job runs (the init times once NCCL said COMPLETE)
T send-keys -t run C
if wait_screen run 'Nodes 4: NCCL' 10 &&
   wait_screen run "127\.0\.0\.3 +2\.18\.3\+cuda12\.2 +Socket +$IF:10\.0\.0\.3<0> +[0-9.]+s" 20 &&
   wait_screen run "127\.0\.0\.1 +2\.18\.3\+cuda12\.2 +IB +$IF:10\.0\.0\.1<0> +[0-9.]+s" 20 &&
   grep -Eq '127\.0\.0\.4 +2\.19\.3\+cuda12\.3 +IB +ib7:10\.0\.0\.4<0> +[0-9.]+s' <<<"$SCREEN"; then
    tap_ok "C: one row per node with its NCCL version, network, bootstrap and init time"
else
    tap_fail "C: one row per node with its NCCL version, network, bootstrap and init time" "$SCREEN"
fi
T send-keys -t run C
if wait_screen run 'Nodes 4 \(8 ranks\)' 10; then
    tap_ok "C again: the usual node columns"
else
    tap_fail "C again: the usual node columns" "$SCREEN"
fi

# the ranks end; q leaves the dashboard
wait_screen run 'ddptop \| DONE' 60
T send-keys -t run q
if wait_screen run 'DDPTOP-EXIT=0' 20; then
    tap_ok "the job ends, exit 0"
else
    tap_fail "the job ends, exit 0" "$SCREEN"
fi

# events.jsonl: each odd one out once, in words a person reads
ev_text() { /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("kind") == "nccl": print(e.get("text"))' "$EV"; }
NEV=$(ev_text)
check_event() {
    if [ "$(grep -cF -- "$2" <<<"$NEV")" = 1 ]; then tap_ok "$1"; else tap_fail "$1 (once: $2)" "$NEV"; fi
}
check_event "event: NCCL versions differ" \
    "NCCL versions differ: 2.18.3+cuda12.2 on 127.0.0.[1-3] (ranks 0-5), 2.19.3+cuda12.3 on 127.0.0.4 (ranks 6-7)"
check_event "event: some nodes on IB, one on Socket" \
    "NCCL networks differ: IB on 127.0.0.[1-2,4] (ranks 0-3,6-7), Socket on 127.0.0.3 (ranks 4-5)"
check_event "event: 127.0.0.4 bootstraps over another interface" \
    "NCCL bootstrap interfaces differ: $IF on 127.0.0.[1-3] (ranks 0-5), ib7 on 127.0.0.4 (ranks 6-7)"
check_event "event: 127.0.0.4's interface is not what the preflight expected" \
    "NCCL bootstraps over ib7 on 127.0.0.4, not what the preflight expected there ($IF): check NCCL_SOCKET_IFNAME"
check_event "event: the IB completion error names the node pair" \
    "NCCL WARN 1 time on 127.0.0.2 (rank 2), with peer 127.0.0.4: NET/IB : Got completion from peer 10.0.0.4<44455> with error 12"
n=$(grep -c . <<<"$NEV")
if [ "$n" = 5 ]; then tap_ok "5 nccl events, no more"; else tap_fail "5 nccl events, no more ($n)" "$NEV"; fi

# nccl.json: one object per rank
J=$LOGS/$RID/attempt-0/nccl.json
if /usr/bin/python3 - "$J" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
r = {x["rank"]: x for x in o["ranks"]}
assert o["attempt"] == 0 and len(r) == 8, o
assert r[4]["net"] == "Socket" and r[4]["net_devices"].endswith(":10.0.0.3<0>"), r[4]
assert r[0]["net"] == "IB" and r[0]["net_devices"] == "mlx5_0:1/IB mlx5_1:1/IB", r[0]
assert r[6]["nccl_version"] == "2.19.3+cuda12.3" and r[6]["bootstrap_if"] == "ib7", r[6]
assert r[0]["transports"] == "P2P NET" and r[4]["transports"] == "SHM NET", (r[0], r[4])
assert all(x["init_complete"] for x in r.values())
assert 0.3 < r[0]["init_s"] < 5 and r[4]["init_s"] > r[0]["init_s"], (r[0]["init_s"], r[4]["init_s"])
assert r[2]["warns"] == 1 and "Got completion" in r[2]["warn_last"][-1]
assert any("networks differ" in f for f in o["findings"])
PY
then tap_ok "attempt-0/nccl.json: each rank's account (version, net, devices, transports, init time, WARN)"
else tap_fail "attempt-0/nccl.json: each rank's account" "$(cat "$J" 2>&1)"
fi
if [ "$(stat -c %a "$J")" = 600 ]; then tap_ok "nccl.json is private (0600)"; else tap_fail "nccl.json is private (0600)" "$(stat -c %a "$J")"; fi

# ddptop logs --nccl: a row per node, then the odd ones out
out=$("$DDPTOP" logs "$RID" --log-dir "$LOGS" --nccl 2>&1)
if grep -Eq "^127\.0\.0\.3 +4-5 +2\.18\.3\+cuda12\.2 +$IF:10\.0\.0\.3<0> +Socket +$IF:10\.0\.0\.3<0> +SHM NET +[0-9.]+s +0\$" <<<"$out" &&
   grep -Eq "^127\.0\.0\.2 +2-3 +2\.18\.3\+cuda12\.2 +$IF:10\.0\.0\.2<0> +IB +mlx5_0:1/IB mlx5_1:1/IB +P2P NET +[0-9.]+s +1\$" <<<"$out" &&
   grep -Eq '^127\.0\.0\.4 +6-7 +2\.19\.3\+cuda12\.3 +ib7:' <<<"$out" && grep -q '^127\.0\.0\.1 ' <<<"$out" &&
   grep -q 'from nccl.json' <<<"$out" && grep -qF '  NCCL networks differ: IB on 127.0.0.[1-2,4]' <<<"$out" &&
   grep -qF 'with peer 127.0.0.4' <<<"$out"; then
    tap_ok "ddptop logs --nccl: a row per node and the odd ones out"
else
    tap_fail "ddptop logs --nccl: a row per node and the odd ones out" "$out"
fi
out=$("$DDPTOP" logs "$RID" --log-dir "$LOGS" --nccl --json 2>&1)
if /usr/bin/python3 -c '
import json, sys
o = json.loads(sys.argv[1])
n = {x["node"]: x for x in o["nodes"]}
assert o["source"] == "nccl.json" and len(n) == 4
assert n["127.0.0.3"]["net"] == "Socket" and n["127.0.0.4"]["nccl_version"] == "2.19.3+cuda12.3"
assert len(o["findings"]) == 5' "$out"; then
    tap_ok "ddptop logs --nccl --json: nodes, ranks and findings"
else
    tap_fail "ddptop logs --nccl --json: nodes, ranks and findings" "$out"
fi

# the same from the rank logs alone (a run without nccl.json: older ones)
rm -f "$J"
out=$("$DDPTOP" logs "$RID" --log-dir "$LOGS" --nccl 2>&1)
if grep -q 'from the rank logs' <<<"$out" && grep -Eq '^127\.0\.0\.3 +4-5 +2\.18\.3\+cuda12\.2 .* Socket ' <<<"$out" &&
   grep -qF 'NCCL versions differ: 2.18.3+cuda12.2 on 127.0.0.[1-3] (ranks 0-5)' <<<"$out" &&
   grep -qF 'with peer 127.0.0.4' <<<"$out"; then
    tap_ok "ddptop logs --nccl without nccl.json: the rank logs parsed again"
else
    tap_fail "ddptop logs --nccl without nccl.json: the rank logs parsed again" "$out"
fi
out=$("$DDPTOP" logs "$RID" --log-dir "$LOGS" --json 2>&1); rc=$?
if [ $rc = 2 ] && grep -q -- '--json goes with --nccl' <<<"$out"; then
    tap_ok "--json without --nccl is a usage error"
else
    tap_fail "--json without --nccl is a usage error" "rc=$rc $out"
fi

# ddptop view of the finished run: its events and, with C, the NCCL columns
T new-session -d -s view -x 120 -y 40 "cd $D && LANG=C.UTF-8 TERM=screen-256color $DDPTOP view --log-dir $LOGS $RID; sleep 600"
if wait_screen view "run $RID" 20; then
    # the events pane, one row each, scrolled back a row at a time to the nccl events
    T send-keys -t view w Tab Tab
    for i in $(seq 1 20); do
        wait_screen view 'nccl +NCCL versions' 1 && break
        T send-keys -t view Up
    done
    if grep -Eq 'nccl +NCCL versions' <<<"$SCREEN"; then
        tap_ok "ddptop view: the nccl events are in the events pane"
    else
        tap_fail "ddptop view: the nccl events are in the events pane" "$SCREEN"
    fi
    T send-keys -t view C
    if wait_screen view '127\.0\.0\.3 .*2\.18\.3\+cuda12\.2 +Socket' 10; then
        tap_ok "ddptop view: C shows the finished run's NCCL account per node"
    else
        tap_fail "ddptop view: C shows the finished run's NCCL account per node" "$SCREEN"
    fi
else
    tap_fail "ddptop view opens the run" "$SCREEN"
fi

# A WARN in a rank's last breath is said before the run's end: nccl_tick waits
# NCCL_WARN_WAIT_MS to gather a WARN's ranks, but the run ends first; the controller flushes
# NCCL's pending findings before the end event (which stays the last line of events.jsonl).
cat >"$D/last.sh" <<'EOF2'
#!/bin/sh
echo "gpu-n1:$$:$$ [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.4<44455> with error 12, opcode 129, len 0, vendor err 129 (Recv)"
EOF2
chmod +x "$D/last.sh"
out=$(cd "$D" && timeout 60 "$DDPTOP" --headless --no-check --nproc-per-node 1 --log-dir "$LOGS" --run-id "$RID-last" -- "$D/last.sh" 2>&1)
EV=$LOGS/$RID-last/events.jsonl
if /usr/bin/python3 - "$EV" <<'PY'
import json, sys
kinds = [(e.get("kind"), e.get("text", "")) for e in map(json.loads, open(sys.argv[1]))]
nccl = [i for i, (k, t) in enumerate(kinds) if k == "nccl" and t.startswith("NCCL WARN 1 time on ")]
assert len(nccl) == 1 and kinds[-1][0] == "end" and nccl[0] < len(kinds) - 1, kinds
PY
then tap_ok "a WARN just before the end is said as an nccl event, before the end event"
else tap_fail "a WARN just before the end is said as an nccl event, before the end event" "$out" "$(cat "$EV" 2>&1)"
fi
tap_done
