#!/usr/bin/env bash
# Integration: a facts probe that runs past its time limit is "could not be read (timeout)" on
# that node, not a difference (issue 18: under load "python3 differs: ... 143 others: unknown").
# `ddptop check --pbs` with three nodes of this machine (localhost, 127.0.0.1, 127.0.0.2) started
# through a stand-in for pbs_tmrsh (tests/pbs/pbs_tmrsh, a TEST DOUBLE); on 127.0.0.1 and
# 127.0.0.2, the majority, the agent's PATH starts with a python3 that hangs (a stand-in for a node too loaded to start python3 and read
# torch's version within the agent's 8 s). The real agent kills it at its limit and names the
# facts in "unread"; the check warns on those nodes with what to do, and the one node that read
# python3 is not "the odd one out" against two unknowns.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/build}
D=$(mktemp -d /tmp/ddptop-it-facts.XXXXXX)
cleanup() {
    if [ -f "$D/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$D/pids"
    fi
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
touch "$D/pids"
mkdir -p "$D/bin" "$D/hung"
# A python3 that never answers (its process group is what the agent kills).
cat >"$D/hung/python3" <<EOF
#!/bin/sh
echo \$\$ >>"$D/pids"
exec sleep 120
EOF
# pbs_tmrsh for this test: the stand-in, with the hung python3 first on PATH for 127.0.0.1.
cat >"$D/bin/pbs_tmrsh" <<EOF
#!/bin/sh
case \$1 in 127.*) PATH="$D/hung:\$PATH"; export PATH ;; esac
exec "$PWD/tests/pbs/pbs_tmrsh" "\$@"
EOF
chmod +x "$D/hung/python3" "$D/bin/pbs_tmrsh"
printf 'localhost\n127.0.0.1\n127.0.0.2\n' >"$D/nodefile"

start=$(date +%s)
PATH=$D/bin:$PATH PBS_NODEFILE=$D/nodefile NO_COLOR=1 timeout 120 "$BUILD_DIR/ddptop" check --pbs --json \
    >"$D/c.json" 2>"$D/c.err"
rc=$?
took=$(($(date +%s) - start))
j() { /usr/bin/python3 - "$D/c.json" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
env = {h["host"]: h["checks"]["env"] for h in d["hosts"]}
ok = eval(sys.argv[2], {"env": env, "d": d})
if not ok:
    print(json.dumps(env, indent=1))
sys.exit(0 if ok else 1)
PY
}
if [ "$rc" = 0 ] || [ "$rc" = 1 ]; then tap_ok "check ran to its end (exit $rc, ${took} s: the probe's 8 s limit)"
else tap_fail "check ran to its end" "exit $rc" "$(cat "$D/c.err")"; fi
tap_check "127.0.0.1 and 127.0.0.2 (python3 hung): env warns 'python3 could not be read (timeout); torch could not be read (timeout)'" \
    j "all(env[h]['status'] == 'warn' and env[h]['detail'] == 'python3 could not be read (timeout); torch could not be read (timeout)' for h in ('127.0.0.1', '127.0.0.2'))"
tap_check "their differences say so with unread: true, and the hint says to run the check again" \
    j "all(len(env[h]['differences']) == 2 for h in ('127.0.0.1', '127.0.0.2')) and all(x.get('unread') and x['detail'] == 'could not be read (timeout)' and 'run ddptop check again' in env[h]['hint'] for h in ('127.0.0.1', '127.0.0.2') for x in env[h]['differences'])"
tap_check "localhost (python3 read) is not the odd one out: env pass, no 'differs', no 'unknown'" \
    j "env['localhost']['status'] == 'pass' and 'differs' not in env['localhost']['detail'] and 'unknown' not in env['localhost']['detail']"
tap_check "the hung python3s were killed at the limit (no process left)" \
    sh -c "for p in \$(cat '$D/pids'); do ! kill -0 \$p 2>/dev/null || exit 1; done"

tap_done
