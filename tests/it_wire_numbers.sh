#!/usr/bin/env bash
# it_wire_numbers: hostile numbers on the wire, both ways (issue 18: "XID -2147483648").
#  1. A stand-in for ddptop-agent (a Python script, named as such, that speaks the protocol)
#     answers the real controller with 1e300, -1e300, 2.5 and strings where ranks, pids, message
#     numbers, exit codes, signals, GPU indexes, XIDs, temperatures and counts go, among valid
#     messages. The real ddptop (a copy, so that its sibling ddptop-agent is the stand-in) must
#     ignore each bad number, say the first five naming the node and the field, say that it
#     stops saying them, and still run the job: the valid XID is told, the rank's output is in
#     its log, the rank's real exit code is the verdict.
#  2. A fake controller sends the real ddptop-agent requests with such numbers: every one is
#     refused with the protocol's message, nothing is done with it, and the agent goes on.
# Run with BUILD=build-asan (make asan: address, undefined and float-cast-overflow) the same
# script catches any conversion of an out-of-range double: the programs abort.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/build}
tmp=$(mktemp -d /tmp/ddptop-it-wire.XXXXXX)
cleanup() {
    if [ -f "$tmp/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$tmp/pids"
    fi
    [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
touch "$tmp/pids"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=0 NO_COLOR=1

# ---- 1. the real controller against a hostile agent ----------------------------------------
mkdir -p "$tmp/bin" "$tmp/logs"
cp "$BUILD_DIR/ddptop" "$tmp/bin/ddptop"
# TEST DOUBLE of ddptop-agent: protocol 3, one node, one rank that prints "hi" and exits 3.
cat >"$tmp/bin/ddptop-agent" <<'PY'
#!/usr/bin/python3
import json, os, sys
pids = os.environ["FAKE_AGENT_PIDS"]
with open(pids, "a") as f:
    f.write("%d\n" % os.getpid())
def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
say('{"ev":"hello","protocol":3,"version":"0.1.0","arch":"x86_64","hostname":"fake","pid":%d}' % os.getpid())
for raw in sys.stdin:
    req = json.loads(raw)
    op, rid = req.get("op"), req.get("id")
    if op == "gpu_watch":
        say('{"ev":"gpu_watch","id":%d,"ok":true}' % rid)
        # the XIDs first: the first five bad numbers of a node are said
        say('{"ev":"gpu","mono_ns":5,"gpus":[{"index":0,"name":"H100","util":50}],'
            '"xids":[[0,1e300],[0,79]]}')
        say('{"ev":"gpu","mono_ns":-1e300,"gpus":[{"index":1e300,"name":"X"},'
            '{"index":0,"name":"H100","util":1e300,"mem_util":-1e300,"temp_c":1e300,"power_w":-5,'
            '"sm_mhz":2.5,"mem_used_mib":1e300,"throttle":1e300,"ecc_uncorrected":-1e300,'
            '"pids":[[1e300,2,3],["x",1],[7,-1e300],[9,-1,100]]},{"index":2.5},{"index":-1}],'
            '"xids":[[0,-2147483649],["a","b"],[1e300,1],[0],[],7]}')
    elif op == "spawn":
        say('{"ev":"spawned","id":%d,"ranks":[{"rank":1e300,"pid":5},{"rank":-1e300},{"rank":0,"pid":1e300}]}' % rid)
        say('{"ev":"status","mono_ns":1e300,"ranks":[{"rank":0,"cpu_s":1e300,"state":"R"},{"rank":1e300}]}')
        # fast path (flat) and tree path (a nested member) with bad rank, q and attempt
        say('{"ev":"out","rank":1e300,"q":1,"a":0,"s":"o","t":"bad rank\\n","f":""}')
        say('{"ev":"out","rank":0,"q":1e300,"a":0,"s":"o","t":"bad q\\n","f":""}')
        say('{"ev":"out","rank":0,"q":3,"a":-1e300,"s":"o","t":"bad a\\n","f":"","x":[1]}')
        say('{"ev":"out","rank":0,"q":1,"a":0,"s":"o","t":"hi\\n","f":"",'
            '"dropped":{"lines":1e300,"bytes":-1e300}}')
        say('{"ev":"notice","signal":"SIGUSR1","passed_to":1e300}')
        say('{"ev":"stopped","id":1e300}')
        say('{"ev":"exit","rank":1e300,"code":3,"q":2}')
        say('{"ev":"exit","rank":0,"pid":5,"attempt":0,"code":3,"signal":null,"signo":null,'
            '"by_us":false,"mono_ns":1e300,"error_file":null,"oom_kills":1e300,"q":2}')
    elif op == "stop":
        say('{"ev":"stopped","id":%d}' % rid)
    elif op == "exit":
        say('{"ev":"exit","id":%d}' % rid)
        break
    elif op == "ping":
        say('{"ev":"pong","id":%d}' % rid)
PY
chmod +x "$tmp/bin/ddptop-agent"
(cd "$tmp" && FAKE_AGENT_PIDS="$tmp/pids" timeout 60 "$tmp/bin/ddptop" run --headless --no-check \
    --log-dir "$tmp/logs" --run-id hostile -- true >"$tmp/run.out" 2>"$tmp/run.err")
rc=$?
tap_check "controller against the hostile agent: the job ends on the rank's own exit code 3 (ddptop exit $rc, 1 wanted)" \
    test "$rc" = 1
EV=$tmp/logs/hostile/events.jsonl
said() { grep -qF -- "$1" "$EV"; }
tap_check "the first bad number is said, naming the node and the field: 'node localhost: gpu message: xid 1e+300 out of range; ignored'" \
    said 'node localhost: gpu message: xid 1e+300 out of range; ignored'
tap_check "then the next four, in order (index, util, mem_util, mem_used_mib)" \
    sh -c "grep -o 'gpu message: [a-z_]* [^ ]* out of range' '$EV' | sed -n 2,5p | tr '\n' '|' |
        grep -qx 'gpu message: index 1e+300 out of range|gpu message: util 1e+300 out of range|gpu message: mem_util -1e+300 out of range|gpu message: mem_used_mib 1e+300 out of range|'"
tap_check "then once that further ones are not said: five such events in all" \
    sh -c "[ \"\$(grep -c 'out of range; ignored' '$EV')\" = 5 ] &&
        grep -q 'node localhost: more numbers out of range in its agent.s messages are ignored without a word (5 said)' '$EV'"
tap_check "no event made of a bad count ('0 lines (0 bytes)', 'its 0 rank')" \
    sh -c "! grep -Eq '0 lines \\(0 bytes\\)|its 0 rank' '$EV'"
tap_check "the valid XID among the bad ones is told: 'GPU 0 on localhost: XID 79 (GPU has fallen off the bus)'" \
    said 'XID 79 (GPU has fallen off the bus)'
tap_check "no XID from a bad pair is told (no 'XID -2147483648', no 'XID 1')" \
    sh -c "! grep -Eq 'XID (-|1[^0-9])' '$EV'"
tap_check "the rank's output is in its log, and only its valid line" \
    test "$(cat "$tmp/logs/hostile/attempt-0/rank-0.log" 2>/dev/null)" = hi
tap_check "the root cause is the rank's exit code 3" \
    grep -q 'root cause: rank 0 on localhost exited with code 3' "$tmp/run.out"
tap_check "a bad oom_kills is ignored: no event blames the OOM killer" \
    sh -c "! grep -q 'OOM killer' '$EV'"
tap_check "no sanitizer report from the controller" \
    sh -c "! grep -Eq 'runtime error|AddressSanitizer' '$tmp/run.err' '$tmp/run.out'"

if [ "$TAP_FAILED" != 0 ]; then
    sed 's/^/#   /' "$tmp/run.out" "$tmp/run.err" | tail -30
    grep -o '"text":"[^"]*"' "$EV" | sed 's/^/#   /'
fi

# ---- 2. the real agent against a hostile controller ----------------------------------------
cat >"$tmp/ctl.py" <<'PY'
import json, subprocess, sys, time
agent, pids = sys.argv[1], sys.argv[2]
p = subprocess.Popen([agent], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True, cwd="/")
open(pids, "a").write("%d\n" % p.pid)
hello = json.loads(p.stdout.readline())
reqs = [
    ('{"op":"listen","id":1,"port":1e300}', '"port" must be an integer from 0 to 65535'),
    ('{"op":"listen","id":2,"port":-1e300}', '"port" must be an integer from 0 to 65535'),
    ('{"op":"listen","id":3,"port":2.5}', '"port" must be an integer from 0 to 65535'),
    ('{"op":"connect","id":4,"addr":"127.0.0.1","port":1,"nonce":"a","timeout_ms":1e300}',
     '"timeout_ms" must be an integer from 1 to 600000'),
    ('{"op":"read","id":5,"path":"/etc/hostname","offset":1e300}', '"offset" must be an integer from 0 to'),
    ('{"op":"read","id":6,"path":"/etc/hostname","offset":9223372036854775807}', '"offset" must be an integer from 0 to'),
    ('{"op":"stop","id":7,"term_timeout_ms":-1e300}', '"term_timeout_ms" must be an integer'),
    ('{"op":"gpu_watch","id":8,"interval_ms":1e300}', '"interval_ms" must be 0 (stop) or'),
    ('{"op":"gpu_watch","id":9,"interval_ms":2.5}', '"interval_ms" must be 0 (stop) or'),
    ('{"op":"stacks","id":10,"rank":1e300}', '"rank" must be a rank number'),
    ('{"op":"signal","id":11,"sig":"TERM","ranks":[1e300]}', '"ranks" must be an array of rank numbers'),
    ('{"op":"spawn","id":12,"attempt":0,"argv":["true"],"ranks":[{"rank":1e300}]}',
     'ranks[0] must be an object with "rank", an integer from 0 to 2147483647'),
    ('{"op":"spawn","id":13,"attempt":1e300,"argv":["true"],"ranks":[{"rank":0}]}',
     '"attempt" must be an integer from 0 to 2147483647'),
    ('{"op":"spawn","id":14,"attempt":0,"argv":["true"],"grace_ms":1e300,"ranks":[{"rank":0}]}',
     '"grace_ms" must be an integer from 0 to'),
    ('{"op":"spawn","id":15,"attempt":0,"argv":["true"],"node":-1e300,"ranks":[{"rank":0}]}',
     '"node" must be an integer from 0 to 2147483647'),
]
bad = []
for line, want in reqs:
    p.stdin.write(line + "\n")
    p.stdin.flush()
    ans = json.loads(p.stdout.readline())
    rid = json.loads(line)["id"]
    if ans.get("ev") != "error" or ans.get("id") != rid or want not in ans.get("error", ""):
        bad.append("%s -> %s (wanted an error with %r)" % (line, json.dumps(ans), want))
# acknowledgements and resume points out of range are ignored, the agent goes on
for line in ('{"op":"ping","id":20,"ack":{"0":1e300,"1":-1e300,"2":2.5}}',
             '{"op":"clock","id":21}', '{"op":"exit","id":22}'):
    p.stdin.write(line + "\n")
    p.stdin.flush()
answers = [json.loads(l) for l in p.stdout.read().splitlines() if l]
evs = [(a.get("ev"), a.get("id")) for a in answers]
for want in (("pong", 20), ("clock", 21), ("exit", 22)):
    if want not in evs:
        bad.append("no %s answer after the bad numbers: %s" % (want, evs))
rc = p.wait(timeout=20)
err = p.stderr.read()
if rc != 0 or "runtime error" in err or "AddressSanitizer" in err:
    bad.append("agent exit %d, stderr: %s" % (rc, err[-2000:]))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
out=$(timeout 60 /usr/bin/python3 "$tmp/ctl.py" "$BUILD_DIR/ddptop-agent" "$tmp/pids" 2>&1)
rc=$?
if [ "$rc" = 0 ]; then
    tap_ok "agent: 15 requests with 1e300, -1e300, 2.5 and 2^63-1 are refused with the protocol's message; it goes on and exits 0"
else
    tap_fail "agent: requests with bad numbers are refused; it goes on and exits 0" "$out"
fi

tap_done
