#!/usr/bin/env bash
# it_node_files: the files the agent makes on a node, against another user of that node (uid
# 65534 through setpriv) and against its own ranks (docs/protocol.md, "Files on the node").
# - The attack of issue 18, still tried: the other user plants a FIFO and a link to a private
#   file at the old predictable error-file names in a shared TMPDIR; the agent never looks there.
# - The error file lives in DIR/ddptop-UID/runs/agent-PID.XXXXXX (0700); a rank that replaces
#   its own error file with a FIFO, a link to a 0600 file or a directory: the agent does not
#   hang, the real exit code goes out, the secret is not copied, the rank's stderr names the file.
# - Reading is bounded (64 KiB of a 1 MiB file).
# - The directory goes when the agent ends: stdin EOF, and a grace that ran out.
# - The other user pre-creates /tmp/ddptop-0: the agent avoids it (/dev/shm); pre-creates both:
#   the rank runs without TORCHELASTIC_ERROR_FILE and its stderr says why; theirs stay empty.
# - The other user pre-makes the flight recorder's dump directory with a link at a dump's name:
#   the dumps go to the agent's own directory, "list" finds them there, the link is not written.
# - A whole `ddptop run` whose rank links its error file to a secret: events.jsonl and the log
#   directory do not hold the secret; the exit code and the message are there.
# Everything runs in a mount namespace with its own /tmp and /dev/shm (tmpfs), so the other
# user's directories there touch nothing outside this test.
set -u
. "$(dirname "$0")/lib/tap.sh"

AGENT="$DDPTOP_BUILD/ddptop-agent"
DDPTOP="$DDPTOP_BUILD/ddptop"
# Not under /tmp: the namespace mounts its own /tmp over it. 0755 so that uid 65534 gets to
# $tmp/shared, the stand-in for a shared TMPDIR (1777).
tmp=$(mktemp -d /var/tmp/ddptop-it-nodefiles.XXXXXX)
cleanup() {
    if [ -f "$tmp/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$tmp/pids"
    fi
    if [ -f "$tmp/pgids" ]; then
        while read -r g; do kill -9 -- "-$g" 2>/dev/null; done <"$tmp/pgids"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp"
mkdir -m 1777 "$tmp/shared"
touch "$tmp/pids" "$tmp/pgids"
secret="SECRET-$RANDOM$RANDOM-do-not-copy"
printf '%s\n' "$secret" >"$tmp/secret"
chmod 600 "$tmp/secret"

for f in "$AGENT" "$DDPTOP"; do
    if [ ! -x "$f" ]; then
        tap_fail "binaries exist" "missing $f: run make first"
        tap_done
        exit 1
    fi
done

cat >"$tmp/driver.py" <<'PY'
import json, os, socket, stat, subprocess, sys, time

AGENT, DDPTOP, TMP, SECRET = (os.environ[k] for k in ("AGENT", "DDPTOP", "TMP", "SECRET"))
import tap
from tap import check, note

SHARED = TMP + "/shared"
UID = os.geteuid()


def other(*cmd):
    """cmd as uid 65534, the other user of the node."""
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd],
                          capture_output=True, text=True)


class Agent:
    def __init__(self, env):
        self.p = subprocess.Popen([AGENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        note("pids", self.p.pid)
        self.buf, self.msgs, self.next_id = b"", [], 1

    def pump(self, timeout):
        import select
        r, _, _ = select.select([self.p.stdout], [], [], max(0, timeout))
        if not r:
            return
        chunk = os.read(self.p.stdout.fileno(), 1 << 20)
        if not chunk:
            raise EOFError
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            m = json.loads(line)
            m["_t"] = time.monotonic()
            self.msgs.append(m)
            if m.get("ev") == "spawned":
                for r in m.get("ranks", []):
                    if "pid" in r:
                        note("pgids", r["pid"])

    def wait(self, pred, timeout=10.0):
        end, seen = time.monotonic() + timeout, 0
        while True:
            for m in self.msgs[seen:]:
                if pred(m):
                    return m
            seen = len(self.msgs)
            if time.monotonic() >= end:
                return None
            try:
                self.pump(end - time.monotonic())
            except EOFError:
                return None

    def spawn(self, script, rank, renv=None, **kw):
        ro = {"rank": rank, "env": renv} if renv else {"rank": rank}
        req = dict({"op": "spawn", "argv": ["sh", "-c", script], "ranks": [ro],
                    "id": self.next_id}, **kw)
        self.next_id += 1
        self.p.stdin.write((json.dumps(req) + "\n").encode())
        self.p.stdin.flush()
        return self.wait(lambda m: m.get("id") == req["id"]) or {}

    def text(self, rank, s):
        return "".join(m.get("t", "") for m in self.msgs
                       if m.get("ev") == "out" and m.get("rank") == rank and m.get("s") == s)

    def exit_of(self, rank, timeout=10.0):
        return self.wait(lambda m: m.get("ev") == "exit" and m.get("rank") == rank, timeout) or {}

    def end(self, timeout=15.0):
        """Closes stdin; the agent's exit status (None: still running after timeout)."""
        try:
            self.p.stdin.close()
        except OSError:
            pass
        end = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < end:
            try:
                self.pump(0.1)
            except EOFError:
                pass
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
            return None
        return self.p.returncode


def mode_uid(path):
    st = os.lstat(path)
    return stat.S_IMODE(st.st_mode), st.st_uid


# ---- 1. the attack of issue 18 at the old names; a rank's own FIFO, link, directory ----------
env = dict(os.environ, TMPDIR=SHARED, GO=TMP + "/go")
ag = Agent(env)
check("hello", (ag.wait(lambda m: m.get("ev") == "hello", 5) or {}).get("ev") == "hello")
pid = ag.p.pid
old = lambda r: f"{SHARED}/ddptop-{pid}-a0-r{r}.error.json"


def kind(path):
    try:
        m = os.lstat(path).st_mode
    except OSError:
        return None
    return "fifo" if stat.S_ISFIFO(m) else "link" if stat.S_ISLNK(m) else "other"


# Ranks 5 and 6 run until the other user has planted at their old names (as in the issue: after
# the agent's unlink at spawn, before the rank's exit).
wait_go = 'i=0; while [ ! -e "$GO" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; exit 8'
ag.spawn(wait_go, 5, attempt=0, watchdog_ms=0)
ag.spawn(wait_go, 6, attempt=0)
r1 = other("mkfifo", old(5))
r2 = other("ln", "-s", TMP + "/secret", old(6))
check("the other user planted a FIFO and a link at the old predictable names of running ranks",
      r1.returncode == 0 and r2.returncode == 0 and kind(old(5)) == "fifo" and kind(old(6)) == "link",
      r1.stderr, r2.stderr)
open(TMP + "/go", "w").close()
e5, e6 = ag.exit_of(5), ag.exit_of(6)
check("their exits arrive with code 8, no error file: the agent never looks there (no hang, no copy)",
      e5.get("code") == 8 and e6.get("code") == 8 and e5.get("error_file", "x") is None and
      e6.get("error_file", "x") is None and all(SECRET not in json.dumps(m) for m in ag.msgs), e5, e6)

show = 'F=$TORCHELASTIC_ERROR_FILE; echo "$F"; '
t0 = time.monotonic()
ag.spawn(show + 'printf \'{"message": "boom"}\' >"$F"; exit 7', 0, attempt=0, watchdog_ms=0)
ag.spawn(show + 'rm -f "$F"; mkfifo "$F"; exit 5', 1, attempt=0)
ag.spawn(show + 'rm -f "$F"; ln -s "$SECRET_FILE" "$F"; exit 6', 2, attempt=0)
ag.spawn(show + 'head -c 1048576 /dev/zero | tr "\\0" x >"$F"; exit 2', 3, attempt=0)
ag.spawn(show + 'rm -f "$F"; mkdir "$F"; exit 9', 4, attempt=0)
ex = {r: ag.exit_of(r) for r in range(5)}
took = time.monotonic() - t0
path = {r: ag.text(r, "o").strip() for r in range(5)}
err = {r: ag.text(r, "e") for r in range(5)}

rundir = os.path.dirname(path[0])
base = f"{SHARED}/ddptop-{UID}/runs/agent-{pid}."
check("the error file is in the agent's own directory DIR/ddptop-UID/runs/agent-PID.XXXXXX, "
      "not at a predictable name", path[0].startswith(base) and path[0] == rundir + "/a0-r0.error.json" and
      all(path[r] == f"{rundir}/a0-r{r}.error.json" for r in range(5)), path)
check("that directory and DIR/ddptop-UID are 0700 and ours",
      os.path.isdir(rundir) and mode_uid(rundir) == (0o700, UID) and
      mode_uid(f"{SHARED}/ddptop-{UID}") == (0o700, UID), rundir)
check("a written error file arrives with its exit (code 7) and is removed after it",
      ex[0].get("code") == 7 and ex[0].get("error_file") == '{"message": "boom"}' and
      not os.path.lexists(path[0]), ex[0])
check("the planted FIFO and link are left alone", kind(old(5)) == "fifo" and kind(old(6)) == "link")

check("a rank that made its error file a FIFO: its exit comes at once with code 5",
      ex[1].get("code") == 5 and ex[1].get("error_file", "x") is None and took < 8, ex[1], took)
check("... and its stderr names the file and why it was ignored",
      err[1] == f"ddptop-agent: rank 1: error file {path[1]} is not a regular file of ours (a FIFO); ignored\n",
      err[1])
check("a rank that linked its error file to a 0600 file: code 6, the secret is not copied",
      ex[2].get("code") == 6 and ex[2].get("error_file", "x") is None and
      all(SECRET not in json.dumps(m) for m in ag.msgs), ex[2])
check("... and its stderr names the file (a symbolic link)",
      err[2] == f"ddptop-agent: rank 2: error file {path[2]} is not a regular file of ours "
      "(a symbolic link); ignored\n", err[2])
check("a 1 MiB error file: 64 KiB of it arrive, code 2",
      ex[3].get("code") == 2 and ex[3].get("error_file") == "x" * 65536,
      ex[3].get("code"), len(ex[3].get("error_file") or ""))
check("a directory at the error file's path: code 9, named (a directory)",
      ex[4].get("code") == 9 and ex[4].get("error_file", "x") is None and
      err[4].endswith("is not a regular file of ours (a directory); ignored\n"), ex[4], err[4])

rc = ag.end()
check("stdin EOF: the agent exits 0 and removes its directory with what its ranks left there",
      rc == 0 and not os.path.lexists(rundir), rc, os.listdir(rundir) if os.path.isdir(rundir) else "")
with open(TMP + "/secret") as f:
    check("the secret the link pointed at is intact (the link was removed, not its target)",
          f.read().strip() == SECRET)
other("rm", "-f", old(5), old(6))

# ---- 2. a grace that runs out removes the directory too ---------------------------------------
ag = Agent(env)
ag.wait(lambda m: m.get("ev") == "hello", 5)
ag.spawn(show + 'exec sleep 30', 0, attempt=0, watchdog_ms=0, grace_ms=1000, run="nodefiles", node=0)
ag.wait(lambda m: m.get("ev") == "out" and m.get("rank") == 0, 5)
p_grace = ag.text(0, "o").strip()
rundir = os.path.dirname(p_grace)
had = os.path.isdir(rundir)
rc = ag.end(timeout=20)
check("controller gone, grace of 1 s ran out: the agent exits and its directory is gone",
      had and p_grace.startswith(f"{SHARED}/ddptop-{UID}/runs/agent-") and rc is not None and
      not os.path.lexists(rundir), had, p_grace, rc)

# ---- 3. the other user takes the per-user directories first ------------------------------------
env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
r = other("mkdir", "-m", "777", f"/tmp/ddptop-{UID}")
check("the other user pre-created /tmp/ddptop-UID (0777)", r.returncode == 0, r.stderr)
ag = Agent(env)
ag.wait(lambda m: m.get("ev") == "hello", 5)
ag.spawn(show + 'printf "{}" >"$F"; exit 4', 0, attempt=0, watchdog_ms=0)
e = ag.exit_of(0)
p = ag.text(0, "o").strip()
check("the agent avoids it: the error file is under /dev/shm/ddptop-UID, read as usual",
      p.startswith(f"/dev/shm/ddptop-{UID}/runs/agent-") and e.get("code") == 4 and
      e.get("error_file") == "{}", p, e)
check("nothing of ours went into the other user's directory", os.listdir(f"/tmp/ddptop-{UID}") == [])
ag.end()
subprocess.run(["rm", "-rf", f"/dev/shm/ddptop-{UID}"])

r = other("mkdir", "-m", "777", f"/dev/shm/ddptop-{UID}")
ag = Agent(env)
ag.wait(lambda m: m.get("ev") == "hello", 5)
ag.spawn('echo "ef=${TORCHELASTIC_ERROR_FILE-unset}"; exit 4', 0, attempt=0, watchdog_ms=0)
e = ag.exit_of(0)
out, er = ag.text(0, "o"), ag.text(0, "e")
check("both taken: the rank runs without TORCHELASTIC_ERROR_FILE, its exit code 4 arrives",
      r.returncode == 0 and out == "ef=unset\n" and e.get("code") == 4 and e.get("error_file", "x") is None,
      r.stderr, out, e)
want = (f"ddptop-agent: rank 0: no private directory on this node: /tmp/ddptop-{UID} belongs to uid "
        f"65534, not to us (uid {UID}); /dev/shm/ddptop-{UID} belongs to uid 65534, not to us "
        f"(uid {UID}); it runs without TORCHELASTIC_ERROR_FILE\n")
check("... and its stderr says which directories were refused and why", er == want, er, want)
check("the other user's directories stay empty",
      os.listdir(f"/tmp/ddptop-{UID}") == [] and os.listdir(f"/dev/shm/ddptop-{UID}") == [])
ag.end()
subprocess.run(["rm", "-rf", f"/tmp/ddptop-{UID}", f"/dev/shm/ddptop-{UID}"])

# ---- 4. the other user takes the flight recorder's dump directory first ---------------------
fr = "/tmp/ddptop-nccl-nodefiles"
victim = TMP + "/victim"
with open(victim, "w") as f:
    f.write("mine\n")
r = other("sh", "-c", f'mkdir -m 777 {fr} && ln -s {victim} {fr}/a0-rank-0')
ag = Agent(env)
ag.wait(lambda m: m.get("ev") == "hello", 5)
ag.spawn('V=$TORCH_NCCL_DEBUG_INFO_TEMP_FILE; echo "$V"; [ -n "$V" ] && echo dump >"${V}0"', 0, attempt=0,
         watchdog_ms=0, renv={"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": fr + "/a0-rank-"})
ag.spawn('echo "$TORCH_NCCL_DEBUG_INFO_TEMP_FILE"', 1, attempt=0,
         renv={"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": fr + "/a0-rank-"})
e = ag.exit_of(0)
ag.exit_of(1)
v = ag.text(0, "o").strip()
er = ag.text(0, "e")
check("the other user pre-made the dump directory (0777) with a link at rank 0's dump name",
      r.returncode == 0 and kind(fr + "/a0-rank-0") == "link", r.stderr)
check("the rank is told to dump in the agent's own directory instead, and PyTorch's write "
      "there does not go through the link", v.startswith(f"/tmp/ddptop-{UID}/runs/agent-") and v.endswith("/dumps-0/a0-rank-") and e.get("code") == 0 and
      open(victim).read() == "mine\n", v, e)
check("... and its stderr says why",
      er.startswith(f"ddptop-agent: rank 0: the flight recorder's directory {fr} belongs to uid 65534, not to us (uid {UID}): "
                    "its dumps go to ") and er.endswith("/dumps-0 instead\n"), er)
check("a second rank with the same directory: the same place, and its stderr says so too",
      ag.text(1, "o").strip() == v and ag.text(1, "e") == er.replace("rank 0:", "rank 1:"),
      ag.text(1, "o"), ag.text(1, "e"))
i = ag.next_id
ag.next_id += 1
ag.p.stdin.write((json.dumps({"op": "list", "prefix": fr + "/a0-rank-", "id": i}) + "\n").encode())
ag.p.stdin.flush()
ls = ag.wait(lambda m: m.get("id") == i) or {}
check("list of the original prefix finds the dump where it went",
      ls.get("files") == [{"path": v + "0", "size": 5}], ls)
moved = os.path.dirname(v)
ag.end()
check("the moved dump directory goes with the agent's", not os.path.lexists(moved) and
      os.listdir(fr) == ["a0-rank-0"], moved)
other("rm", "-rf", fr)

# ---- 5. a whole run: the secret stays out of events.jsonl and the logs ----------------------
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
logs = TMP + "/logs"
try:
    run = subprocess.run([DDPTOP, "run", "--headless", "--no-check", "--nproc-per-node", "1",
                          "--master-port", str(port), "--log-dir", logs, "--run-id", "nf-secret",
                          "--", "sh", "-c", 'ln -s "$SECRET_FILE" "$TORCHELASTIC_ERROR_FILE"; '
                          'echo linked; exit 3'],
                         capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
                         env={k: v for k, v in os.environ.items() if k != "SECRET"} | {"NO_COLOR": "1"})
    rc, out = run.returncode, run.stdout + run.stderr
except subprocess.TimeoutExpired as x:
    rc, out = None, str(x)
found = []
for d, _, files in os.walk(logs):
    for f in files:
        with open(os.path.join(d, f), "rb") as fh:
            if SECRET.encode() in fh.read():
                found.append(os.path.join(d, f))
events = []
try:
    with open(f"{logs}/nf-secret/events.jsonl") as f:
        events = [json.loads(l) for l in f]
except (OSError, ValueError) as x:
    events = [{"error": str(x)}]
cause = [e for e in events if e.get("kind") == "root_cause"]
check("ddptop run: the job fails (exit 1) with rank 0's exit code 3 as its root cause",
      rc == 1 and cause and cause[0].get("exit_code") == 3 and cause[0].get("error_file") is None,
      rc, out[-1500:], cause)
check("ddptop run: the secret is nowhere in the log directory (events.jsonl included)",
      events and not found and SECRET not in out, found)
try:
    with open(f"{logs}/nf-secret/attempt-0/rank-0.log", errors="replace") as f:
        log = f.read()
except OSError as x:
    log = str(x)
check("ddptop run: the rank's log says its error file was ignored, and why",
      "is not a regular file of ours (a symbolic link); ignored" in log, log[-800:])

tap.done()
PY

PYTHONPATH="$PWD/tests/lib" AGENT="$AGENT" DDPTOP="$DDPTOP" TMP="$tmp" SECRET="$secret" \
    SECRET_FILE="$tmp/secret" \
    unshare --mount --propagation private bash -c \
    '. "$1" && private_tmp_mount 64m /dev/shm && exec /usr/bin/python3 "$0"' "$tmp/driver.py" \
    "$PWD/tests/lib/private_tmp.sh"
