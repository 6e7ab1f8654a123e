#!/usr/bin/env bash
# it_agent_run: the run side of the real ddptop-agent, driven over stdin/stdout the way the
# controller drives it: spawn ranks (environment, working directory, pids), their output as
# out messages (order per stream, partial lines, 64 KiB pieces, bytes that are not text), exit
# codes and signals, stop with SIGKILL after term_timeout_ms, signal, status heartbeats, the
# error file, stacks (gdb and the /proc fallback), list and read of the flight recorder's dumps
# (and their directory made at spawn), exec failures, and no orphans: stdin EOF,
# SIGKILL and SIGTERM of the agent, and the request watchdog each leave no process of a rank's
# group (grandchildren included) within 5 s. The driver is Python (standard library only).
set -u
. "$(dirname "$0")/lib/tap.sh"

AGENT="$DDPTOP_BUILD/ddptop-agent"
tmp=$(mktemp -d /tmp/ddptop-it-run.XXXXXX)
cleanup() {
    # The driver wrote every agent's pid and every rank's process group here.
    if [ -f "$tmp/pgids" ]; then
        while read -r g; do kill -9 -- "-$g" 2>/dev/null; done <"$tmp/pgids"
    fi
    if [ -f "$tmp/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$tmp/pids"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
touch "$tmp/pids" "$tmp/pgids"

if [ ! -x "$AGENT" ]; then
    tap_fail "agent binary exists" "missing $AGENT: run make first"
    tap_done
    exit 1
fi

# A PATH without gdb (or py-spy) for the /proc fallback of stacks.
mkdir -p "$tmp/nogdb" "$tmp/work"
for t in sh sleep; do ln -s "$(command -v $t)" "$tmp/nogdb/$t"; done
# A slow fake gdb: the agent's loop must go on while a stack dump runs.
mkdir -p "$tmp/slowgdb"
printf '#!/bin/sh\nsleep 3\necho "#0  fake_frame () at fake.c:1"\n' >"$tmp/slowgdb/gdb"
chmod +x "$tmp/slowgdb/gdb"

cat >"$tmp/driver.py" <<'PY'
import base64, json, os, select, signal, subprocess, sys, time

AGENT, TMP = os.environ["AGENT"], os.environ["TMP"]
import tap
from tap import check, note


class Agent:
    def __init__(self, env=None):
        self.p = subprocess.Popen([AGENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env or os.environ)
        note("pids", self.p.pid)
        self.buf = b""
        self.msgs = []      # every message, in arrival order, with its arrival time
        self.next_id = 1

    def pump(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], max(0, timeout))
        if not r:
            return False
        chunk = os.read(self.p.stdout.fileno(), 1 << 20)
        if not chunk:
            raise EOFError("agent closed its stdout")
        self.buf += chunk
        now = time.monotonic()
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            m = json.loads(line)
            m["_t"] = now
            self.msgs.append(m)
            if m.get("ev") == "spawned":
                for r in m.get("ranks", []):
                    if "pid" in r and "error" not in r:
                        note("pgids", r["pid"])
        return True

    def wait(self, pred, timeout=10.0):
        """The first message matching pred (from all received so far), waiting for it."""
        end = time.monotonic() + timeout
        seen = 0
        while True:
            for m in self.msgs[seen:]:
                if pred(m):
                    return m
            seen = len(self.msgs)
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                self.pump(left)
            except EOFError:
                return None

    def send(self, obj):
        obj = dict(obj, id=self.next_id)
        self.next_id += 1
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()
        return obj["id"]

    def request(self, obj, timeout=10.0):
        i = self.send(obj)
        return self.wait(lambda m: m.get("id") == i, timeout) or {}

    def outs(self, rank, s=None):
        return [m for m in self.msgs if m.get("ev") == "out" and m.get("rank") == rank and
                (s is None or m.get("s") == s)]

    def exit_of(self, rank, timeout=10.0):
        return self.wait(lambda m: m.get("ev") == "exit" and m.get("rank") == rank, timeout) or {}

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()

def data(m):
    return base64.b64decode(m["b64"]) if "b64" in m else m["t"].encode()

def lines(msgs, text=False):
    """The rank's lines out of its out messages (protocol 2): f "" holds whole lines, each
    ending with its newline; f "p" or "s" one piece of a line. [(f, bytes)], or [str] (text)."""
    out = []
    for m in msgs:
        d, f = data(m), m.get("f", "")
        if f:
            out.append((f, d))
            continue
        check_block(m, d)
        out.extend(("", l) for l in d[:-1].split(b"\n"))
    return [l.decode() for f, l in out] if text else out

bad_blocks = []
def check_block(m, d):
    if not d.endswith(b"\n"):
        bad_blocks.append(m)

def spawn(ag, argv, ranks, **kw):
    req = dict({"op": "spawn", "argv": argv, "ranks": ranks}, **kw)
    return ag.request(req)

def group(pgid):
    """Processes of process group pgid, zombies excluded (ps -o pgid)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
    return [int(f[0]) for f in (l.split() for l in out.splitlines())
            if len(f) == 3 and int(f[1]) == pgid and not f[2].startswith("Z")]

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])

def wait_gone(pids, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False

base_env = dict(os.environ, AGENT_ONLY="from-agent", KEEP_ME="kept")
ag = Agent(base_env)
hello = ag.wait(lambda m: m.get("ev") == "hello", 5) or {}
check("hello first", hello.get("ev") == "hello")

# ---- spawn: environment, working directory, pids, order per stream ----
script = ('echo "pid=$$ rank=$RANK local=$LOCAL_RANK ws=$WORLD_SIZE keep=$KEEP_ME '
          'agent_only=${AGENT_ONLY-unset} pwd=$(pwd) ef=${TORCHELASTIC_ERROR_FILE:+set}"; '
          'i=0; while [ $i -lt 200 ]; do echo "o$i"; echo "e$i" >&2; i=$((i+1)); done')
ranks = [{"rank": r, "local_rank": r, "env": {"RANK": str(r), "LOCAL_RANK": str(r),
          "WORLD_SIZE": "2", "AGENT_ONLY": None}} for r in (0, 1)]
sp = spawn(ag, ["sh", "-c", script], ranks, attempt=0, workdir=TMP + "/work", watchdog_ms=0)
pids = {r["rank"]: r.get("pid") for r in sp.get("ranks", [])}
check("spawn answers each rank with its pid", sp.get("ev") == "spawned" and
      all(isinstance(pids.get(r), int) and pids[r] > 0 for r in (0, 1)), sp)
e0, e1 = ag.exit_of(0), ag.exit_of(1)
for r in (0, 1):
    out = lines(ag.outs(r, "o"), text=True)
    err = lines(ag.outs(r, "e"), text=True)
    want = (f"pid={pids.get(r)} rank={r} local={r} ws=2 keep=kept agent_only=unset "
            f"pwd={TMP}/work ef=set")
    check(f"rank {r}: the request's env (null removes), the agent's env, workdir and the error "
          "file variable arrive; the reported pid is the rank's", out[:1] == [want], out[:1], want)
    check(f"rank {r}: every stdout line arrives in order",
          out[1:] == [f"o{i}" for i in range(200)], out[1:6], len(out))
    check(f"rank {r}: every stderr line arrives in order, tagged e",
          err == [f"e{i}" for i in range(200)], err[:5], len(err))
check("exit code 0, no signal, not by us, after the rank's last line",
      all(e.get("code") == 0 and e.get("signal") is None and e.get("by_us") is False for e in (e0, e1))
      and max(m["_t"] for m in ag.outs(0)) <= e0.get("_t", 0), e0, e1)
check("exit carries mono_ns as an integer and the attempt",
      isinstance(e0.get("mono_ns"), int) and e0.get("attempt") == 0, e0)

# ---- several ranks at once, each a case of its own ----
t_spawn = time.monotonic()
spawn(ag, ["sh", "-c", "printf abc; sleep 30"], [{"rank": 2}])
t_partial = time.monotonic()
py_long = ("import sys; s=''.join(chr(97+i%26) for i in range(204800)); "
           "sys.stdout.write(s+'\\n'+'after\\n')")
spawn(ag, ["python3", "-c", py_long], [{"rank": 3}])
spawn(ag, ["sh", "-c", r"printf 'a\377b\n'; printf 'x\000y\n'; printf 'caf\303\251 \033[31mred\t10%%\r20%%\n'"],
      [{"rank": 4}])
spawn(ag, ["sh", "-c", "kill -SEGV $$"], [{"rank": 5}])
spawn(ag, ["sh", "-c", 'echo "$TORCHELASTIC_ERROR_FILE"; printf \'{"message": "boom at step 3"}\' >"$TORCHELASTIC_ERROR_FILE"; exit 7'],
      [{"rank": 6}])
busy = ('echo \'{"event":"step","v":1,"rank":7,"step":42,"loss":2.5}\'; '
        'i=0; while :; do i=$((i+1)); done')
spawn(ag, ["sh", "-c", busy], [{"rank": 7}])
sp8 = spawn(ag, ["sleep", "30"], [{"rank": 8}])
bad = spawn(ag, ["no-such-command-xyz"], [{"rank": 9}])
badwd = spawn(ag, ["true"], [{"rank": 10}], workdir=TMP + "/no/such/dir")

p = ag.wait(lambda m: m.get("ev") == "out" and m.get("rank") == 2, 3) or {}
took = p.get("_t", 99) - t_partial
check("a partial line (no newline) arrives flagged p within 0.5 s",
      p.get("t") == "abc" and p.get("f") == "p" and took < 0.6, p, took)

e3 = ag.exit_of(3)
o3 = ag.outs(3, "o")
l3 = lines(o3)
want = "".join(chr(97 + i % 26) for i in range(204800)).encode()
check("a 200 KiB line arrives as 3 pieces of 64 KiB flagged s and its whole end, that "
      "concatenate to the line",
      [f for f, l in l3[:4]] == ["s", "s", "s", ""] and b"".join(l for f, l in l3[:4]) == want and
      [len(l) for f, l in l3[:3]] == [65536] * 3 and all("t" in m for m in o3),
      [(f, len(l)) for f, l in l3])
check("the line after the long one arrives whole", l3[4:] == [("", b"after")], l3[4:])

ag.exit_of(4)
o4 = ag.outs(4, "o")
l4 = lines(o4)
b64 = [data(m) for m in o4 if "b64" in m]
check("invalid UTF-8 arrives as b64 with the exact bytes, that line alone",
      l4[:1] == [("", b"a\xffb")] and b"a\xffb\n" in b64, o4)
check("a NUL byte arrives as b64 with the exact bytes, that line alone",
      l4[1:2] == [("", b"x\x00y")] and b"x\x00y\n" in b64, o4)
check("valid UTF-8 with escapes, tabs and \\r stays text, byte for byte",
      l4[2:] == [("", "caf\u00e9 \x1b[31mred\t10%\r20%".encode())] and
      any(m.get("t", "").endswith("caf\u00e9 \x1b[31mred\t10%\r20%\n") for m in o4), o4)

e5 = ag.exit_of(5)
check("a rank killed by SIGSEGV: signal SIGSEGV, signo 11, code null, by_us false",
      e5.get("signal") == "SIGSEGV" and e5.get("signo") == 11 and e5.get("code") is None and
      e5.get("by_us") is False, e5)

e6 = ag.exit_of(6)
check("the rank's error file content comes with its exit (code 7)",
      e6.get("code") == 7 and e6.get("error_file") == '{"message": "boom at step 3"}', e6)
ef6 = (lines(ag.outs(6, "o"), text=True) or [""])[0]
check("the agent removes the error file it chose (in its own directory, tests/it_node_files.sh)",
      ef6.endswith("/a0-r6.error.json") and not os.path.lexists(ef6), ef6)

check("exec failure: a per-rank error naming the command",
      bad.get("ranks") == [{"rank": 9, "error": "cannot execute 'no-such-command-xyz': No such file or directory"}], bad)
check("a workdir that does not exist: a per-rank error naming it",
      badwd.get("ranks", [{}])[0].get("error") ==
      f"cannot change to workdir '{TMP}/no/such/dir': No such file or directory", badwd)
e9, e10 = ag.exit_of(9), ag.exit_of(10)
o9 = [m for m in ag.outs(9)]
check("exec failure: a line on the rank's stderr says why, then its exit with code 127",
      [(m.get("s"), m.get("t")) for m in o9] ==
      [("e", "ddptop-agent: cannot execute 'no-such-command-xyz': No such file or directory\n")] and
      e9.get("code") == 127 and e9.get("signal") is None and e9.get("by_us") is False and
      o9[0]["_t"] <= e9["_t"] and e9["_t"] >= bad.get("_t", 99), o9, e9)
check("a workdir that does not exist: the stderr line names it, exit code 127",
      lines(ag.outs(10, "e"), text=True) ==
      [f"ddptop-agent: cannot change to workdir '{TMP}/no/such/dir': No such file or directory"] and
      e10.get("code") == 127, ag.outs(10), e10)
e = ag.request({"op": "spawn", "argv": [], "ranks": [{"rank": 11}]})
check("spawn with an empty argv is an error", e.get("ev") == "error" and "argv" in e.get("error", ""), e)
e = ag.request({"op": "spawn", "argv": ["true"], "ranks": [{"rank": 11, "env": {"A": 1}}]})
check("an env value that is not a string is an error naming it",
      e.get("ev") == "error" and "env.A" in e.get("error", ""), e)
dup = spawn(ag, ["true"], [{"rank": 8}])
check("spawning a rank that still runs is refused for that rank",
      "error" in dup.get("ranks", [{}])[0], dup)

# ---- status heartbeat ----
t0 = time.monotonic()
sts = []
while len(sts) < 3 and time.monotonic() - t0 < 5:
    m = ag.wait(lambda m: m.get("ev") == "status" and m not in sts and m["_t"] >= t0, 5)
    if m:
        sts.append(m)
gaps = [b["_t"] - a["_t"] for a, b in zip(sts, sts[1:])]
check("status arrives every second", len(sts) == 3 and all(0.6 < g < 1.5 for g in gaps), gaps)
r7 = [x for x in (sts[-1].get("ranks", []) if sts else []) if x.get("rank") == 7]
r7a = [x for x in (sts[0].get("ranks", []) if sts else []) if x.get("rank") == 7]
r8 = [x for x in (sts[-1].get("ranks", []) if sts else []) if x.get("rank") == 8]
check("status: a busy rank is alive, state R, cpu_s growing, step from its metrics line",
      r7 and r7[0].get("alive") is True and r7[0].get("state") == "R" and r7a and
      r7[0].get("cpu_s", 0) > r7a[0].get("cpu_s", 0) > 0 and r7[0].get("step") == 42 and isinstance(r7[0].get("last_out_ms"), (int, float)), r7a, r7)
check("status: a sleeping rank is state S, with its pid and no step",
      r8 and r8[0].get("state") == "S" and r8[0].get("pid") == sp8["ranks"][0]["pid"] and
      "step" not in r8[0] and r8[0].get("last_out_ms") is None, r8)
check("status: ranks already reported exited are not listed",
      sts and not [x for x in sts[-1]["ranks"] if x.get("rank") in (0, 1, 5)], sts[-1:] )

# ---- stacks ----
s = ag.request({"op": "stacks", "rank": 8}, 30)
check("stacks of a sleeping rank: gdb's backtrace", s.get("tool") == "gdb" and "#0" in s.get("text", "")
      and s.get("rank") == 8, {k: (v[:600] if isinstance(v, str) else v) for k, v in s.items()})
e = ag.request({"op": "stacks", "rank": 99})
check("stacks of a rank that does not run: an error", e.get("ev") == "error", e)

# ---- signal ----
sig = ag.request({"op": "signal", "sig": "KILL", "ranks": [7]})
e7 = ag.exit_of(7)
check("signal KILL to one rank: ok, and it exits by SIGKILL, by_us true",
      sig.get("ok") is True and sig.get("ranks") == [7] and e7.get("signal") == "SIGKILL" and
      e7.get("by_us") is True, sig, e7)
e = ag.request({"op": "signal", "sig": "BOGUS"})
check("signal with an unknown sig is an error", e.get("ev") == "error", e)

# ---- a keeper killed from outside: its rank dies with it and the exit says so ----
sp14 = spawn(ag, ["sleep", "30"], [{"rank": 14}])
pid14 = sp14.get("ranks", [{}])[0].get("pid")
os.kill(ppid(pid14), signal.SIGKILL)
e14 = ag.exit_of(14)
check("a keeper SIGKILLed from outside: its rank dies too, and the exit has an error, code null",
      e14.get("code") is None and "keeper" in e14.get("error", "") and wait_gone([pid14], 2), e14)

# ---- stop: SIGTERM, SIGKILL after term_timeout_ms for a rank that ignores TERM ----
ign = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
       "print('ready', flush=True); time.sleep(60)")
spawn(ag, ["python3", "-c", ign], [{"rank": 12}])
ready = ag.wait(lambda m: m.get("ev") == "out" and m.get("rank") == 12, 10)
t0 = time.monotonic()
sid = ag.send({"op": "stop", "term_timeout_ms": 800})
stopped = ag.wait(lambda m: m.get("id") == sid, 10) or {}
took = time.monotonic() - t0
e2, e8, e12 = ag.exit_of(2, 1), ag.exit_of(8, 1), ag.exit_of(12, 1)
check("stop: ranks exit by SIGTERM, by_us true",
      all(e.get("signal") == "SIGTERM" and e.get("by_us") is True for e in (e2, e8)), e2, e8)
check("stop: a rank that ignores SIGTERM is SIGKILLed after term_timeout_ms",
      ready and e12.get("signal") == "SIGKILL" and e12.get("by_us") is True and 0.7 < took < 3, e12, took)
check("stop: answered stopped after every exit event",
      stopped.get("ev") == "stopped" and all(e.get("_t", 99) <= stopped.get("_t", 0) for e in (e2, e8, e12)),
      stopped)
# ---- back-pressure: a controller that does not read never makes the agent buffer everything ----
N = 40000
gen = ("import sys\nw = sys.stdout.write\n"
       f"for i in range({N}): w('%07d ' % i + 'y' * 992 + '\\n')\n")
def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return [int(l.split()[1]) for l in f if l.startswith("VmRSS:")][0] / 1024
rss0 = rss_mb(ag.p.pid)
spawn(ag, [sys.executable, "-c", gen], [{"rank": 13}])
time.sleep(3)   # 40 MB printed while nobody reads the agent's stdout
grew = rss_mb(ag.p.pid) - rss0
e13 = ag.exit_of(13, 60)
o13 = [l for f, l in lines(ag.outs(13, "o"))]
check("a rank printing fast: one out message carries what one read brought, many lines",
      max((data(m).count(b"\n") for m in ag.outs(13, "o")), default=0) >= 16,
      max((data(m).count(b"\n") for m in ag.outs(13, "o")), default=0))
check("back-pressure: 40 MB printed while the controller does not read; the agent's RSS grows "
      "by less than 24 MB", grew < 24, grew)
print(f"# agent RSS grew by {grew:.1f} MB while its output was paused")
check("back-pressure: every line arrives, in order, once the controller reads again",
      e13.get("code") == 0 and len(o13) == N and
      all(l[:8] == b"%07d " % i and len(l) == 1000 for i, l in enumerate(o13)), len(o13), e13,
      [(i, f, len(l), l[:12]) for i, (f, l) in enumerate(lines(ag.outs(13, "o")))
       if f or len(l) != 1000][:4])

st = ag.request({"op": "stop"})
check("stop with no rank running: stopped at once", st.get("ev") == "stopped", st)
pong = ag.request({"op": "ping"})
check("ping: pong", pong.get("ev") == "pong", pong)
ag.p.stdin.close()
try:
    rc = ag.p.wait(5)
except subprocess.TimeoutExpired:
    rc = "still running"
check("stdin EOF with no ranks: exit status 0", rc == 0, rc)

# ---- a slow stack dump never stops the heartbeat or the ranks' output ----
ag3 = Agent(dict(base_env, PATH=TMP + "/slowgdb:" + os.environ["PATH"]))
spawn(ag3, ["sleep", "30"], [{"rank": 0}])
spawn(ag3, ["sh", "-c", "while :; do echo tick; sleep 0.3; done"], [{"rank": 1}])
ag3.wait(lambda m: m.get("ev") == "status", 3)
t0 = time.monotonic()
sid = ag3.send({"op": "stacks", "rank": 0})
s = ag3.wait(lambda m: m.get("id") == sid, 30) or {}
t1 = s.get("_t", 0)
sts = [m["_t"] for m in ag3.msgs if m.get("ev") == "status" and t0 <= m["_t"] <= t1]
gaps = [b - a for a, b in zip([t0] + sts, sts + [t1])]
ticks = lines([m for m in ag3.outs(1) if t0 <= m["_t"] <= t1])
check("stacks with a 3 s gdb: the answer comes afterwards with gdb's text",
      s.get("ev") == "stacks" and s.get("tool") == "gdb" and "#0  fake_frame" in s.get("text", "")
      and t1 - t0 >= 2.5, s, t1 - t0)
check("while the dump runs, status keeps coming every second",
      len(sts) >= 2 and max(gaps) < 1.6, gaps)
check("while the dump runs, the other rank's output keeps coming", len(ticks) >= 5, len(ticks))

# ---- by_us: only an end our signal caused ----
spawn(ag3, ["sh", "-c", 'trap "" TERM; echo ready; sleep 1; kill -SEGV $$'], [{"rank": 2}])
ag3.wait(lambda m: m.get("ev") == "out" and m.get("rank") == 2, 5)
ag3.request({"op": "signal", "sig": "TERM", "ranks": [2]})
e2 = ag3.exit_of(2)
check("a rank that dies of SIGSEGV after we sent it SIGTERM (ignored): by_us false",
      e2.get("signal") == "SIGSEGV" and e2.get("by_us") is False, e2)

# ---- a large spawn keeps the heartbeat going ----
st = ag3.request({"op": "stop", "term_timeout_ms": 1000})
ag3.wait(lambda m: m.get("ev") == "status", 3)
t0 = time.monotonic()
big = spawn(ag3, ["sleep", "30"], [{"rank": r} for r in range(100, 300)])
t1 = time.monotonic()
started = [r for r in big.get("ranks", []) if isinstance(r.get("pid"), int)]
ag3.wait(lambda m: m.get("ev") == "status" and m["_t"] > t1 + 1.2, 3)
sts = [m for m in ag3.msgs if m.get("ev") == "status" and m["_t"] >= t0 - 1.1]
gaps = [b["_t"] - a["_t"] for a, b in zip(sts, sts[1:])]
print(f"# 200 ranks spawned in {t1 - t0:.2f} s; largest gap between status lines {max(gaps or [0]):.2f} s")
check("200 ranks in one spawn: all started within 10 s, status every second meanwhile, all listed",
      len(started) == 200 and t1 - t0 < 10 and gaps and max(gaps) < 1.8 and
      len(sts[-1].get("ranks", [])) == 200, t1 - t0, gaps, len(started))
st = ag3.request({"op": "stop", "term_timeout_ms": 1000}, 15)
check("the 200 ranks stop: stopped, every exit by_us", st.get("ev") == "stopped" and
      all(ag3.exit_of(r, 0).get("by_us") is True for r in range(100, 300)), st)
ag3.p.stdin.close()
ag3.p.wait(5)

# ---- stacks without gdb: the /proc fallback ----
ag2 = Agent(dict(base_env, PATH=TMP + "/nogdb"))
sp = spawn(ag2, ["sleep", "30"], [{"rank": 0}])
time.sleep(0.2)
s = ag2.request({"op": "stacks", "rank": 0}, 30)
check("stacks without gdb: the /proc view (state, wchan per thread)",
      s.get("tool") == "proc" and "state S" in s.get("text", "") and "wchan" in s.get("text", ""),
      s.get("text", "")[:800])

# ---- list and read (NCCL flight recorder dumps), the dump directory made at spawn ----
ag4 = Agent(base_env)
fr1, fr2 = os.path.join(TMP, "fr", "run1"), os.path.join(TMP, "fr", "run2")
probe = 'd=${TORCH_FR_DUMP_TEMP_FILE:-$TORCH_NCCL_DEBUG_INFO_TEMP_FILE}; test -d "${d%/*}" && echo made'
spawn(ag4, ["sh", "-c", probe], [{"rank": 5, "env": {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": fr1 + "/nccl-a0-rank-"}},
                                 {"rank": 6, "env": {"TORCH_FR_DUMP_TEMP_FILE": fr2 + "/x-"}}])
ex5, ex6 = ag4.exit_of(5), ag4.exit_of(6)
check("spawn makes the flight recorder dump's directory (mode 0700) before the rank starts",
      ex5.get("code") == 0 and ex6.get("code") == 0 and b"made" in b"".join(data(m) for m in ag4.outs(5)) and
      os.stat(fr1).st_mode & 0o777 == 0o700 and os.path.isdir(fr2), ex5, ex6)
big = os.urandom(1200 * 1024)
with open(fr1 + "/nccl-a0-rank-5", "wb") as f: f.write(big)
with open(fr1 + "/nccl-a0-rank-7", "wb") as f: f.write(b"small\n")
with open(fr1 + "/other", "wb") as f: f.write(b"not a dump\n")
os.mkdir(fr1 + "/nccl-a0-rank-dir")
os.symlink(TMP + "/pids", fr1 + "/nccl-a0-rank-9")   # a planted link to another file
ls = ag4.request({"op": "list", "prefix": fr1 + "/nccl-a0-rank-"})
check("list: the regular files starting with the prefix, sorted, with sizes (no directory, no link)",
      ls.get("ev") == "list" and ls.get("files") == [{"path": fr1 + "/nccl-a0-rank-5", "size": len(big)},
                                                     {"path": fr1 + "/nccl-a0-rank-7", "size": 6}], ls)
ls = ag4.request({"op": "list", "prefix": TMP + "/no/such/dir/x"})
check("list of a directory that does not exist: empty", ls.get("ev") == "list" and ls.get("files") == [], ls)
got, off, chunks, last = b"", 0, 0, {}
while chunks < 10:
    last = ag4.request({"op": "read", "path": fr1 + "/nccl-a0-rank-5", "offset": off})
    if last.get("ev") != "read": break
    piece = base64.b64decode(last["b64"])
    got += piece
    off += len(piece)
    chunks += 1
    if last.get("eof"): break
check("read: 1.2 MB in 512 KiB chunks by offset, eof on the last, every byte",
      got == big and chunks == 3 and last.get("size") == len(big) and last.get("eof") is True, chunks, len(got), last.get("size"))
e1 = ag4.request({"op": "read", "path": fr1 + "/nccl-a0-rank-dir"})
e2 = ag4.request({"op": "read", "path": "relative/file"})
e3 = ag4.request({"op": "read", "path": fr1 + "/nccl-a0-rank-9"})
check("read of a directory, a relative path or through a link: an error",
      e1.get("ev") == "error" and e2.get("ev") == "error" and e3.get("ev") == "error", e1, e2, e3)
ag4.p.stdin.close()
ag4.p.wait(10)
check("at exit the agent removes the dump directories it made that stayed empty, and only those",
      not os.path.exists(fr2) and os.path.isfile(fr1 + "/nccl-a0-rank-5"), os.listdir(os.path.join(TMP, "fr")))

# ---- no orphans ----
def orphan_case(name, how, watchdog_ms=0, limit=5.0, want_rc=None):
    a = ag2 if how == "eof" else Agent(base_env)
    t_spawn = time.monotonic()
    sp = spawn(a, ["sh", "-c", "sleep 1000 & sleep 1000"], [{"rank": 20}, {"rank": 21}],
               watchdog_ms=watchdog_ms)
    pids = [r.get("pid") for r in sp.get("ranks", [])]
    end = time.monotonic() + 5
    while time.monotonic() < end and not all(len(group(p)) == 3 for p in pids if p):
        time.sleep(0.05)
    members = {p: group(p) for p in pids if p}
    keepers = [ppid(p) for p in pids if p]
    check(f"{name}: each rank leads its own group, with its grandchild in it",
          len(members) == 2 and all(len(g) == 3 and p in g for p, g in members.items()), members)
    t0 = t_spawn if how == "watchdog" else time.monotonic()
    if how == "eof":
        a.p.stdin.close()
    elif how == "kill":
        a.p.kill()
    elif how == "term":
        a.p.send_signal(signal.SIGTERM)
    everyone = [q for g in members.values() for q in g] + keepers
    gone = wait_gone(everyone, limit)
    took = time.monotonic() - t0
    check(f"{name}: every process of the ranks' groups and their keepers is gone within {limit} s",
          gone and not any(group(p) for p in pids if p),
          took, {p: group(p) for p in pids if p}, [k for k in keepers if alive(k)])
    try:
        rc = a.p.wait(5)
    except subprocess.TimeoutExpired:
        rc = "still running"
    if want_rc is not None:
        check(f"{name}: the agent exits with status {want_rc}", rc == want_rc, rc)
    return took

orphan_case("stdin EOF", "eof", want_rc=0)
orphan_case("agent SIGKILLed", "kill")
orphan_case("agent SIGTERMed", "term", want_rc=128 + 15)
took = orphan_case("watchdog_ms 1500, no request", "watchdog", watchdog_ms=1500, limit=3.0, want_rc=1)
check("watchdog: the ranks die about 1.5 s after the last request", 1.3 < took < 2.6, took)

check("protocol 2: every out message of whole lines ends with a newline", not bad_blocks, bad_blocks[:2])

tap.done()
PY

PYTHONPATH="$PWD/tests/lib" AGENT="$AGENT" TMP="$tmp" python3 "$tmp/driver.py"
