#!/usr/bin/env bash
# Integration: a kind of transport is one file and one line of the table (issue 32). The test
# kind "fork" (launcher/ssh/kind_fork.c, there only with DDPTOP_TEST_TRANSPORTS=1) starts each
# node's agent on this machine through `sh -c`, deploying it into --agent-dir with the probe
# and the upload over exec that any kind able to exec on its nodes uses (ssh/agent_deploy.h,
# ssh/transport_exec.c); its hosts are names only. Shown: (1) the kind is its file and one
# line of launcher/ssh/transport_kinds.c: no other source names it, the table without that
# line still compiles, and of the built objects only the table's refers to it; (2) without
# DDPTOP_TEST_TRANSPORTS it is not there (--transport fork is a usage error naming the kinds
# there are, the help does not list it); (3) a job runs through it: the agent uploaded into
# --agent-dir (checked with sha256sum there), 4 ranks on 2 nodes with torchrun's variables; a
# second run finds the agent and uploads nothing; an --agent-dir others can write is refused
# with the probe's words; (4) `ddptop check` through it: a FORK column, "through sh -c", the
# agent chosen by the node's uname -m; (5) the controller SIGKILLed, `ddptop attach` takes the
# run over through bridges the kind starts, and the logs are whole.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
D=$(mktemp -d /tmp/it_transport_kind.XXXXXX)
trap 'rj_cleanup; kill_marker_pids "$D/"; rm -rf "$D"' EXIT
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=
OBJ=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}/obj
KIND=launcher/ssh/kind_fork.c TABLE=launcher/ssh/transport_kinds.c

# 1. The kind is one file and one table line.
others=$(grep -rlE --include='*.[ch]' '\bkind_fork\b|"fork"' launcher tui | grep -vx "$KIND")
lines=$(grep -nE '^[[:space:]]*X\(fork\)' "$TABLE")
tap_check "no source names the fork kind but its file and the table: $(wc -l <"$KIND") lines + '$(echo $lines | sed 's/ *\\$//')'" \
    test -z "$others" -a "$(wc -l <<<"$lines")" = 1
sed '/^[[:space:]]*X(fork)/d' "$TABLE" >"$D/table.c"
removed=$(diff "$D/table.c" "$TABLE" | grep -c '^>')
if cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fsyntax-only -Ilauncher -Ilauncher/ssh "$D/table.c" 2>"$D/cc.out" &&
   [ "$removed" = 1 ]; then
    tap_ok "without its one line ($removed line of the diff) the table compiles as it is: nothing else depends on the kind"
else
    tap_fail "without its one line the table compiles as it is" "lines removed: $removed" "$(cat "$D/cc.out")"
fi
users=$(cd "$OBJ" && nm -A $(find launcher tui -name '*.o') 2>/dev/null | awk '$NF == "kind_fork" {print $1, $(NF-1)}' |
    sed 's/\.o:[0-9a-f]*/.o/; s/ [DdRr]$/ defines/; s/ U$/ uses/' | sort)
tap_check "of the built objects, kind_fork.o defines kind_fork and only transport_kinds.o uses it ($(echo $users))" \
    test "$users" = "$(printf 'launcher/ssh/kind_fork.o defines\nlauncher/ssh/transport_kinds.o uses')"

# 2. Outside the tests the kind is not there.
printf 'n1 slots=2\nn2 slots=2\n' >"$D/hosts"
DDPTOP_TEST_TRANSPORTS= "$DDPTOP" run "$D/hosts" --transport fork --headless -- true >"$D/usage.out" 2>&1
rc=$?
tap_check "without DDPTOP_TEST_TRANSPORTS, --transport fork is a usage error naming the kinds there are (exit $rc)" \
    sh -c "test $rc = 2 && grep -q \"ddptop run: --transport wants ssh, srun or tm, not 'fork'\" $D/usage.out"
tap_check "and --help does not list it" sh -c "! $DDPTOP run --help | grep -q fork"
export DDPTOP_TEST_TRANSPORTS=1
tap_check "with DDPTOP_TEST_TRANSPORTS=1 the help lists it with the others" \
    sh -c "$DDPTOP run --help | grep -q 'tm (PBS.s pbs_tmrsh; the default with' && $DDPTOP run --help | grep -q 'fork (the tests'"

# 3. A job through the kind: the agent deployed by the probe and the upload over exec.
agents=$D/agents
rj_run "$D/run.out" "$D/hosts" --transport fork --agent-dir "$agents" --headless --no-check \
    --log-dir "$D/logs" --run-id fork1 -- sh -c 'echo "rank $RANK of $WORLD_SIZE local $LOCAL_RANK node $GROUP_RANK"'
rj_expect_rc "a job through the fork kind: 4 ranks on 2 nodes succeed" 0
installed=$(ls "$agents" 2>/dev/null)
ours=${DDPTOP%/ddptop}/ddptop-agent-$(uname -m)
[ -f "$ours" ] || ours=${DDPTOP%/ddptop}/ddptop-agent   # PORTABLE=0 (make asan): this machine's own
tap_check "the agent was uploaded into --agent-dir under its hashed name, mode 0700 ($installed)" \
    sh -c "test \"\$(ls $agents | wc -l)\" = 1 && test \"\$(stat -c %a $agents/*)\" = 700 && cmp -s $agents/* $ours"
tap_check "rank 3: world 4, local rank 1 on node 1" \
    grep -qx 'rank 3 of 4 local 1 node 1' "$D/logs/fork1/attempt-0/rank-3.log"
before=$(stat -c %i.%Y "$agents"/*)
rj_run "$D/run2.out" "$D/hosts" --transport fork --agent-dir "$agents" --headless --no-check \
    --log-dir "$D/logs" --run-id fork2 -- true
rj_expect_rc "a second run through the kind" 0
tap_check "it found the agent the probe checked and uploaded nothing" test "$(stat -c %i.%Y "$agents"/*)" = "$before"

# The probe's refusals are the helper's, the same words over any kind: a directory others can
# write is refused before anything runs there.
mkdir -m 777 "$D/open"
rj_run "$D/open.out" "$D/hosts" --transport fork --agent-dir "$D/open" --headless --no-check \
    --log-dir "$D/logs" --run-id forkopen -- true
tap_check "an --agent-dir others can write is refused through the kind, as over SSH (exit $RJ_RC)" \
    sh -c "test $RJ_RC != 0 && grep -q 'the agent directory $D/open is writable by others (drwxrwxrwx).*(nothing was run)' $D/open.out &&
           test -z \"\$(ls -A $D/open)\""

# 4. ddptop check through the kind.
"$DDPTOP" check "$D/hosts" --transport fork --agent-dir "$agents" --json >"$D/check.json" 2>"$D/check.err"
rc=$?
tap_check "check --transport fork passes (exit $rc); each node 'through sh -c', its agent chosen by uname -m" \
    python3 -c "
import json, sys
r = json.load(open('$D/check.json'))
ssh = [h['checks']['ssh'] for h in r['hosts']]
sys.exit(not ($rc == 0 and len(ssh) == 2 and all(s['status'] == 'pass' and ' through sh -c, agent ' in s['detail']
             and s['agent']['chosen_by'] == 'uname -m' for s in ssh)))"
"$DDPTOP" check "$D/hosts" --transport fork --agent-dir "$agents" >"$D/check.out" 2>&1
tap_check "the table's first column is the kind's: FORK" grep -Eq '^HOST +ADDRESS +FORK +CLOCK' "$D/check.out"

# 5. The controller SIGKILLed: ddptop attach takes the run over through the kind's bridges.
cat >"$D/count.sh" <<'EOF'
#!/bin/sh
i=0
while [ $i -lt 300 ]; do echo "rank $RANK line $i"; i=$((i + 1)); sleep 0.01; done
EOF
chmod +x "$D/count.sh"
rj_start "$D/adopt.out" "$D/hosts" --transport fork --agent-dir "$agents" --headless --no-check \
    --log-dir "$D/logs" --run-id forkadopt -- "$D/count.sh"
printing() { [ "$(grep -c 'line 5$' "$D/adopt.out")" -ge 4 ]; }
if wait_until 30 printing; then
    kill -KILL "$RJ_PID"
    wait "$RJ_PID" 2>/dev/null
    RJ_PID=""
    timeout 60 "$DDPTOP" attach forkadopt --headless --log-dir "$D/logs" >"$D/attach.out" 2>&1 </dev/null
    rc=$?
    tap_check "ddptop attach took the run over through the fork kind's bridges: exit 0 ($rc)" test "$rc" = 0 ||
        grep -v '^\[r' "$D/attach.out" | tail -8 | sed 's/^/#   /'
    tap_check "it reconnected rather than finding the run ended" \
        sh -c "! grep -q 'has ended' $D/attach.out"
    bad=""
    for r in 0 1 2 3; do
        want=$(i=0; while [ $i -lt 300 ]; do echo "rank $r line $i"; i=$((i + 1)); done)
        [ "$(cat "$D/logs/forkadopt/attempt-0/rank-$r.log")" = "$want" ] || bad="$bad $r"
    done
    tap_check "every rank's log holds its 300 lines once, in order, across the takeover${bad:+ (not:$bad)}" test -z "$bad"
else
    tap_fail "the run prints before the SIGKILL" "$(tail -5 "$D/adopt.out")" "$(tail -5 "$D/adopt.out.err")"
fi
tap_check "no agent of this test outlived it" wait_until 10 no_marker_pids "$agents/"
tap_done
