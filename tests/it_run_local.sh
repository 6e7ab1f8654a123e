#!/usr/bin/env bash
# Integration: `ddptop run` without a hostfile (the local agent as a child, no SSH), headless,
# with real processes as ranks: torchrun's environment contract per rank, --env / --export /
# --workdir, exit codes (0, 1 when a rank fails and the other is stopped, 2 on usage errors),
# every line of every rank in its log file and in the headless output with its [rN host]
# prefix, a partial line reaching the log while the rank still runs, 100 MB from one rank
# (with a 10 MB line and no final newline) complete on disk while ddptop's RSS stays under
# 256 MB, a rank's last lines kept when it exits while ddptop is stopped (SIGSTOP), and
# arguments / env values that would be shell syntax arriving verbatim.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only: no server is started here
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_run_local.XXXXXX)
chmod 755 "$T"
HOG=""
cleanup() {
    [ -n "$HOG" ] && kill -KILL "$HOG" 2>/dev/null
    [ -n "$RJ_PID" ] && kill -CONT "$RJ_PID" 2>/dev/null   # 5c stops it
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
LOGS=$T/logs
RID=loc$$-$RANDOM   # run ids unique to this test run
mkdir -p "$T/m" "$T/wd"

if [ ! -x "$DDPTOP" ]; then tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; fi

# ---------------------------------------------------------------------------------------
# 1. The environment contract, --env, --export, --workdir, TORCHELASTIC_MAX_RESTARTS.
cat >"$T/env.py" <<'PY'
import json, os, sys
keys = ["RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
        "NNODES", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE",
        "DDPTOP_JOB_TOKEN"] + sys.argv[1:]
for k in keys:
    print("ENV %s=%s" % (k, json.dumps(os.environ.get(k))))
print("CWD " + os.getcwd())
PY
MP=$(sshd_pick_port)
DDPT_EXP_ONE=1 DDPT_EXP_TWO='x y' rj_run "$T/env.out" --headless --no-check --nproc-per-node 2 \
    --master-port "$MP" --log-dir "$LOGS" --run-id "$RID-env" --max-restarts 2 \
    --env FOO=bar --env 'WEIRD=a b;c' --export 'DDPT_EXP_.*' --workdir "$T/wd" \
    -- "$PY" "$T/env.py" FOO WEIRD DDPT_EXP_ONE DDPT_EXP_TWO
rj_expect_rc "two local ranks printing their environment: success" 0

# check_env RUN_DIR HEADLESS_OUT MASTER_PORT RUN_ID: the contract in both places.
check_env() {
    $PY - "$@" <<'PY'
import json, os, re, sys
run_dir, out, port, run_id = sys.argv[1:5]
want_common = {"GROUP_RANK": "0", "NODE_RANK": "0", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2",
               "NNODES": "1", "MASTER_PORT": port, "TORCHELASTIC_RESTART_COUNT": "0",
               "TORCHELASTIC_MAX_RESTARTS": "2", "TORCHELASTIC_RUN_ID": run_id,
               "FOO": "bar", "WEIRD": "a b;c", "DDPT_EXP_ONE": "1", "DDPT_EXP_TWO": "x y"}
bad = []
def parse(lines):
    env, cwd = {}, None
    for l in lines:
        m = re.match(r"^ENV ([A-Z_]+)=(.*)$", l)
        if m: env[m.group(1)] = json.loads(m.group(2))
        if l.startswith("CWD "): cwd = l[4:]
    return env, cwd
head = open(out, encoding="utf-8", errors="replace").read().splitlines()
envs = {}
for r in (0, 1):
    try:
        log = open(f"{run_dir}/attempt-0/rank-{r}.log", encoding="utf-8").read().splitlines()
    except OSError as e:
        bad.append(str(e)); continue
    env, cwd = parse(log)
    want = dict(want_common, RANK=str(r), LOCAL_RANK=str(r))
    for k, v in want.items():
        if env.get(k) != v: bad.append(f"rank {r} log: {k}={env.get(k)!r}, want {v!r}")
    if env.get("MASTER_ADDR") != "127.0.0.1":   # docs/run.md: 127.0.0.1 without a hostfile
        bad.append(f"rank {r}: MASTER_ADDR={env.get('MASTER_ADDR')!r}, want '127.0.0.1'")
    if not re.fullmatch(r"[0-9a-fA-F]{16,}", env.get("DDPTOP_JOB_TOKEN") or ""):
        bad.append(f"rank {r}: DDPTOP_JOB_TOKEN={env.get('DDPTOP_JOB_TOKEN')!r}")
    if not (env.get("TORCHELASTIC_ERROR_FILE") or "").startswith("/"):
        bad.append(f"rank {r}: TORCHELASTIC_ERROR_FILE={env.get('TORCHELASTIC_ERROR_FILE')!r}")
    if cwd != os.path.realpath(os.path.dirname(out) + "/wd"):
        bad.append(f"rank {r}: cwd {cwd!r}, want --workdir")
    envs[r] = env
    # The same lines on the headless output, prefixed with the rank and "localhost".
    hl = [l[len(f"[r{r} localhost] "):] for l in head if l.startswith(f"[r{r} localhost] ")]
    henv, _ = parse(hl)
    if henv != env: bad.append(f"rank {r}: headless lines differ from the log: {henv} vs {env}")
if len(envs) == 2:
    if envs[0]["DDPTOP_JOB_TOKEN"] != envs[1]["DDPTOP_JOB_TOKEN"]: bad.append("ranks got different tokens")
    if envs[0]["TORCHELASTIC_ERROR_FILE"] == envs[1]["TORCHELASTIC_ERROR_FILE"]: bad.append("ranks share an error file")
    if envs[0]["MASTER_ADDR"] != envs[1]["MASTER_ADDR"]: bad.append("ranks got different MASTER_ADDR")
    print(envs[0]["DDPTOP_JOB_TOKEN"])
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
}
if diag=$(check_env "$LOGS/$RID-env" "$T/env.out" "$MP" "$RID-env"); then
    tap_ok "env contract per rank (RANK .. DDPTOP_JOB_TOKEN), --env, --export, --workdir, in logs and headless"
    TOKEN1=$(printf '%s\n' "$diag" | tail -1)
else
    tap_fail "env contract per rank, --env, --export, --workdir" "$diag" "$(head -40 "$T/env.out")"
    TOKEN1=""
fi

# ---------------------------------------------------------------------------------------
# 2. A rank that exits 3 fails the job (exit 1); the other rank (sleeping 60 s) is stopped.
rj_run "$T/fail.out" --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-fail" --term-timeout 3 \
    -- sh -c 'if [ "$RANK" = 1 ]; then echo "rank one gives up"; exit 3; fi; exec sleep 60' "$T/marker-fail"
rj_expect_rc "rank 1 exits 3: the job fails" 1
if [ "$RJ_RC" = 1 ] && [ "$RJ_MS" -lt 20000 ]; then
    tap_ok "the sleeping rank 0 was stopped: job over in ${RJ_MS} ms (rank 0 would sleep 60 s)"
else
    tap_fail "the sleeping rank 0 was stopped promptly (${RJ_MS} ms)"
fi
ev_assert "root cause: rank 1 on localhost, exit code 3, its last line" "$LOGS/$RID-fail/events.jsonl" \
    "cause is not None" "cause['rank'] == 1" "cause['host'] == 'localhost'" \
    "cause.get('exit_code') == 3" "any('rank one gives up' in l for l in cause.get('last_lines', []))"
if grep -q 'root cause' "$T/fail.out" && grep 'root cause' "$T/fail.out" | grep -q 'rank 1'; then
    tap_ok "headless output names the root cause (rank 1)"
else
    tap_fail "headless output names the root cause (rank 1)" "$(tail -20 "$T/fail.out")"
fi
tap_check "no rank process left after the failed job" no_marker_pids "$T/marker-fail"

# A command that cannot start fails like exit code 127 (docs/run.md).
rj_run "$T/noexec.out" --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-noexec" -- "$T/no-such-program" arg
rj_expect_rc "a command that does not exist: the job fails" 1
ev_assert "root cause of a missing command: a rank with exit code 127" "$LOGS/$RID-noexec/events.jsonl" \
    "cause is not None" "cause['rank'] in (0, 1)" "cause.get('exit_code') == 127"

# SIGINT (Ctrl-C) to ddptop: every rank stopped, what they printed is on disk, exit 1.
rj_start "$T/int.out" --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-int" -- sh -c 'echo "before the signal $RANK"; exec sleep 60' "$T/marker-int"
both_printed() { [ "$(grep -c 'before the signal' "$T/int.out")" = 2 ]; }
if wait_until 20 both_printed; then
    kill -INT "$RJ_PID"
    rj_wait 20
    rj_expect_rc "SIGINT to ddptop while ranks run: exit 1" 1
    if grep -qx 'before the signal 0' "$LOGS/$RID-int/attempt-0/rank-0.log" 2>/dev/null &&
        grep -qx 'before the signal 1' "$LOGS/$RID-int/attempt-0/rank-1.log" 2>/dev/null; then
        tap_ok "SIGINT: the ranks' lines were flushed to their logs"
    else
        tap_fail "SIGINT: the ranks' lines were flushed to their logs" "$(ls -la "$LOGS/$RID-int/attempt-0" 2>&1)"
    fi
    tap_check "SIGINT: no rank process left" no_marker_pids "$T/marker-int"
else
    tap_fail "two ranks printed before SIGINT" "$(cat "$T/int.out" "$T/int.out.err")"
fi

# ---------------------------------------------------------------------------------------
# 3. Usage errors: exit 2 with a message, nothing launched.
usage_case() {
    local name=$1; shift
    rj_run "$T/usage.out" --limit 20 "$@"
    if [ "$RJ_RC" = 2 ] && grep -q . "$T/usage.out.err" && [ ! -e "$T/usage-logs" ]; then
        tap_ok "usage error, exit 2: $name"
    else
        tap_fail "usage error, exit 2: $name (exit $RJ_RC)" "stderr: $(head -5 "$T/usage.out.err")" \
            "logs: $(ls -R "$T/usage-logs" 2>&1 | head -5)"
    fi
    rm -rf "$T/usage-logs"
}
U=(--headless --no-check --log-dir "$T/usage-logs")
usage_case "unknown option" "${U[@]}" --no-such-option -- true
usage_case "--nproc-per-node 0" "${U[@]}" --nproc-per-node 0 -- true
usage_case "--master-port 70000" "${U[@]}" --master-port 70000 -- true
usage_case "--env without =" "${U[@]}" --env NOEQUALS -- true
usage_case "--run-id with a slash" "${U[@]}" --run-id 'a/b' -- true
usage_case "nothing after --" "${U[@]}" --
usage_case "hostfile that does not exist" "$T/no-such-hostfile" "${U[@]}" -- true

# ---------------------------------------------------------------------------------------
# 4. Every line: 5000 numbered stdout lines and 5000 stderr lines per rank, then a partial
#    line that must reach the log while the rank sleeps, then output without a final newline.
cat >"$T/lines.sh" <<'SH'
awk -v r="$RANK" 'BEGIN { for (i = 1; i <= 5000; i++) { printf "o r%d %d\n", r, i; printf "e r%d %d\n", r, i > "/dev/stderr" } }'
printf 'progress 50%%'
sleep 5
printf ' finished\n'
printf 'tail-no-newline'
SH
rj_start "$T/lines.out" --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-lines" -- sh "$T/lines.sh"
partial_in_log() {
    local r
    for r in 0 1; do grep -q 'progress 50%' "$LOGS/$RID-lines/attempt-0/rank-$r.log" 2>/dev/null || return 1; done
}
partial_on_screen() { [ "$(grep -c '\] progress 50%' "$T/lines.out")" = 2 ]; }
if wait_until 20 partial_on_screen && wait_until 2.5 partial_in_log; then
    if grep -q finished "$T/lines.out" "$LOGS/$RID-lines/attempt-0/"rank-*.log; then
        tap_fail "partial line reached log and screen while the rank still ran" "the rank had already finished"
    else
        tap_ok "a partial line ('progress 50%', no newline) reached the screen and the log while the rank sleeps"
    fi
else
    tap_fail "a partial line reached the screen and the log while the rank sleeps" \
        "screen: $(grep -c progress "$T/lines.out")" "$(ls -la "$LOGS/$RID-lines/attempt-0" 2>&1)"
fi
rj_wait 90
rj_expect_rc "10000 lines per rank: success" 0
if diag=$($PY - "$LOGS/$RID-lines" "$T/lines.out" <<'PY'
import sys
run_dir, out = sys.argv[1:3]
bad = []
head = open(out, "rb").read().split(b"\n")
for r in (0, 1):
    data = open(f"{run_dir}/attempt-0/rank-{r}.log", "rb").read()
    lines = data.split(b"\n")
    o = [l for l in lines if l.startswith(b"o r")]
    e = [l for l in lines if l.startswith(b"e r")]
    want_o = [b"o r%d %d" % (r, i) for i in range(1, 5001)]
    want_e = [b"e r%d %d" % (r, i) for i in range(1, 5001)]
    if o != want_o: bad.append(f"rank {r} log: {len(o)} stdout lines, want 5000 in order")
    if e != want_e: bad.append(f"rank {r} log: {len(e)} stderr lines, want 5000 in order")
    if b"progress 50% finished\n" not in data: bad.append(f"rank {r} log: partial line not joined")
    if not data.endswith(b"\ntail-no-newline"): bad.append(f"rank {r} log ends {data[-40:]!r}")
    if len(lines) != 10002: bad.append(f"rank {r} log: {len(lines) - 1} newlines, want 10001")
    p = b"[r%d localhost] " % r
    pe = b"[r%d localhost err] " % r
    ho = [l[len(p):] for l in head if l.startswith(p + b"o r")]
    he = [l[len(pe):] for l in head if l.startswith(pe + b"e r")]
    if ho != want_o: bad.append(f"rank {r} headless: {len(ho)} '[r{r} localhost] o' lines, want 5000 in order")
    if he != want_e: bad.append(f"rank {r} headless: {len(he)} '[r{r} localhost err] e' lines, want 5000 in order")
    if not any(l.startswith(p) and b"tail-no-newline" in l for l in head):
        bad.append(f"rank {r} headless: no tail-no-newline line")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
); then
    tap_ok "every line in its rank log (5000 stdout + 5000 stderr per rank, in order per stream, partial joined, no final newline)"
    tap_ok "every line on the headless output with its [rN localhost] / [rN localhost err] prefix"
else
    tap_fail "every line in its rank log and on the headless output" "$diag"
    tap_fail "every line on the headless output with its prefix (see above)"
fi

# ---------------------------------------------------------------------------------------
# 5. 100 MiB from rank 0: 90 MiB of 100-byte lines, then a 10 MiB line without a newline.
{ yes "$(printf 'L%098d' 0)" | head -c 94371840; head -c 10485760 /dev/zero | tr '\0' y; } >"$T/big.bin"
BIG_SUM=$(sha256sum <"$T/big.bin" | cut -d' ' -f1)
rj_start "$T/big.out" --discard --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-big" \
    -- sh -c 'if [ "$RANK" = 0 ]; then cat "$0"; fi; sleep 1' "$T/big.bin"
rj_wait 150
rj_expect_rc "100 MiB from one rank: success" 0
got=$(sha256sum <"$LOGS/$RID-big/attempt-0/rank-0.log" 2>/dev/null | cut -d' ' -f1)
size=$(stat -c %s "$LOGS/$RID-big/attempt-0/rank-0.log" 2>/dev/null)
if [ "$got" = "$BIG_SUM" ]; then
    tap_ok "rank 0 log is the 100 MiB byte for byte (sha256; 10 MiB line, no final newline)"
else
    tap_fail "rank 0 log is the 100 MiB byte for byte" "size ${size:-none}, want 104857600"
fi
if [ "$RJ_HWM_KB" -gt 0 ] && [ "$RJ_HWM_KB" -lt 262144 ]; then
    tap_ok "ddptop peak RSS (VmHWM) $((RJ_HWM_KB / 1024)) MiB < 256 MiB while 100 MiB went through"
else
    tap_fail "ddptop peak RSS under 256 MiB: VmHWM ${RJ_HWM_KB} kB"
fi
rm -f "$T/big.bin" "$LOGS/$RID-big/attempt-0/rank-0.log"

# ---------------------------------------------------------------------------------------
# 5b. The controller's CPU cannot keep up: for 8 s ddptop runs at nice 19 on one CPU next to a
#     busy loop, while its agent and rank (not reniced, not pinned) print 300 MB of 100-byte
#     lines as fast as they can. Nothing is lost, memory stays bounded (the agent and the
#     controller must push back instead of queueing everything), and the late heartbeats this
#     causes do not make the node "lost".
SLINE=$(printf 'S%098d' 7)
STARVE_SUM=$(yes "$SLINE" | head -c 300000000 | sha256sum | cut -d' ' -f1)
rj_start "$T/starve.out" --discard --headless --no-check --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-starve" \
    -- sh -c 'sleep 1; yes "$1" | head -c 300000000' "$T/marker-starve" "$SLINE"
agent_started() { [ -n "$(pgrep -P "$RJ_PID")" ]; }
if wait_until 10 agent_started; then
    renice -n 19 -p "$RJ_PID" >/dev/null
    taskset -a -p 1 "$RJ_PID" >/dev/null
    taskset 1 sh -c 'while :; do :; done' &
    HOG=$!
    starve_end=$(($(date +%s) + 8))
    while kill -0 "$RJ_PID" 2>/dev/null && [ "$(date +%s)" -lt "$starve_end" ]; do rj_sample; sleep 0.2; done
    kill -KILL "$HOG" 2>/dev/null; wait "$HOG" 2>/dev/null; HOG=""
    renice -n 0 -p "$RJ_PID" >/dev/null 2>&1
    taskset -a -p -c "0-$(($(nproc) - 1))" "$RJ_PID" >/dev/null 2>&1
fi
rj_wait 150
rj_expect_rc "300 MB from a rank while ddptop is starved of CPU for 8 s: success" 0
got=$(sha256sum <"$LOGS/$RID-starve/attempt-0/rank-0.log" 2>/dev/null | cut -d' ' -f1)
if [ "$got" = "$STARVE_SUM" ]; then
    tap_ok "starved controller: rank 0 log complete (300 MB, sha256)"
else
    tap_fail "starved controller: rank 0 log complete" \
        "size $(stat -c %s "$LOGS/$RID-starve/attempt-0/rank-0.log" 2>&1), want 300000000"
fi
if [ "$RJ_HWM_KB" -gt 0 ] && [ "$RJ_HWM_KB" -lt 262144 ]; then
    tap_ok "starved controller: ddptop peak RSS $((RJ_HWM_KB / 1024)) MiB < 256 MiB"
else
    tap_fail "starved controller: ddptop peak RSS under 256 MiB: VmHWM $((RJ_HWM_KB / 1024)) MiB for 300 MB of output"
fi
ev_assert "starved controller: no node_lost, failure or root cause" "$LOGS/$RID-starve/events.jsonl" \
    "not ev('node_lost') and not ev('failure') and not ev('root_cause')"
rm -f "$LOGS/$RID-starve/attempt-0/rank-0.log"

# ---------------------------------------------------------------------------------------
# 5c. A rank that ends while its output is paused: ddptop is stopped (SIGSTOP, 7 s) while rank 0
#     floods, so the agent stops reading its ranks' pipes; rank 1 then prints 300 KB (it fits in
#     its pipe) and exits. Once the controller is taken for silent (3 s) the agent reads again:
#     rank 1's lines, left in its pipe, must reach its log. (The agent closed a pipe whose rank
#     had exited over 2 s before without reading what it still held: rank 1's log came out
#     empty, exit 0, no event saying that output was lost.)
cat >"$T/paused_exit.sh" <<'SH'
#!/bin/sh
# $1: the file that says the controller is stopped
if [ "$RANK" = 0 ]; then
    head -c 40000000 /dev/zero | tr '\0' x | fold -w 99
else
    i=0
    while [ ! -e "$1" ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done
    sleep 0.2
    head -c 300000 /dev/zero | tr '\0' y | fold -w 99
fi
SH
rj_start "$T/pexit.out" --discard --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-pexit" -- sh "$T/paused_exit.sh" "$T/pexit-stopped"
rank0_going() { [ "$(stat -c %s "$LOGS/$RID-pexit/attempt-0/rank-0.log" 2>/dev/null || echo 0)" -gt 3000000 ]; }
if wait_until 30 rank0_going; then
    kill -STOP "$RJ_PID"
    touch "$T/pexit-stopped"
    sleep 7
    kill -CONT "$RJ_PID"
else
    touch "$T/pexit-stopped"
fi
rj_wait 90
rj_expect_rc "a rank exits while ddptop is stopped (SIGSTOP 7 s): success" 0
for r in 0 1; do
    want=$([ $r = 0 ] && echo 40404040 || echo 303030)
    size=$(stat -c %s "$LOGS/$RID-pexit/attempt-0/rank-$r.log" 2>/dev/null)
    if [ "$size" = "$want" ]; then
        tap_ok "stopped controller: rank $r log complete ($want bytes)"
    else
        tap_fail "stopped controller: rank $r log complete" "size ${size:-none}, want $want" \
            "$(grep -i 'drop\|silent\|stopped' "$LOGS/$RID-pexit/events.jsonl" 2>/dev/null | head -3)"
    fi
done
rm -f "$LOGS/$RID-pexit/attempt-0/rank-0.log"

# ---------------------------------------------------------------------------------------
# 6. Shell syntax in arguments and env values: nothing runs, every value arrives verbatim.
INJ_ARGS=('$(touch '"$T"'/m/a1)' '`touch '"$T"'/m/a2`' '; touch '"$T"'/m/a3' '&& touch '"$T"'/m/a4 #'
          "it's \"quoted\" \\" $'two\nlines; touch '"$T"'/m/a5' '-rf' '--help' '| touch '"$T"'/m/a6'
          '$HOME ${PATH} * ~' '' ' leading space')
INJ_ENV=$'$(touch '"$T"$'/m/e1);`touch '"$T"$'/m/e2`\'"\n; touch '"$T"'/m/e3'
cat >"$T/argv.py" <<'PY'
import json, os, sys
print("ARGV " + json.dumps(sys.argv[1:]))
print("INJ " + json.dumps(os.environ.get("INJ")))
print("TOKEN " + os.environ.get("DDPTOP_JOB_TOKEN", ""))
PY
rj_run "$T/inj.out" --headless --no-check --nproc-per-node 2 --master-port "$(sshd_pick_port)" \
    --log-dir "$LOGS" --run-id "$RID-inj" --env "INJ=$INJ_ENV" -- "$PY" "$T/argv.py" "${INJ_ARGS[@]}"
rj_expect_rc "arguments and env values with shell syntax: success" 0
want_argv="ARGV $($PY -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${INJ_ARGS[@]}")"
want_env="INJ $($PY -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$INJ_ENV")"
ok=1
for r in 0 1; do
    f=$LOGS/$RID-inj/attempt-0/rank-$r.log
    grep -qxF -- "$want_argv" "$f" 2>/dev/null || ok=0
    grep -qxF -- "$want_env" "$f" 2>/dev/null || ok=0
done
if [ $ok = 1 ]; then tap_ok "every argument and the env value arrived verbatim (quotes, newline, \$(), backticks, ;, leading -)"
else tap_fail "arguments and env value arrive verbatim" "want: $want_argv" "want: $want_env" \
    "got: $(cat "$LOGS/$RID-inj/attempt-0/rank-0.log" 2>&1 | head -5)"; fi
if [ -z "$(ls -A "$T/m")" ]; then tap_ok "no injected command ran (no marker file)"
else tap_fail "no injected command ran" "markers: $(ls "$T/m")"; fi
TOKEN2=$(sed -n 's/^TOKEN //p' "$LOGS/$RID-inj/attempt-0/rank-0.log" 2>/dev/null)
if [ -n "$TOKEN1" ] && [ -n "$TOKEN2" ] && [ "$TOKEN1" != "$TOKEN2" ]; then
    tap_ok "DDPTOP_JOB_TOKEN is fresh per run"
else
    tap_fail "DDPTOP_JOB_TOKEN is fresh per run ('$TOKEN1' then '$TOKEN2')"
fi

tap_done
