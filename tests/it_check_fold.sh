#!/usr/bin/env bash
# it_check_fold (issue 19): the check report folds. 64 simulated nodes n001..n064 (agents
# started through the pbs_tmrsh TEST DOUBLE, tests/pbs/pbs_tmrsh, with --pbs; the names resolve
# to 127.0.0.1 through an /etc/hosts bind-mounted in a private mount namespace). n037 cannot
# start its agent (PBS_TMRSH_FAIL_HOST): the odd one out. A python3 stub that answers at once
# and a --max-skew-ms far above any load keep the other 63 identical on a busy machine.
#  - `ddptop check --pbs`: the 63 share one table line and one line per finding, n037 has
#    its own lines, the whole report fits in 15 lines;
#  - `--all`: a line per node; `--json`: every node, complete;
#  - `ddptop run --pbs --headless`: the preflight printed folded the same way.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/build}
N=64
D=$(mktemp -d /tmp/ddptop-it-fold.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$D"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$D/bin" "$D/py"
printf '#!/bin/sh\necho "Python 3.11.2"\necho 2.4.0\n' >"$D/py/python3"
cat >"$D/bin/pbs_tmrsh" <<EOF
#!/bin/sh
PATH="$D/py:\$PATH"; export PATH
exec "$PWD/tests/pbs/pbs_tmrsh" "\$@"
EOF
chmod +x "$D/py/python3" "$D/bin/pbs_tmrsh"
cp /etc/hosts "$D/hosts"
: >"$D/nodefile"
for i in $(seq 1 $N); do
    h=$(printf 'n%03d' "$i")
    echo "127.0.0.1 $h" >>"$D/hosts"
    echo "$h" >>"$D/nodefile"
done

diag() { printf '%s\n' "$1" | sed 's/^/#   /'; }

# fold_run OUT ARGS...: `ddptop ARGS` among the simulated nodes; its exit status in OUT.rc
fold_run() {
    local out=$1; shift
    PATH=$D/bin:$PATH PBS_NODEFILE=$D/nodefile PBS_TMRSH_FAIL_HOST=n037 NO_COLOR=1 \
        timeout 120 unshare --mount sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh \
        "$D/hosts" "$BUILD_DIR/ddptop" "$@" >"$out" 2>"$out.err" </dev/null
    echo $? >"$out.rc"
}

fold_run "$D/fold.out" check --pbs --max-skew-ms 3600000
rc=$(cat "$D/fold.out.rc")
lines=$(wc -l <"$D/fold.out")
tap_check "check --pbs over $N nodes, one failing: exit 1 ($rc)" test "$rc" = 1
tap_check "the folded report fits in 15 lines ($lines)" test "$lines" -le 15
tap_check "the 63 identical nodes share one table line, as a hostlist" \
    grep -Eq '^n\[001-036,038-064\] +n\[001-036,038-064\] +pass +pass +warn +pass +pass +pass$' "$D/fold.out"
tap_check "the odd one out, n037, has its own table line" \
    grep -Eq '^n037 +n037 +fail +skip +skip +skip +skip +skip$' "$D/fold.out"
tap_check "their shared finding is one line naming them (gpu warn: no GPU found)" \
    grep -Eq '^n\[001-036,038-064\] +gpu +warn +no GPU found' "$D/fold.out"
tap_check "n037's finding is named alone, with its fix" \
    sh -c "grep -Eq '^n037 +tm +fail +pbs_tmrsh could not start the agent' '$D/fold.out' && grep -A1 '^n037 *tm' '$D/fold.out' | grep -q 'fix: '"
tap_check "four lines name nodes (two table lines, two findings): nothing else per node" \
    test "$(grep -Ec '^n(037 |\[001-036,038-064\])' "$D/fold.out")" = 4
tap_check "the summary counts every node and says how to list each" \
    sh -c "grep -q '^64 hosts: 0 pass, 63 warn, 1 fail$' '$D/fold.out' && grep -q 'ddptop check --all lists each' '$D/fold.out'"
[ "$lines" -le 15 ] || diag "$(cat "$D/fold.out")"

fold_run "$D/all.out" check --pbs --max-skew-ms 3600000 --all
tap_check "--all: a table line per node (64) and the gpu finding per node (63)" \
    sh -c "[ \$(grep -Ec '^n0[0-9][0-9] +n0[0-9][0-9] +(pass|fail) ' '$D/all.out') = 64 ] &&
           [ \$(grep -Ec '^n0[0-9][0-9] +gpu +warn +no GPU found' '$D/all.out') = 63 ] && ! grep -q 'n\[' '$D/all.out'"

fold_run "$D/c.json" check --pbs --max-skew-ms 3600000 --json
tap_check "--json: every node, each with all six checks, n037 failing" /usr/bin/python3 - "$D/c.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
hosts = {h["host"]: h for h in d["hosts"]}
ok = (len(d["hosts"]) == 64 and sorted(hosts) == ["n%03d" % i for i in range(1, 65)]
      and all(len(h["checks"]) == 6 for h in d["hosts"])
      and hosts["n037"]["status"] == "fail" and hosts["n036"]["checks"]["gpu"]["status"] == "warn"
      and d["summary"] == {"pass": 0, "warn": 63, "fail": 1})
sys.exit(0 if ok else 1)
PY

# `ddptop run`: the preflight refuses the launch (n037's agent did not start) and prints its
# report, folded, in the headless output.
fold_run "$D/run.out" run --pbs --headless --log-dir "$D/logs" -- true
tap_check "run --pbs: the preflight's table folded in the headless output" \
    sh -c "grep -Eq '^\[ddptop\] check: n\[001-036,038-064\] +n\[001-036,038-064\] +pass' '$D/run.out' &&
           grep -Eq '^\[ddptop\] check: n037 +n037 +fail' '$D/run.out' &&
           grep -Eq '^\[ddptop\] check: n\[001-036,038-064\] +gpu +warn' '$D/run.out'" ||
    diag "$(head -30 "$D/run.out"; cat "$D/run.out.err" | head -5)"

tap_done
