#!/usr/bin/env bash
# it_scale: 256 nodes on the scale test bed (tests/lib/scale.sh: names n0001..n0256 resolving
# to 127.0.0.1 through an /etc/hosts bind-mounted in a private mount namespace, agents started
# through the pbs_tmrsh TEST DOUBLE, every process in a cgroup of the bed's own).
# - `ddptop run --pbs` of 256 nodes x 2 ranks with the preflight: the preflight covers the 256
#   nodes, the job launches 512 ranks and ends 0, every rank's log holds its 3 step lines in
#   order, the controller's peak RSS stays under 128 MiB (41 MiB at 1,024 ranks, issue 19);
# - when it ended, ddptop left nothing running: no agent, keeper or rank of the bed;
# - `ddptop check --pbs --json` over the 256 nodes finishes with every node reached and TCP
#   passing;
# - the bed's own clean-up: a run whose 512 ranks sleep is SIGKILLed with its agents and ranks,
#   by id, and no ddptop-agent of the bed is left (pgrep -f).
set -u
. "$(dirname "$0")/lib/scale.sh"
scale_bed_reexec "$@"
cd "$SCALE_ROOT" || exit 1
. tests/lib/tap.sh
. tests/lib/run_job.sh
NODES=256
RPN=2
RANKS=$((NODES * RPN))
HWM_LIMIT_KB=$((128 * 1024))
cleanup() {
    rj_cleanup
    scale_bed_stop
    # the NCCL flight-recorder directories of runs whose agents were killed (they cannot remove them)
    rm -rf /tmp/ddptop-nccl-{scale,sleepers}
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=

if ! scale_bed_start "$NODES" "$RPN"; then
    tap_fail "the scale bed starts ($NODES nodes in a mount namespace, a cgroup)"
    tap_done
    exit 1
fi
D=$SCALE_DIR
tap_check "n0256 resolves to 127.0.0.1 in the bed; the real /etc/hosts entries are kept" \
    sh -c "getent hosts n0256 | grep -q '^127.0.0.1 ' && getent hosts localhost >/dev/null"
DDPTOP=$SCALE_DDPTOP   # run_job.sh starts ddptop through the bed (its cgroup)

# 1. 256 nodes x 2 ranks, with the preflight.
rj_run "$D/run.out" --limit 90 --pbs --headless --log-dir "$D/logs" --run-id scale -- "$SCALE_RANK" 3
rj_expect_rc "256 nodes x 2 ranks with the preflight: the job ends 0" 0
[ "$RJ_RC" = 0 ] || grep -E -A1 '^\[ddptop\] check: [^ ]+ +[a-z]+ +fail ' "$RJ_OUT" | head -20 | sed 's/^/#   /'
ev_assert "the preflight covered the 256 nodes, then 512 ranks launched on 256 nodes" "$D/logs/scale/events.jsonl" \
    "any(sum(map(int, __import__('re').findall(r'(\\d+) (?:hosts? |nodes? )?(?:pass|warn|fail)', e['text']))) == $NODES for e in ev('info') if e['text'].startswith('preflight'))" \
    "len(ev('launch')) == 1 and ev('launch')[0]['ranks'] == $RANKS and len(ev('launch')[0]['hosts']) == $NODES" \
    "len(ev('exit')) == $RANKS"
logs_ok() {
    /usr/bin/python3 - "$D/logs/scale/attempt-0" "$RANKS" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
bad = []
for r in range(n):
    try:
        lines = open(f"{d}/rank-{r}.log").read().splitlines()
        steps = [json.loads(l) for l in lines]
        if [(s["rank"], s["step"]) for s in steps] != [(r, 1), (r, 2), (r, 3)]:
            bad.append(f"rank {r}: {lines}")
    except (OSError, ValueError, KeyError) as e:
        bad.append(f"rank {r}: {e}")
for b in bad[:10]:
    print("# " + b)
sys.exit(1 if bad else 0)
PY
}
tap_check "every one of the $RANKS ranks' logs holds its 3 step lines, in order" logs_ok
tap_check "the controller's peak RSS: $((RJ_HWM_KB / 1024)) MiB, under $((HWM_LIMIT_KB / 1024)) MiB" \
    test "$RJ_HWM_KB" -gt 0 -a "$RJ_HWM_KB" -lt "$HWM_LIMIT_KB"
bed_empty() { [ "$(scale_bed_count)" = 0 ]; }
if wait_until 20 bed_empty; then
    tap_ok "after the job, nothing of it is left running (agents, keepers, ranks)"
else
    tap_fail "after the job, nothing of it is left running" \
        "$(for p in $(scale_bed_procs); do echo "$p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100)"; done | head -10)"
fi

# 1b. The launch's spawns spread over the loop's passes (ctl_spawn_more), one node a pass here
# (DDPTOP_TEST_SPAWN_PASS_NODES=1, the tests' own: 256 passes, as 1,024 nodes' spawns spread on
# a slow machine): rank 0 fails at once, while most nodes' spawns are still due. The stop reaches
# every node after its spawn: the job fails with rank 0 as the root cause, every rank's exit is
# recorded, and nothing of the job is left running.
DDPTOP_TEST_SPAWN_PASS_NODES=1 rj_run "$D/spread.out" --limit 90 --pbs --headless --no-check --log-dir "$D/logs" \
    --run-id spread --max-restarts 0 -- sh -c 'if [ "$RANK" = 0 ]; then echo "rank 0 gives up" >&2; exit 3; fi; exec sleep 600'
rj_expect_rc "spawns spread one node a pass, rank 0 fails at once: the job fails (exit 1)" 1
ev_assert "the root cause is rank 0's exit 3; every one of the $RANKS ranks has its exit" "$D/logs/spread/events.jsonl" \
    'cause is not None and cause["rank"] == 0 and cause.get("exit_code") == 3' \
    "sorted(set(e['rank'] for e in ev('exit') + ev('failure') if e['rank'] is not None)) == list(range($RANKS))"
if wait_until 20 bed_empty; then
    tap_ok "after the spread launch's failure, nothing of it is left running"
else
    tap_fail "after the spread launch's failure, nothing of it is left running" "$(scale_bed_count) processes in the bed"
fi

# 2. ddptop check over the 256 nodes.
t0=$(date +%s)
timeout 90 "$SCALE_DDPTOP" check --pbs --json >"$D/check.json" 2>"$D/check.err"
rc=$?
took=$(($(date +%s) - t0))
check_ok() {
    /usr/bin/python3 - "$D/check.json" "$NODES" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
h = d["hosts"]
want = [f"n{i:04d}" for i in range(1, int(sys.argv[2]) + 1)]
bad = [x["host"] for x in h if x["checks"]["ssh"]["status"] != "pass" or x["checks"]["tcp"]["status"] != "pass"
       or not x["checks"]["tcp"].get("rendezvous_ok")]
if sorted(x["host"] for x in h) != want or bad:
    print(f"# {len(h)} hosts; not reached or TCP not passing: {bad[:10]}")
    sys.exit(1)
PY
}
if [ "$rc" -le 1 ] && check_ok; then
    tap_ok "ddptop check --pbs --json over 256 nodes finishes (exit $rc, ${took} s): every node reached, TCP passes"
else
    tap_fail "ddptop check --pbs --json over 256 nodes finishes: exit $rc after ${took} s" "$(tail -5 "$D/check.err")"
fi

# 3. The bed's clean-up: a run whose ranks would sleep for 10 minutes, killed by the bed.
rj_start "$D/sleep.out" --pbs --headless --no-check --log-dir "$D/logs" --run-id sleepers -- sleep 600
running() { [ "$(grep -c '"kind":"launch"' "$D/logs/sleepers/events.jsonl" 2>/dev/null)" = 1 ] &&
            [ "$(scale_bed_count)" -ge $((1 + NODES + 2 * RANKS)) ]; }
if wait_until 60 running; then
    n=$(scale_bed_count)
    agents=$(scale_bed_agents_left | wc -l)
    scale_bed_kill
    rj_wait 10
    left=$(scale_bed_agents_left | wc -l)
    tap_check "scale_bed_kill ended the bed's $n processes ($agents of them ddptop-agent): $left agents left (pgrep -f ddptop-agent), $(scale_bed_count) processes" \
        test "$left" = 0 -a "$(scale_bed_count)" = 0 -a "$agents" -ge "$NODES"
else
    tap_fail "the sleeping run started its $RANKS ranks" "$(scale_bed_count) processes in the bed" "$(tail -5 "$D/sleep.out.err")"
fi
tap_done
