#!/usr/bin/env bash
# it_agent_reconnect: the real ddptop-agent outliving its controller's link (protocol 3, the
# grace, the spool, the bridge `ddptop-agent --attach`), driven the way a controller drives it.
# With grace_ms, stdin EOF leaves the ranks running and the agent listening on its private
# socket (dir 0700, socket 0600, ours); a bridge hands the agent a new link, whose resumed hello
# lists the ranks alive and which carries nothing else until the resume; the resume sends exactly
# what the controller missed (every line of each rank once, in order, then its exit) and counts
# it; a second bridge takes the link over from the first (which exits 0); the grace running out
# with no controller stops the ranks' process groups and ends the agent; a bridge with no agent,
# or whose agent is SIGKILLed while it holds the link, says gone and exits 3 (and the ranks die
# with their agent); another user reaches neither the socket nor the agent; output past
# spool_bytes while no controller is there is dropped, counted and said, never blocking the
# rank; {"op":"exit"} over a bridge ends the agent (0), its ranks and the bridge (0).
# The driver is Python (/usr/bin/python3, standard library only).
set -u
. "$(dirname "$0")/lib/tap.sh"

AGENT="${DDPTOP_BUILD:-$PWD/build}/ddptop-agent"
tmp=$(mktemp -d /tmp/ddptop-it-reconnect.XXXXXX)
# For user nobody: a copy of the agent it can run, and a TMPDIR of its own.
nob=$(mktemp -d /tmp/ddptop-it-reconnect-nobody.XXXXXX)
TAG="$$"
cleanup() {
    # The driver wrote every agent's and bridge's pid and every rank's process group here.
    if [ -f "$tmp/pgids" ]; then
        while read -r g; do kill -9 -- "-$g" 2>/dev/null; done <"$tmp/pgids"
    fi
    if [ -f "$tmp/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$tmp/pids"
    fi
    # a socket left by the agent this test SIGKILLs (agents remove their own on exit)
    rm -f /tmp/ddptop-"$(id -u)"/agents/agent-itrc-"$TAG"-*.sock
    rm -rf "$tmp" "$nob"
}
trap cleanup EXIT
touch "$tmp/pids" "$tmp/pgids"

if [ ! -x "$AGENT" ]; then
    tap_fail "agent binary exists" "missing $AGENT: run make first"
    tap_done
    exit 1
fi
chmod 755 "$nob"
cp "$AGENT" "$nob/ddptop-agent"
chmod 755 "$nob/ddptop-agent"

# The ranks: numbered lines at a known rate, a sleeper (with a grandchild in its group), and a
# flood of ~200 KB in batches.
cat >"$tmp/rank.sh" <<'SH'
case "$MODE" in
lines) i=1; while [ $i -le "$N" ]; do echo "rank $RANK line $i"; i=$((i+1)); sleep 0.05; done ;;
sleep) sleep 300 & sleep 300 & wait ;;
esac
SH
cat >"$tmp/flood.py" <<'PY'
import os, sys, time
time.sleep(0.4)                     # the controller's link is gone before the first line
t0 = time.monotonic()
for b in range(20):
    sys.stdout.write("".join("rank 0 line %05d %s\n" % (b * 100 + i, "x" * 80) for i in range(100)))
    sys.stdout.flush()
    time.sleep(0.03)
with open(os.environ["ELAPSED"], "w") as f:
    f.write("%.3f\n" % (time.monotonic() - t0))
PY

cat >"$tmp/driver.py" <<'PY'
import base64, errno, json, os, select, signal, stat, subprocess, sys, time

AGENT, TMP, NOB, TAG = os.environ["AGENT"], os.environ["TMP"], os.environ["NOB"], os.environ["TAG"]
UID = os.geteuid()
# TMPDIR unset: the agents' sockets are in /tmp/ddptop-UID/agents, where user nobody could
# look for them if the directory let it.
ENV = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
SOCKDIR = f"/tmp/ddptop-{UID}/agents"
import tap
from tap import check, note


class Link:
    """JSON lines from a process's stdout (an agent's first link, or a bridge's), requests to
    its stdin. Every message is kept with its arrival time and its length on the link."""
    def __init__(self, argv, env=None, name="agent"):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env or ENV)
        note("pids", self.p.pid)
        self.name = name
        self.buf = b""
        self.msgs = []
        self.eof = False
        self.next_id = 1

    def pump(self, timeout):
        if self.eof:
            time.sleep(max(0, min(timeout, 0.05)))
            return False
        r, _, _ = select.select([self.p.stdout], [], [], max(0, timeout))
        if not r:
            return False
        chunk = os.read(self.p.stdout.fileno(), 1 << 20)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        now = time.monotonic()
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                m = json.loads(line)
            except ValueError:
                m = {"_bad": line[:200]}
            m["_t"] = now
            m["_len"] = len(line) + 1
            self.msgs.append(m)
            if m.get("ev") == "spawned":
                for r in m.get("ranks", []):
                    if isinstance(r.get("pid"), int):
                        note("pgids", r["pid"])
        return True

    def wait(self, pred, timeout=10.0, start=0):
        """The first message from index start matching pred, waiting for it (None: timeout or EOF)."""
        end = time.monotonic() + timeout
        seen = start
        while True:
            for m in self.msgs[seen:]:
                if pred(m):
                    return m
            seen = max(seen, len(self.msgs))
            if self.eof:
                return None
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.pump(left)

    def read_for(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end and not self.eof:
            self.pump(end - time.monotonic())

    def until_eof(self, timeout):
        end = time.monotonic() + timeout
        while not self.eof and time.monotonic() < end:
            self.pump(end - time.monotonic())
        return self.eof

    def send_line(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def send(self, obj):
        obj = dict(obj, id=self.next_id)
        self.next_id += 1
        self.send_line(obj)
        return obj["id"]

    def request(self, obj, timeout=10.0):
        i = self.send(obj)
        return self.wait(lambda m: m.get("id") == i and "rank" not in m, timeout) or {}

    def rc(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return "still running"

def bridge(run, node=0, argv=None, env=None):
    """A bridge that was told to attach to run's node; its first line read."""
    b = Link(argv or [AGENT, "--attach"], env=env, name="bridge")
    b.hi = b.wait(lambda m: True, 5) or {}
    b.send_line({"op": "attach", "run": run, "node": node})
    return b

def data(m):
    return base64.b64decode(m["b64"]) if "b64" in m else m.get("t", "").encode()

def durable(msgs, rank):
    return [m for m in msgs if m.get("ev") in ("out", "exit") and m.get("rank") == rank]

def last_seq(msgs):
    have = {}
    for m in msgs:
        if m.get("ev") in ("out", "exit") and isinstance(m.get("q"), int):
            have[m["rank"]] = max(have.get(m["rank"], 0), m["q"])
    return have

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

def group(pgid):
    out = subprocess.run(["ps", "-e", "-o", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
    return [int(f[0]) for f in (l.split() for l in out.splitlines())
            if len(f) == 3 and int(f[1]) == pgid and not f[2].startswith("Z")]

def wait_until(pred, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()

def sock_path(run, node=0):
    return f"{SOCKDIR}/agent-{run}.n{node}.sock"

def spawn(ag, mode, ranks, run, grace_ms, extra_env=None, argv=None, **kw):
    req = {"op": "spawn", "attempt": 0, "argv": argv or ["sh", TMP + "/rank.sh"], "workdir": "/tmp",
           "ranks": [{"rank": r, "env": dict({"RANK": str(r), "MODE": mode}, **(extra_env or {}))}
                     for r in ranks],
           "grace_ms": grace_ms, "run": run, "node": 0}
    req.update(kw)
    sp = ag.request(req)
    return {r["rank"]: r.get("pid") for r in sp.get("ranks", [])}, sp

def as_nobody(argv, stdin=b"", env=None):
    return subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"] + argv,
                          input=stdin, capture_output=True, timeout=15, env=env or ENV)

# ======== (a) the link ends, the run goes on ========
RUN_A = f"itrc-{TAG}-a"
N = 100            # lines per rank, one each 0.05 s: 5 s
A = Link([AGENT])
hello = A.wait(lambda m: m.get("ev") == "hello", 5) or {}
check("hello first, protocol 3", hello.get("protocol") == 3 and A.msgs[:1] == [hello], hello)
pids, sp = spawn(A, "lines", [0, 1], RUN_A, 10000, {"N": str(N)})
pid2, sp2 = spawn(A, "sleep", [2], RUN_A, 10000)
pids.update(pid2)
check("spawn with grace_ms, run and node: each rank's pid",
      all(isinstance(pids.get(r), int) for r in (0, 1, 2)), sp, sp2)
A.read_for(1.0)
# acknowledge half of what arrived: the resume's from, not the ack, must decide the rest
have = last_seq(A.msgs)
pong = A.request({"op": "ping", "ack": {str(r): q // 2 for r, q in have.items()}})
check("ping with ack: pong", pong.get("ev") == "pong", pong)
A.p.stdin.close()
t_eof = time.monotonic()
A.until_eof(5)
old = list(A.msgs)
have = last_seq(old)
check("stdin EOF: the agent lets go of its stdout (the old link ends)", A.eof)
time.sleep(1.0)
check("with a grace, stdin EOF leaves the agent running", A.p.poll() is None, A.p.poll())
check("with a grace, stdin EOF leaves every rank running", all(alive(pids[r]) for r in (0, 1, 2)),
      {r: alive(p) for r, p in pids.items()})
sp_path = sock_path(RUN_A)
try:
    st, dst, pst = os.lstat(sp_path), os.lstat(SOCKDIR), os.lstat(os.path.dirname(SOCKDIR))
    check("the agent's socket: a socket, mode 0600, ours",
          stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == UID,
          oct(st.st_mode), st.st_uid)
    check("its directory and the one above: real directories, mode 0700, ours",
          all(stat.S_ISDIR(s.st_mode) and stat.S_IMODE(s.st_mode) == 0o700 and s.st_uid == UID
              for s in (dst, pst)), oct(dst.st_mode), dst.st_uid, oct(pst.st_mode), pst.st_uid)
except OSError as e:
    check("the agent's socket: a socket, mode 0600, ours", False, e)
    check("its directory and the one above: real directories, mode 0700, ours", False, e)

# ======== (g) another user reaches neither the socket nor the agent ========
probe = ("import errno, socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
         "try:\n    s.connect(sys.argv[1]); print('connected')\n"
         "except OSError as e:\n    print(errno.errorcode.get(e.errno, e.errno))\n")
r = as_nobody(["/usr/bin/python3", "-c", probe, sp_path])
check("user nobody connecting to the agent's socket: EACCES (its directory is 0700)",
      r.stdout.decode().strip() == "EACCES", r.stdout, r.stderr)
attach_line = (json.dumps({"op": "attach", "run": RUN_A, "node": 0}) + "\n").encode()
r = as_nobody([NOB + "/ddptop-agent", "--attach"], attach_line)
out = [json.loads(l) for l in r.stdout.decode().splitlines() if l.strip()]
check("a bridge run by user nobody: bridge, then gone naming the run, exit 3",
      r.returncode == 3 and len(out) == 2 and out[0].get("ev") == "bridge" and
      out[1].get("ev") == "gone" and f"no agent of run {RUN_A} node 0" in out[1].get("error", ""),
      r.returncode, r.stdout, r.stderr)
# nobody's own socket path made a link to ours: connect() still meets the 0700 directory
os.makedirs(f"{NOB}/tmp/ddptop-65534/agents", mode=0o700)
os.symlink(sp_path, f"{NOB}/tmp/ddptop-65534/agents/agent-{RUN_A}.n0.sock")
for d in (f"{NOB}/tmp", f"{NOB}/tmp/ddptop-65534", f"{NOB}/tmp/ddptop-65534/agents"):
    os.chown(d, 65534, 65534)
r = as_nobody([NOB + "/ddptop-agent", "--attach"], attach_line, env=dict(ENV, TMPDIR=f"{NOB}/tmp"))
out = [json.loads(l) for l in r.stdout.decode().splitlines() if l.strip()]
check("a bridge of user nobody whose socket path links to ours: gone, exit 3",
      r.returncode == 3 and out[-1:] and out[-1].get("ev") == "gone" and RUN_A in out[-1].get("error", ""),
      r.returncode, r.stdout, r.stderr)
print(f"#   nobody's bridge said: {out[-1].get('error') if out else None}")
check("after user nobody's tries the agent and every rank still run",
      A.p.poll() is None and all(alive(pids[r]) for r in (0, 1, 2)))

# ======== (b) a bridge attaches; the resume sends exactly what was missed ========
b1 = bridge(RUN_A)
check("the bridge says bridge first, protocol 3, with its pid",
      b1.hi.get("ev") == "bridge" and b1.hi.get("protocol") == 3 and b1.hi.get("pid") == b1.p.pid, b1.hi)
rh = b1.wait(lambda m: m.get("ev") == "hello", 5) or {}
ranks = {x.get("rank"): x for x in rh.get("ranks", [])}
check("the agent's resumed hello comes over the bridge: resumed, its pid, the grace, away_ms",
      rh.get("resumed") is True and rh.get("protocol") == 3 and rh.get("pid") == A.p.pid and
      rh.get("grace_ms") == 10000 and isinstance(rh.get("away_ms"), (int, float)) and
      rh.get("away_ms") >= 1000 and isinstance(rh.get("spool_bytes"), (int, float)) and
      rh.get("spool_bytes") > 0 and b1.msgs[1:2] == [rh], rh)
check("the resumed hello lists every rank alive with its pid, attempt 0, not starting",
      sorted(ranks) == [0, 1, 2] and all(ranks[r].get("pid") == pids[r] and ranks[r].get("alive") is True and
                                         ranks[r].get("attempt") == 0 and ranks[r].get("starting") is False
                                         for r in ranks), rh.get("ranks"))
i_hello = next((i for i, m in enumerate(b1.msgs) if m is rh), len(b1.msgs))
b1.read_for(1.3)
held = b1.msgs[i_hello + 1:]
check("until the resume the new link carries nothing but the hello (no output, no status)",
      not held, held[:3])
from_ = {str(r): have.get(r, 0) for r in (0, 1)}
rid = b1.send({"op": "resume", "from": from_})
ans = b1.wait(lambda m: m.get("id") == rid, 10) or {}
i_ans = next((i for i, m in enumerate(b1.msgs) if m is ans), len(b1.msgs))
resent = [m for m in b1.msgs[i_hello + 1:i_ans] if m.get("ev") in ("out", "exit") and "rank" in m]
check("the resume's answer counts the messages and bytes sent again before it",
      ans.get("ev") == "resume" and ans.get("messages") == len(resent) and
      ans.get("bytes") == sum(m["_len"] for m in resent) and len(resent) > 0,
      ans, len(resent), sum(m["_len"] for m in resent))
check("what is sent again starts right after the controller's from, per rank",
      all([m["q"] for m in durable(resent, r)][:1] == [have.get(r, 0) + 1] for r in (0, 1)),
      {r: [m["q"] for m in durable(resent, r)][:3] for r in (0, 1)}, have)
n_before = len(b1.msgs)
rid2 = b1.send({"op": "resume", "from": from_})
again = b1.wait(lambda m: m.get("id") == rid2, 10) or {}
check("a second resume on the same link is refused and sends nothing again",
      again.get("ev") == "error" and "once" in again.get("error", "") and
      not any(m.get("ev") in ("out", "exit") and m.get("q", 0) <= max(have.values() or [0])
              for m in b1.msgs[n_before:]), again)

def ping_until(link, pred, timeout):
    """Waits for pred over link like a controller: a ping with acks every second."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = link.wait(pred, min(1.0, end - time.monotonic()))
        if m:
            return m
        if link.eof:
            return None
        link.send({"op": "ping", "ack": {str(r): q for r, q in last_seq(link.msgs).items()}})
    return None

exits = {r: ping_until(b1, lambda m, r=r: m.get("ev") == "exit" and m.get("rank") == r, 15) or {} for r in (0, 1)}
for r in (0, 1):
    both = durable(old, r) + durable(b1.msgs, r)
    qs = [m.get("q") for m in both]
    text = b"".join(data(m) for m in both if m.get("ev") == "out" and m.get("s") == "o").decode()
    want = "".join(f"rank {r} line {i}\n" for i in range(1, N + 1))
    check(f"rank {r}: seq over both links is 1, 2, 3, ... with no gap and no duplicate",
          qs == list(range(1, len(qs) + 1)), qs)
    check(f"rank {r}: its {N} lines over both links, each once, in order", text == want,
          f"got {text.count(chr(10))} lines", text[:200], text[-200:])
    outs = [m for m in durable(b1.msgs, r) if m.get("ev") == "out"]
    check(f"rank {r}: its exit (code 0) is its last message, numbered after its output, after all of it",
          exits[r].get("code") == 0 and both and both[-1] is exits[r] and exits[r].get("q") == len(qs) and
          all(m["_t"] <= exits[r]["_t"] for m in outs), exits[r], qs[-3:])
check("nothing on any stream but the numbered lines (no stderr, no b64)",
      not [m for m in old + b1.msgs if m.get("ev") == "out" and (m.get("s") != "o" or "b64" in m)])
print(f"#   old link: {len(durable(old, 0)) + len(durable(old, 1))} messages; sent again: {len(resent)}; "
      f"away {rh.get('away_ms')} ms")

# ======== (c) a second bridge takes the link over ========
b2 = bridge(RUN_A)
rh2 = b2.wait(lambda m: m.get("ev") == "hello", 5) or {}
check("a second bridge while the first holds the link: resumed hello, rank 2 alive, 0 and 1 gone",
      rh2.get("resumed") is True and [(x.get("rank"), x.get("alive")) for x in rh2.get("ranks", [])] == [(2, True)],
      rh2)
check("the first bridge's link ends (EOF) and the first bridge exits 0",
      b1.until_eof(5) and b1.rc(5) == 0, b1.eof, b1.p.poll())
have2 = last_seq(old + b1.msgs)
rid = b2.send({"op": "resume", "from": {str(r): q for r, q in have2.items()}})
ans2 = b2.wait(lambda m: m.get("id") == rid, 10) or {}
check("its resume from everything received: nothing sent again",
      ans2.get("ev") == "resume" and ans2.get("messages") == 0 and ans2.get("bytes") == 0 and
      not [m for m in b2.msgs if m.get("ev") in ("out", "exit") and "rank" in m], ans2)

# ======== (i) {"op":"exit"} over a bridge ========
t0 = time.monotonic()
xid = b2.send({"op": "exit"})
xa = b2.wait(lambda m: m.get("id") == xid, 5) or {}
rc_a = A.rc(10)
gone2 = wait_until(lambda: not group(pids[2]), 5)
check("exit over a bridge: answered, the agent exits 0", xa.get("ev") == "exit" and rc_a == 0, xa, rc_a)
check("exit over a bridge: the ranks' process groups are gone", gone2, group(pids[2]))
check("exit over a bridge: the bridge exits 0, its link ends, the socket is removed",
      b2.rc(5) == 0 and b2.until_eof(2) and not os.path.exists(sp_path), b2.p.poll(), os.path.exists(sp_path))

# ======== (e) a bridge with no agent ========
RUN_E = f"itrc-{TAG}-none"
be = bridge(RUN_E)
g = be.wait(lambda m: m.get("ev") == "gone", 5) or {}
check("a bridge with no agent: gone naming the run, exit 3",
      be.hi.get("ev") == "bridge" and f"no agent of run {RUN_E} node 0" in g.get("error", "") and be.rc(5) == 3,
      g, be.p.poll())

# ======== (d) the grace runs out ========
RUN_D = f"itrc-{TAG}-d"
D = Link([AGENT])
D.wait(lambda m: m.get("ev") == "hello", 5)
t_last = time.monotonic()
dpids, _ = spawn(D, "sleep", [0, 1], RUN_D, 3000)
D.p.stdin.close()
D.until_eof(5)
wait_until(lambda: all(len(group(p)) == 3 for p in dpids.values()), 3)
members = [q for p in dpids.values() for q in group(p)]
time.sleep(max(0, t_last + 2.0 - time.monotonic()))
check("grace 3 s: 2 s after the last request the ranks (each with a grandchild) still run",
      len(members) == 6 and all(alive(q) for q in members) and D.p.poll() is None, members)
rc_d = D.rc(max(0.1, t_last + 8.0 - time.monotonic()))
t_exit = time.monotonic() - t_last
gone_d = wait_until(lambda: not any(group(p) for p in dpids.values()), max(0.1, t_last + 8.0 - time.monotonic()))
check("grace 3 s and no controller: the agent exits (after the grace, within grace + 5 s)",
      isinstance(rc_d, int) and 2.9 <= t_exit <= 8.0, rc_d, t_exit)
check("grace 3 s and no controller: every process of the ranks' groups is gone within grace + 5 s",
      gone_d, {p: group(p) for p in dpids.values()})
check("the agent that gave up removed its socket", not os.path.exists(sock_path(RUN_D)))
print(f"#   grace ran out: the agent exited {t_exit:.2f} s after the last request with status {rc_d}")

# ======== (f) the agent dies while a bridge holds its link ========
RUN_F = f"itrc-{TAG}-f"
F = Link([AGENT])
F.wait(lambda m: m.get("ev") == "hello", 5)
fpids, _ = spawn(F, "sleep", [0, 1], RUN_F, 10000)
F.p.stdin.close()
F.until_eof(5)
wait_until(lambda: all(len(group(p)) == 3 for p in fpids.values()), 3)
fmembers = {p: group(p) for p in fpids.values()}
bf = bridge(RUN_F)
rhf = bf.wait(lambda m: m.get("ev") == "hello", 5) or {}
rid = bf.send({"op": "resume", "from": {}})
ansf = bf.wait(lambda m: m.get("id") == rid, 5) or {}
check("a bridge holds the link (resumed hello, resume answered)",
      rhf.get("resumed") is True and ansf.get("ev") == "resume", rhf, ansf)
t0 = time.monotonic()
F.p.kill()
F.p.wait()
gf = bf.wait(lambda m: m.get("ev") == "gone", 5) or {}
check("the agent SIGKILLed while the bridge holds the link: the bridge says gone and exits 3",
      "ended while it held this link" in gf.get("error", "") and bf.rc(5) == 3, gf, bf.p.poll())
gone_f = wait_until(lambda: not any(alive(q) for g in fmembers.values() for q in g), 5)
check("the agent SIGKILLed: its ranks' processes (grandchildren too) die within 5 s",
      gone_f and len(fmembers) == 2 and all(len(g) == 3 for g in fmembers.values()),
      fmembers, time.monotonic() - t0)
bg = bridge(RUN_F)
g = bg.wait(lambda m: m.get("ev") == "gone", 5) or {}
check("a bridge to the killed agent's run (its socket left behind): gone, exit 3",
      f"no agent of run {RUN_F}" in g.get("error", "") and bg.rc(5) == 3, g, bg.p.poll())

# ======== (h) the spool fills while no controller is there ========
RUN_H = f"itrc-{TAG}-h"
H = Link([AGENT])
H.wait(lambda m: m.get("ev") == "hello", 5)
elapsed_file = TMP + "/flood.elapsed"
hpids, sph = spawn(H, "flood", [0], RUN_H, 10000, {"ELAPSED": elapsed_file},
                   argv=["/usr/bin/python3", TMP + "/flood.py"], spool_bytes=65536)
H.p.stdin.close()
H.until_eof(5)
hold = list(H.msgs)
t_sp = time.monotonic()
done = wait_until(lambda: os.path.exists(elapsed_file) and open(elapsed_file).read().endswith("\n"), 8)
took = float(open(elapsed_file).read()) if done else None
# nominal: 20 batches, 0.03 s apart
check("a rank printing 200 KB while no controller is there is never blocked (it finishes in "
      "about its nominal 0.6 s)", done and took < 2.0, took, time.monotonic() - t_sp)
time.sleep(0.5)
bh = bridge(RUN_H)
rhh = bh.wait(lambda m: m.get("ev") == "hello", 5) or {}
check("the resumed hello's spool_bytes stays near spool_bytes (65536)",
      isinstance(rhh.get("spool_bytes"), (int, float)) and 65536 < rhh["spool_bytes"] < 3 * 65536, rhh)
rid = bh.send({"op": "resume", "from": {str(r): q for r, q in last_seq(hold).items()}})
eh = ping_until(bh, lambda m: m.get("ev") == "exit" and m.get("rank") == 0, 10) or {}
allh = durable(hold, 0) + durable(bh.msgs, 0)
outs = [m for m in allh if m.get("ev") == "out" and m.get("s") == "o"]
marks = [m for m in allh if m.get("ev") == "out" and m.get("s") == "e"]
text = b"".join(data(m) for m in outs)
full = "".join("rank 0 line %05d %s\n" % (i, "x" * 80) for i in range(2000)).encode()
dl = sum(m.get("dropped", {}).get("lines", 0) for m in allh)
db = sum(m.get("dropped", {}).get("bytes", 0) for m in allh)
mt = marks[0].get("t", "") if marks else ""
want_head = f"ddptop-agent: {dl} lines ({db} bytes) of this rank's output were dropped"
check("the dropped marker: on the rank's stderr, with dropped counts (non-zero) that its text says",
      len(marks) == 1 and marks[0].get("dropped", {}).get("lines", 0) > 0 and
      marks[0].get("dropped", {}).get("bytes", 0) > 0 and mt.startswith(want_head) and
      [m for m in allh if "dropped" in m] == marks[:1], [{k: v for k, v in m.items() if k != "_t"} for m in marks], want_head)
check("lines received + lines dropped = the 2000 lines the rank printed",
      text.count(b"\n") + dl == 2000, text.count(b"\n"), dl)
check("bytes received + bytes dropped = the bytes the rank printed, and what arrived is its start",
      len(text) + db == len(full) and full.startswith(text), len(text), db, len(full))
check("the exit (code 0) comes after the marker, last, numbered in order",
      eh.get("code") == 0 and allh and allh[-1] is eh and
      [m.get("q") for m in allh] == list(range(1, len(allh) + 1)), eh, [m.get("q") for m in allh][-4:])
nl = text.count(b"\n")
print(f"#   spool: {nl} lines ({len(text)} bytes) kept, {dl} lines ({db} bytes) dropped; "
      f"the rank took {took} s")
xid = bh.send({"op": "exit"})
bh.wait(lambda m: m.get("id") == xid, 5)
check("the flood's agent exits 0 on exit, its bridge too", H.rc(10) == 0 and bh.rc(5) == 0, H.p.poll(), bh.p.poll())

tap.done()
PY

PYTHONPATH="$PWD/tests/lib" AGENT="$AGENT" TMP="$tmp" NOB="$nob" TAG="$TAG" /usr/bin/python3 "$tmp/driver.py"
