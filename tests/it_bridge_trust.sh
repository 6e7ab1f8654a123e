#!/usr/bin/env bash
# it_bridge_trust: the bridge (`ddptop-agent --attach`) against another user of the node who
# squats where our agent's socket would be (issue 28, finding 1), and against listeners that
# never take a connection. Another user (uid 65534 through setpriv) makes /tmp/ddptop-UID/agents
# first, so our agent listens in /dev/shm/ddptop-UID/agents; the other user then listens at
# agent-RUN.n0.sock in its directory:
# - accepting: the bridge passes its directory over (our agent would not have used it) and
#   attaches to our agent in /dev/shm; the squatter gets no connection;
# - listen(0) with one connection of its own (a blocking connect() there waits for ever): the
#   same, at once;
# - for a run with no agent: "gone" with final:true (nothing of ours listens anywhere);
# - in a directory of ours: a listener that never takes the connection (a full listen(0)
#   backlog): "gone", final:false, within the connect deadline; a socket served by another
#   uid, and one we may not connect to (EACCES), are passed over for the next candidate; a
#   directory of ours that others may write is not tried and the answer is not final.
# Everything runs in a mount namespace with its own /tmp and /dev/shm (tmpfs), so the other
# user's directories touch nothing outside this test. The driver is Python (standard library).
set -u
. "$(dirname "$0")/lib/tap.sh"

AGENT="${DDPTOP_BUILD:-$PWD/build}/ddptop-agent"
# Not under /tmp: the namespace mounts its own /tmp over it.
tmp=$(mktemp -d /var/tmp/ddptop-it-bridge.XXXXXX) || exit 1
cleanup() {
    # every agent, bridge and squatter the driver started, and the ranks' process groups
    if [ -f "$tmp/pgids" ]; then
        while read -r g; do kill -9 -- "-$g" 2>/dev/null; done <"$tmp/pgids"
    fi
    if [ -f "$tmp/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$tmp/pids"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
touch "$tmp/pids" "$tmp/pgids"
chmod 755 "$tmp"

if [ ! -x "$AGENT" ]; then
    tap_fail "agent binary exists" "missing $AGENT: run make first"
    tap_done
    exit 1
fi

# A listener at argv[1] with backlog argv[2]; "drop" binds as the caller and listens as uid
# 65534 (SO_PEERCRED then says 65534, in a directory of ours); a full backlog when it is 0.
# It prints "ready", then one line per connection it accepted.
cat >"$tmp/squat.py" <<'PY'
import os, socket, sys, time
path, backlog, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
if how == "drop":
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
s.listen(backlog)
held = []
if backlog == 0:
    c = socket.socket(socket.AF_UNIX)
    c.setblocking(False)
    c.connect(path)             # the one place in the queue: the next connect() waits
    held.append(c)
    print("ready", flush=True)
    time.sleep(600)
print("ready", flush=True)
while True:
    a, _ = s.accept()
    held.append(a)
    print("accepted", flush=True)
PY

cat >"$tmp/driver.py" <<'PY'
import json, os, select, stat, subprocess, sys, time

AGENT, TMP = os.environ["AGENT"], os.environ["TMP"]
import tap
from tap import check, note

UID = os.geteuid()
ENV = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
TAG = str(os.getpid())
THEIRS = f"/tmp/ddptop-{UID}/agents"          # made first by the other user
OURS = f"/dev/shm/ddptop-{UID}/agents"         # where our agent goes instead


class Link:
    """JSON lines from a process's stdout, requests to its stdin."""
    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env or ENV)
        note("pids", self.p.pid)
        self.buf, self.msgs, self.eof, self.next_id = b"", [], False, 1

    def pump(self, timeout):
        if self.eof:
            time.sleep(max(0, min(timeout, 0.05)))
            return
        r, _, _ = select.select([self.p.stdout], [], [], max(0, timeout))
        if not r:
            return
        chunk = os.read(self.p.stdout.fileno(), 1 << 20)
        if not chunk:
            self.eof = True
            return
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if line.strip():
                try:
                    m = json.loads(line)
                except ValueError:
                    m = {"_bad": line[:200]}
                self.msgs.append(m)
                if m.get("ev") == "spawned":
                    for r in m.get("ranks", []):
                        if isinstance(r.get("pid"), int):
                            note("pgids", r["pid"])

    def wait(self, pred, timeout):
        end = time.monotonic() + timeout
        seen = 0
        while True:
            for m in self.msgs[seen:]:
                if pred(m):
                    return m
            seen = len(self.msgs)
            left = end - time.monotonic()
            if self.eof or left <= 0:
                return None
            self.pump(left)

    def send(self, obj):
        obj = dict(obj, id=self.next_id)
        self.next_id += 1
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()
        return obj["id"]

    def rc(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return "still running"


def bridge(run, env=None, prefix=()):
    """A bridge told to attach to run's node 0."""
    b = Link(list(prefix) + [AGENT, "--attach"], env=env)
    b.t0 = time.monotonic()
    b.p.stdin.write((json.dumps({"op": "attach", "run": run, "node": 0}) + "\n").encode())
    b.p.stdin.flush()
    return b


def outcome(b, timeout):
    """(the resumed hello or the gone message, seconds it took); a bridge still waiting after
    timeout is killed (it would wait for ever)."""
    m = b.wait(lambda m: m.get("ev") == "gone" or m.get("resumed") is True, timeout) or {}
    took = time.monotonic() - b.t0
    if not m:
        b.p.kill()
    return m, took


def squat(path, backlog, how="plain", as_nobody=True):
    """A listener at path (squat.py); returns its process once it listens."""
    argv = ["/usr/bin/python3", TMP + "/squat.py", path, str(backlog), how]
    p = subprocess.Popen((NOBODY if as_nobody else []) + argv, stdout=subprocess.PIPE, text=True)
    note("pids", p.pid)
    r, _, _ = select.select([p.stdout], [], [], 5)
    ready = bool(r) and p.stdout.readline().strip() == "ready"
    if not ready:
        p.kill()
    return p if ready else None


def accepted(p):
    """How many connections a squatter took so far."""
    n = 0
    while select.select([p.stdout], [], [], 0.2)[0]:
        line = p.stdout.readline()
        if not line:
            break
        n += line.strip() == "accepted"
    return n


def stop(p):
    if p:
        p.kill()
        p.wait()


def mkdirs(top, mode_top, mode_agents, owner=None):
    """top/ddptop-UID/agents with the modes given (chmod: the umask does not count), owned by
    owner (uid) when given."""
    d = f"{top}/ddptop-{UID}"
    for path, mode in ((d, mode_top), (d + "/agents", mode_agents)):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        if owner is not None:
            os.chown(path, owner, owner)
    return d + "/agents"


# ======== the other user comes first; our agent goes to /dev/shm ========
subprocess.run(NOBODY + ["mkdir", "-m", "755", "-p", THEIRS], check=True)
st = os.lstat(THEIRS)
check(f"the other user made {THEIRS} first (uid 65534, 0755)",
      st.st_uid == 65534 and stat.S_IMODE(st.st_mode) == 0o755, st)

RUN = f"itbt-{TAG}-a"
A = Link([AGENT])
A.wait(lambda m: m.get("ev") == "hello", 5)
sid = A.send({"op": "spawn", "attempt": 0, "argv": ["sleep", "300"], "workdir": "/",
              "ranks": [{"rank": 0, "env": {"RANK": "0"}}], "grace_ms": 60000, "run": RUN, "node": 0})
sp = A.wait(lambda m: m.get("id") == sid, 10) or {}
A.p.stdin.close()
A.wait(lambda m: False, 2)
ours_sock = f"{OURS}/agent-{RUN}.n0.sock"
check("our agent (grace 60 s, its link gone) listens in /dev/shm, not in the other user's directory",
      sp.get("ev") == "spawned" and A.p.poll() is None and os.path.exists(ours_sock) and
      not os.path.exists(f"{THEIRS}/agent-{RUN}.n0.sock"), sp, A.p.poll())

# ======== a squatter that accepts, in the other user's directory ========
sq = squat(f"{THEIRS}/agent-{RUN}.n0.sock", 8)
check("the other user listens at agent-RUN.n0.sock in its directory", sq is not None)
b1 = bridge(RUN)
m, took = outcome(b1, 15)
print(f"#   the bridge said: {json.dumps(m)[:300]} after {took:.1f} s")
check("a bridge passes the other user's directory over and attaches to our agent (resumed hello, its pid)",
      m.get("resumed") is True and m.get("pid") == A.p.pid, m)
check("the squatter got no connection", sq is not None and accepted(sq) == 0)
stop(sq)
os.unlink(f"{THEIRS}/agent-{RUN}.n0.sock")

# ======== listen(0) with its one place taken: a blocking connect() there never returns ========
sq = squat(f"{THEIRS}/agent-{RUN}.n0.sock", 0)
check("the other user listens with listen(0), its backlog full", sq is not None)
b2 = bridge(RUN)
m, took = outcome(b2, 15)
print(f"#   the bridge said: {json.dumps(m)[:300]} after {took:.1f} s")
check("a bridge is not held by it: it attaches to our agent within 5 s",
      m.get("resumed") is True and m.get("pid") == A.p.pid and took < 5, m, took)
check("the first bridge let go of the link (exit 0)", b1.rc(5) == 0, b1.p.poll())
stop(sq)

# ======== a run with no agent, squatted: our agent is known to be gone ========
RUN_C = f"itbt-{TAG}-none"
sq = squat(f"{THEIRS}/agent-{RUN_C}.n0.sock", 8)
bc = bridge(RUN_C)
m, took = outcome(bc, 15)
print(f"#   the bridge said: {json.dumps(m)[:400]}")
check("a run with no agent of ours, the other user listening at its name: gone, final:true, exit 3",
      m.get("ev") == "gone" and m.get("final") is True and f"no agent of run {RUN_C} node 0" in m.get("error", "")
      and bc.rc(5) == 3, m, bc.p.poll())
check("the message names the other user's directory as passed over",
      f"/tmp/ddptop-{UID} belongs to uid 65534" in m.get("error", ""), m.get("error"))
check("that squatter got no connection either", sq is not None and accepted(sq) == 0)
stop(sq)

# ======== in a directory of ours: a listener that never takes the connection ========
MINE = mkdirs("/tmp/mine", 0o700, 0o700)
RUN_D = f"itbt-{TAG}-d"
hung = squat(f"{MINE}/agent-{RUN_D}.n0.sock", 0, as_nobody=False)
bd = bridge(RUN_D, env=dict(ENV, TMPDIR="/tmp/mine"))
m, took = outcome(bd, 15)
print(f"#   the bridge said: {json.dumps(m)[:400]} after {took:.1f} s")
check("a listener of ours whose backlog stays full: gone, final:false, after the connect deadline (3 s), "
      "not for ever", m.get("ev") == "gone" and m.get("final") is False and 2.5 <= took < 8 and
      "did not take the connection in time" in m.get("error", "") and bd.rc(5) == 3, m, took, bd.p.poll())
stop(hung)

# ======== in a directory of ours: a socket served by another uid, then one we may not open ========
os.unlink(f"{MINE}/agent-{RUN_D}.n0.sock")
other = squat(f"{MINE}/agent-{RUN}.n0.sock", 8, how="drop", as_nobody=False)
be = bridge(RUN, env=dict(ENV, TMPDIR="/tmp/mine"))
m, took = outcome(be, 15)
print(f"#   the bridge said: {json.dumps(m)[:300]}")
check("a socket in a directory of ours served by uid 65534 (SO_PEERCRED): passed over, the bridge "
      "attaches to our agent", m.get("resumed") is True and m.get("pid") == A.p.pid, m)
check("the second bridge let go of the link (exit 0)", b2.rc(5) == 0, b2.p.poll())
check("that listener was connected to once (the bridge asked who it was, sent nothing, and went on)",
      other is not None and accepted(other) == 1)
stop(other)
os.unlink(f"{MINE}/agent-{RUN}.n0.sock")
closed = squat(f"{MINE}/agent-{RUN}.n0.sock", 8, as_nobody=False)
os.chmod(f"{MINE}/agent-{RUN}.n0.sock", 0)
# root without CAP_DAC_OVERRIDE: the socket's mode 000 gives EACCES
bf = bridge(RUN, env=dict(ENV, TMPDIR="/tmp/mine"),
            prefix=["setpriv", "--bounding-set", "-dac_override,-dac_read_search"])
m, took = outcome(bf, 15)
print(f"#   the bridge said: {json.dumps(m)[:300]}")
check("a socket we may not connect to (EACCES): passed over, the bridge attaches to our agent",
      m.get("resumed") is True and m.get("pid") == A.p.pid, m)
check("that listener got no connection", closed is not None and accepted(closed) == 0)
stop(closed)

# ======== a directory of ours that others may write: not tried, not final ========
LAX = mkdirs("/tmp/lax", 0o700, 0o777)
bg = bridge(f"itbt-{TAG}-g", env=dict(ENV, TMPDIR="/tmp/lax"))
m, took = outcome(bg, 15)
print(f"#   the bridge said: {json.dumps(m)[:400]}")
check("a directory of ours writable by others: not tried, and the answer is not final",
      m.get("ev") == "gone" and m.get("final") is False and f"{LAX}/agent-itbt-{TAG}-g.n0.sock: not tried"
      in m.get("error", ""), m)

# ======== the end: exit over the last bridge ========
xid = bf.send({"op": "resume", "from": {}})
bf.wait(lambda m: m.get("id") == xid, 5)
xid = bf.send({"op": "exit"})
xa = bf.wait(lambda m: m.get("id") == xid, 5) or {}
check("exit over the last bridge: the agent and that bridge exit 0", xa.get("ev") == "exit" and A.rc(10) == 0 and
      bf.rc(5) == 0, xa, A.p.poll(), bf.p.poll())
tap.done()
PY

PYTHONPATH="$PWD/tests/lib" AGENT="$AGENT" TMP="$tmp" \
    unshare --mount --propagation private bash -c \
    '. "$1" && private_tmp_mount 16m /dev/shm && exec /usr/bin/python3 "$0"' "$tmp/driver.py" \
    "$PWD/tests/lib/private_tmp.sh"
