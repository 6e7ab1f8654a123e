#!/usr/bin/env bash
# it_agent: the real ddptop-agent as a child process, driven over its stdin/stdout the way the
# controller drives it over SSH: hello, facts (checked against uname, sha256sum, a fake
# nvidia-smi on PATH — the one thing that cannot exist here is a GPU), clock, listen/connect
# with nonces on loopback, errors, slow reader, and exit on {"op":"exit"} and on stdin EOF.
# The name-resolution and no-route cases run the agent in a network namespace of its own with
# only loopback, so no packet leaves this machine. The driver is Python (standard library only).
set -u
. "$(dirname "$0")/lib/tap.sh"

AGENT="$DDPTOP_BUILD/ddptop-agent"
tmp=$(mktemp -d /tmp/ddptop-it-agent.XXXXXX)
cleanup() {
    # Every agent and fake-probe process the driver started wrote its pid here.
    if [ -f "$tmp/pids" ]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$tmp/pids"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
touch "$tmp/pids"

if [ ! -x "$AGENT" ]; then
    tap_fail "agent binary exists" "missing $AGENT: run make first"
    tap_done
    exit 1
fi

mkdir -p "$tmp/bin" "$tmp/hungbin" "$tmp/home"
# A fake nvidia-smi (named as such): two GPUs in the query form, the banner otherwise. It takes
# a second, like a real one without persistence mode; the agent runs both calls side by side.
cat >"$tmp/bin/nvidia-smi" <<'SH'
#!/bin/sh
sleep 1
case "$1" in
--query-gpu=*)
    echo "NVIDIA H100 80GB HBM3, 550.54.15"
    echo "NVIDIA H100 80GB HBM3, 550.54.15" ;;
*)
    echo "+-----------------------------------------------------------------------------------------+"
    echo "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |"
    echo "+-----------------------------------------------------------------------------------------+" ;;
esac
SH
# A fake nvidia-smi that hangs, with a child of its own: the agent must kill both.
cat >"$tmp/hungbin/nvidia-smi" <<SH
#!/bin/sh
echo \$\$ >>"$tmp/pids"
sleep 300 &
echo \$! >"$tmp/hung-child"
echo \$! >>"$tmp/pids"
wait
SH
printf '#!/bin/sh\necho training\n' >"$tmp/bin/train-cmd"
chmod +x "$tmp/bin/nvidia-smi" "$tmp/hungbin/nvidia-smi" "$tmp/bin/train-cmd"
printf 'NCCL_DEBUG=WARN\n' >"$tmp/home/.nccl.conf"

cat >"$tmp/driver.py" <<'PY'
import ctypes, hashlib, json, os, re, select, socket, subprocess, sys, threading, time

AGENT, TMP = os.environ["AGENT"], os.environ["TMP"]
import tap
from tap import check


class Agent:
    def __init__(self, env, prefix=()):
        self.p = subprocess.Popen(list(prefix) + [AGENT], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env)
        with open(os.path.join(TMP, "pids"), "a") as f:
            f.write(f"{self.p.pid}\n")
        self.buf = b""
        self.pending = []   # answers read while waiting for another one
        self.raw = {}       # id -> the raw line, for format checks
        self.next_id = 1

    def write(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def read_msg(self, timeout=10.0):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from the agent")
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise EOFError("agent closed its stdout")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        msg = json.loads(line)
        if "id" in msg:
            self.raw[msg["id"]] = line
        return msg

    def wait_id(self, i, timeout=10.0):
        for m in self.pending:
            if m.get("id") == i:
                self.pending.remove(m)
                return m
        end = time.monotonic() + timeout
        while True:
            m = self.read_msg(max(0.01, end - time.monotonic()))
            if m.get("id") == i:
                return m
            self.pending.append(m)

    def send(self, obj):
        if "id" not in obj:
            obj = dict(obj, id=self.next_id)
            self.next_id += 1
        self.write((json.dumps(obj) + "\n").encode())
        return obj["id"]

    def request(self, obj, timeout=10.0):
        return self.wait_id(self.send(obj), timeout)

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

base_env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
base_env.pop("CUDA_VISIBLE_DEVICES", None)
env = dict(base_env, PATH=f"{TMP}/bin:" + os.environ["PATH"], HOME=f"{TMP}/home",
           NCCL_FOO="bar", NCCL_BAR="keep")
ag = Agent(env)

# ---- hello ----
try:
    hello = ag.read_msg(5)
except Exception as e:
    hello = {"error": repr(e)}
version = subprocess.run([AGENT, "--version"], capture_output=True, text=True).stdout.split()
check("the agent speaks first: hello with protocol 3", hello.get("ev") == "hello" and
      hello.get("protocol") == 3 and "id" not in hello, hello)
check("hello carries version, arch and the agent's pid",
      [hello.get("version")] == version[1:] and hello.get("arch") == os.uname().machine and
      hello.get("pid") == ag.p.pid, hello, version)

# ---- facts ----
cmd_file = f"{TMP}/bin/train-cmd"
t0 = time.monotonic()
f = ag.request({"op": "facts", "cmd": "train-cmd",
                "env": {"NCCL_FOO": "override", "NCCL_NEW": "1", "CUDA_VISIBLE_DEVICES": "0,1"}}, 30)
took = time.monotonic() - t0
check("facts runs its probes side by side (two 1 s nvidia-smi calls in under 1.8 s)",
      f.get("ev") == "facts" and took < 1.8, f.get("ev"), took)
check("facts: kernel and arch are uname's", f.get("kernel") == os.uname().release and
      f.get("arch") == os.uname().machine, f.get("kernel"), f.get("arch"))
check("facts: ddptop_version matches the binary", [f.get("ddptop_version")] == version[1:])
check("facts: libc is glibc's version",
      f.get("libc") == os.confstr("CS_GNU_LIBC_VERSION").split()[1], f.get("libc"))
pretty = None
for line in open("/etc/os-release"):
    if line.startswith("PRETTY_NAME="):
        pretty = line.split("=", 1)[1].strip().strip('"')
check("facts: os is os-release's PRETTY_NAME", f.get("os") == pretty, f.get("os"), pretty)
check("facts: nccl_env = the agent's NCCL_* overridden by the request's env",
      f.get("nccl_env") == {"NCCL_FOO": "override", "NCCL_BAR": "keep", "NCCL_NEW": "1"},
      f.get("nccl_env"))
check("facts: cuda_visible_devices from the request's env", f.get("cuda_visible_devices") == "0,1",
      f.get("cuda_visible_devices"))
want = subprocess.run(["sha256sum", cmd_file], capture_output=True, text=True).stdout.split()[0]
check("facts: cmd resolved on PATH and hashed like sha256sum",
      f.get("cmd_path") == cmd_file and f.get("cmd_sha256") == want,
      f.get("cmd_path"), f.get("cmd_sha256"), want)
conf = subprocess.run(["sha256sum", f"{TMP}/home/.nccl.conf"], capture_output=True, text=True).stdout.split()[0]
etc = (subprocess.run(["sha256sum", "/etc/nccl.conf"], capture_output=True, text=True).stdout.split()[0]
       if os.path.exists("/etc/nccl.conf") else None)
check("facts: nccl_conf hashes ~/.nccl.conf, null for an absent /etc/nccl.conf",
      f.get("nccl_conf") == {"/etc/nccl.conf": etc, "~/.nccl.conf": conf}, f.get("nccl_conf"))
gpu = f.get("gpu", {})
check("facts: gpu parsed from (fake) nvidia-smi",
      gpu.get("count") == 2 and gpu.get("model") == "NVIDIA H100 80GB HBM3" and
      gpu.get("driver") == "550.54.15" and gpu.get("cuda_driver") == "12.4" and
      gpu.get("source") == "nvidia-smi", gpu)
pyv = subprocess.run(["python3", "--version"], capture_output=True, text=True, env=env).stdout.split()
check("facts: python3 version", [f.get("python3")] == pyv[1:], f.get("python3"), pyv)
import importlib.util
has_torch = importlib.util.find_spec("torch") is not None
check("facts: torch is null exactly when python3 cannot import it",
      bool(re.match(r"^\d", f.get("torch") or "")) if has_torch else f.get("torch") is None,
      f.get("torch"), f"torch importable here: {has_torch}")

def nccl_expected():
    for name in ["libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2"]:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int()
        if lib.ncclGetVersion(ctypes.byref(v)) == 0:
            c = v.value
            return (f"{c // 10000}.{c % 10000 // 100}.{c % 100}" if c >= 10000
                    else f"{c // 1000}.{c % 1000 // 100}.{c % 100}")
    return None
check("facts: nccl is what ncclGetVersion says (null without NCCL)",
      f.get("nccl") == nccl_expected(), f.get("nccl"), nccl_expected())
check("facts: cuda_runtime is null or major.minor",
      f.get("cuda_runtime") is None or re.fullmatch(r"\d+\.\d+", f["cuda_runtime"]), f.get("cuda_runtime"))
lo = [i for i in f.get("ifaces", []) if i.get("name") == "lo"]
check("facts: ifaces lists lo, up, with 127.0.0.1/8 and its MTU",
      lo and lo[0].get("up") is True and "127.0.0.1/8" in lo[0].get("ipv4", []) and
      isinstance(lo[0].get("mtu"), int) and lo[0].get("mtu") > 0, lo)
check("facts: ib is a list", isinstance(f.get("ib"), list), f.get("ib"))

def empties(v, path="facts"):
    if v == "":
        yield path
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from empties(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from empties(x, f"{path}[{i}]")
bad = list(empties(f))
check("facts: unknown values are null, never empty strings", not bad, bad)

f2 = ag.request({"op": "facts", "cmd": cmd_file, "env": {"NCCL_FOO": None, "CUDA_VISIBLE_DEVICES": ""}}, 30)
check("facts: cmd given as a path is hashed; a null in env unsets",
      f2.get("cmd_path") == cmd_file and f2.get("cmd_sha256") == want and
      f2.get("nccl_env") == {"NCCL_BAR": "keep"}, f2.get("cmd_path"), f2.get("nccl_env"))
check("facts: an empty CUDA_VISIBLE_DEVICES (no GPU visible) is kept apart from unset",
      f2.get("cuda_visible_devices") == "", f2.get("cuda_visible_devices"))
f3 = ag.request({"op": "facts", "cmd": "no-such-training-command"}, 30)
check("facts: a command not on PATH is null with cmd_error",
      f3.get("cmd_path") is None and f3.get("cmd_sha256") is None and
      f3.get("cmd_error") == "not found on PATH", f3.get("cmd_path"), f3.get("cmd_error"))
check("facts: an unset CUDA_VISIBLE_DEVICES is null", "cuda_visible_devices" in f3 and
      f3["cuda_visible_devices"] is None, f3.get("cuda_visible_devices"))
e = ag.request({"op": "facts", "env": ["NCCL_X"]})
check("facts: env that is not an object is an error", e.get("ev") == "error", e)

# ---- clock ----
before = time.time_ns()
c = ag.request({"op": "clock"})
after = time.time_ns()
raw = ag.raw.get(c.get("id"), b"")
check("clock: wall_ns within a second of local time",
      isinstance(c.get("wall_ns"), int) and abs(c["wall_ns"] - (before + after) // 2) < 1_000_000_000, c)
check("clock: wall_ns written as a JSON integer", re.search(rb'"wall_ns":\d{19}[,}]', raw), raw)

# ---- listen / connect ----
l = ag.request({"op": "listen", "port": 0, "nonce": "n0nce"})
port = l.get("port")
check("listen on an ephemeral port", l.get("ok") is True and isinstance(port, int) and port > 0, l)
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    data = b""
    while not data.endswith(b"\n") and len(data) < 200:
        chunk = s.recv(100)
        if not chunk:
            break
        data += chunk
    s.close()
except Exception as ex:
    data = repr(ex).encode()
check("the listener greets with 'ddptop <nonce>'", data == b"ddptop n0nce\n", data)
r = ag.request({"op": "connect", "addr": "127.0.0.1", "port": port, "nonce": "n0nce", "timeout_ms": 3000})
check("connect with the right nonce", r.get("ok") is True and isinstance(r.get("ms"), (int, float)), r)
r = ag.request({"op": "connect", "addr": "127.0.0.1", "port": port, "nonce": "other"})
check("connect with a wrong nonce: wrong service",
      r.get("ok") is False and r.get("error", "").startswith(f"wrong service on port {port}"), r)
closed = free_port()
r = ag.request({"op": "connect", "addr": "127.0.0.1", "port": closed, "nonce": "x"})
check("connect to a closed port: connection refused",
      r.get("ok") is False and r.get("error") == "connection refused", r)
r = ag.request({"op": "connect", "addr": "[::1]", "port": closed, "nonce": "x"})
check("connect to bracketed IPv6 [::1]", r.get("ok") is False and r.get("error") == "connection refused", r)

busy = socket.socket()
busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
busy.bind(("0.0.0.0", 0))
busy.listen(16)
bport = busy.getsockname()[1]
r = ag.request({"op": "listen", "port": bport, "nonce": "n"})
check("listen on a port already in use: ok false, 'in use'",
      r.get("ok") is False and r.get("error") == f"port {bport} is in use", r)

def ssh_like(sock):
    try:
        conn, _ = sock.accept()
        conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
        conn.close()
    except OSError:
        pass
threading.Thread(target=ssh_like, args=(busy,), daemon=True).start()
r = ag.request({"op": "connect", "addr": "127.0.0.1", "port": bport, "nonce": "n"})
check("connect to another service: wrong service, saying what answered",
      r.get("ok") is False and r.get("error") == f'wrong service on port {bport} (it said "SSH-2.0-OpenSSH_9.2")', r)

silent = socket.socket()
silent.bind(("127.0.0.1", 0))
silent.listen(16)   # the kernel completes handshakes; nobody ever writes
sport = silent.getsockname()[1]
t0 = time.monotonic()
slow_id = ag.send({"op": "connect", "addr": "127.0.0.1", "port": sport, "nonce": "n", "timeout_ms": 1500})
c = ag.request({"op": "clock"}, 5)
check("connects run in the loop: a later clock is answered first",
      c.get("ev") == "clock" and time.monotonic() - t0 < 1.0, c)
r = ag.wait_id(slow_id, 5)
took = time.monotonic() - t0
check("connect to a silent service times out after timeout_ms",
      r.get("ok") is False and r.get("error", "").startswith("timed out") and 1.3 < took < 3.5, r, took)

r = ag.request({"op": "unlisten", "port": port})
check("unlisten", r.get("ok") is True, r)
r = ag.request({"op": "connect", "addr": "127.0.0.1", "port": port, "nonce": "n0nce"})
check("after unlisten the port is closed", r.get("error") == "connection refused", r)
# The listener lets its peers close first, so the listened port (the rendezvous port) keeps no
# TIME_WAIT entries: a store that binds it right after the check, even without SO_REUSEADDR,
# must succeed.
time.sleep(0.3)
b = socket.socket()
try:
    b.bind(("0.0.0.0", port))
    rebind = True
except OSError as ex:
    rebind = ex
b.close()
check("after greeted connections the port binds at once, even without SO_REUSEADDR",
      rebind is True, rebind)
r = ag.request({"op": "unlisten", "port": port})
check("unlisten of a port not listened on: ok false",
      r.get("ok") is False and r.get("error") == f"not listening on port {port}", r)

# ---- errors and framing ----
i = ag.send({"op": "frobnicate"})
r = ag.wait_id(i)
check("unknown op: error event with the id",
      r == {"ev": "error", "id": i, "error": "unknown op 'frobnicate'"}, r)
ag.write(b'{"op": "clock", "id": \n')
r = ag.read_msg()
check("malformed JSON: error event without id", r.get("ev") == "error" and "id" not in r, r)
r = ag.request({"op": "listen", "port": 70000, "nonce": "n"})
check("a bad argument is an error naming it", r.get("ev") == "error" and '"port"' in r.get("error", ""), r)
ag.write(b'{"op": "cl')
time.sleep(0.2)
ag.write(b'ock", "id": 900}\n')
r = ag.wait_id(900)
check("a request split across writes is reassembled", r.get("ev") == "clock", r)
ag.write(b"x" * (1024 * 1024 + 100) + b"\n")
r = ag.read_msg()
c = ag.request({"op": "clock"})
check("a line over 1 MiB is an error and is discarded; the agent goes on",
      r.get("ev") == "error" and "longer than" in r.get("error", "") and c.get("ev") == "clock", r, c)

# Slow reader: 20000 requests while nobody reads the answers (several times both pipe buffers). An
# agent that blocked on stdout would stop reading stdin and the writer would stall.
N = 20000
reqs = b"".join(b'{"op":"clock","id":%d}\n' % (10000 + k) for k in range(N))
done = threading.Event()
def writer():
    ag.write(reqs)
    done.set()
threading.Thread(target=writer, daemon=True).start()
check("a slow reader never blocks the agent's loop", done.wait(10))
got = 0
try:
    while got < N:
        m = ag.read_msg(10)
        if m.get("ev") == "clock" and m.get("id", 0) >= 10000:
            got += 1
except Exception as ex:
    print(f"# {ex!r}")
check("every queued answer arrives once the reader catches up", got == N, got)

# ---- exit ----
i = ag.send({"op": "exit"})
r = ag.wait_id(i)
try:
    rc = ag.p.wait(3)
except subprocess.TimeoutExpired:
    rc = "still running"
check('{"op":"exit"}: answered, exit status 0', r.get("ev") == "exit" and rc == 0, r, rc)

# stdin EOF: the agent exits promptly and its listeners are gone with it.
ag2 = Agent(env)
ag2.read_msg()
l = ag2.request({"op": "listen", "port": 0, "nonce": "bye"})
lport = l.get("port")
t0 = time.monotonic()
ag2.p.stdin.close()
try:
    rc = ag2.p.wait(3)
except subprocess.TimeoutExpired:
    rc = "still running"
took = time.monotonic() - t0
try:
    socket.create_connection(("127.0.0.1", lport), timeout=2).close()
    refused = False
except ConnectionRefusedError:
    refused = True
check("stdin EOF: exit status 0 within a second", rc == 0 and took < 1.0, rc, took)
check("stdin EOF: the agent's listener is closed", refused)
ag2.stop()

# A hung nvidia-smi: facts still answers (after the probe's time limit), the probe and its
# child are killed, and the GPU falls back to /proc or none.
hung_env = dict(env, PATH=f"{TMP}/hungbin:" + os.environ["PATH"])
ag3 = Agent(hung_env)
ag3.read_msg()
t0 = time.monotonic()
try:
    f = ag3.request({"op": "facts"}, 20)
except Exception as ex:
    f = {"error": repr(ex)}
took = time.monotonic() - t0
g = f.get("gpu", {})
check("a hung nvidia-smi is killed at its time limit; facts still answers",
      f.get("ev") == "facts" and took < 12 and "timed out" in g.get("error", ""), g, took)
try:
    child = int(open(f"{TMP}/hung-child").read())
    os.kill(child, 0)
    alive = not open(f"/proc/{child}/stat").read().split(") ")[1].startswith("Z")
except (OSError, ValueError):
    alive = False
check("the hung probe's own child is killed too", not alive)
nosmi = not any(os.access(os.path.join(d, "nvidia-smi"), os.X_OK)
                for d in os.environ["PATH"].split(":") if d)
if nosmi and not os.path.isdir("/proc/driver/nvidia/gpus"):
    check("no GPU: gpu is count 0, source none", g.get("count") == 0 and g.get("source") == "none", g)
else:
    check("a GPU machine: gpu falls back to a real count", g.get("count", 0) > 0 and
          g.get("source") in ("nvidia-smi", "proc"), g)
ag3.stop()

# Name resolution and routing, in a network namespace that has only loopback.
ns = Agent(env, ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0"'])
try:
    ns.read_msg(5)
    r1 = ns.request({"op": "connect", "addr": "no-such-host.invalid", "port": 80, "nonce": "n"})
    r2 = ns.request({"op": "connect", "addr": "10.1.2.3", "port": 80, "nonce": "n"})
except Exception as ex:
    r1 = r2 = {"error": f"could not run the agent in a network namespace (unshare -n): {ex!r}"}
check("connect to a name that does not resolve: unknown host <name>",
      r1.get("error") == "unknown host no-such-host.invalid", r1)
check("connect without a route: no route to host", r2.get("error") == "no route to host", r2)
ns.stop()

tap.done()
PY

PYTHONPATH="$PWD/tests/lib" AGENT="$AGENT" TMP="$tmp" python3 "$tmp/driver.py"
