#!/usr/bin/env bash
# it_check_bench_fold: the measured preflight at 64 nodes on the scale test bed
# (tests/lib/scale.sh: n0001..n0064 resolving to 127.0.0.1 in a private mount namespace, agents
# through the pbs_tmrsh TEST DOUBLE): `ddptop check --pbs --bench` ends with every node measured
# (about 3 transfers each, in a handful of rounds), the nodes' shared machine measured once for
# its memory (they are one machine: one address), the report folded as every report is (a
# hostlist a line, not 64), `--all` unfolding it, and nothing of the bed left. How long it
# takes is for `make bench` (tests/bench/check_bench.sh), not for this test.
set -u
. "$(dirname "$0")/lib/scale.sh"
scale_bed_reexec "$@"
cd "$SCALE_ROOT" || exit 1
. tests/lib/tap.sh
NODES=64
trap 'scale_bed_stop' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=

if ! scale_bed_start "$NODES" 1; then
    tap_fail "the scale bed starts ($NODES nodes)"
    tap_done
    exit 1
fi
D=$SCALE_DIR
# what counts as slow here is lenient: 64 simulated nodes share 2 cores and one loopback, so
# transfers of one round compete; this test is about the shape of the report, not the figures
"$SCALE_DDPTOP" check --pbs --bench --bench-min-ratio 0.05 --json >"$D/b.json" 2>"$D/b.err" </dev/null
rc=$?
if [ $rc -le 1 ] && /usr/bin/python3 - "$D/b.json" "$NODES" 2>"$D/py.err" <<'PY'
import json, sys
d, n = json.load(open(sys.argv[1])), int(sys.argv[2])
H = d["hosts"]
b = [h["checks"]["bench"] for h in H]
assert len(H) == n, len(H)
assert all(len(x["transfers"]) >= 2 for x in b), [len(x["transfers"]) for x in b]
assert sum(t["error"] is None for x in b for t in x["transfers"]) >= 0.9 * sum(len(x["transfers"]) for x in b)
assert 3 <= d["bench"]["rounds"] <= 11 and 2 * n <= d["bench"]["transfers"] <= 3 * n, d["bench"]
# one machine: measured once, on the first node; the others name it
assert b[0]["host_measured_on"] is None and b[0]["cpu_mem_gbs"] > 0
assert all(x["host_measured_on"] == H[0]["host"] and x["cpu_mem_gbs"] == b[0]["cpu_mem_gbs"] for x in b[1:])
PY
then
    tap_ok "check --pbs --bench over $NODES nodes: every node measured (exit $rc), the machine once"
else
    tap_fail "check --pbs --bench over $NODES nodes: every node measured" "rc $rc" "$(tail -5 "$D/b.err")" \
        "$(tail -3 "$D/py.err" 2>/dev/null)"
fi

"$SCALE_DDPTOP" check --pbs --bench --bench-min-ratio 0.05 >"$D/b.txt" 2>&1 </dev/null
rows=$(sed -n '2,/^$/p' "$D/b.txt" | grep -c .)
if grep -q 'BENCH' "$D/b.txt" && [ "$rows" -ge 1 ] && [ "$rows" -le 8 ] && grep -q 'n\[0001-' "$D/b.txt"; then
    tap_ok "the report folds: $rows table line(s) for $NODES nodes, named as hostlists"
else
    tap_fail "the report folds (table lines: $rows)" "$(head -20 "$D/b.txt")"
fi
sed -n '1,12p' "$D/b.txt" | sed 's/^/#   /'
"$SCALE_DDPTOP" check --pbs --bench --bench-min-ratio 0.05 --all >"$D/all.txt" 2>&1 </dev/null
rows=$(sed -n '2,/^$/p' "$D/all.txt" | grep -c .)
if [ "$rows" -eq "$NODES" ]; then tap_ok "--all: a line per node ($rows)"
else tap_fail "--all: a line per node" "got $rows"; fi
tap_done
