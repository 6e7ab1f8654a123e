#!/usr/bin/env bash
# it_agent_bench: the measured preflight's requests on the real ddptop-agent, driven over
# stdin/stdout as the controller drives it (docs/protocol.md, "Measuring"). Links: two agents in
# two network namespaces joined by one veth pair (tests/lib/netns.sh makes and removes the
# namespaces), real TCP through real shaping: A's side under `tc ... tbf rate 50mbit` gives a
# bench_send figure of about 0.05 Gb/s while the other direction runs well above it, a delay of
# 20 ms each way (netem, or a userspace delay line where the kernel lacks netem) gives a round
# trip of about 40 ms; a wrong nonce, a silent client
# and a stranger's bytes are closed and counted; a closed port, a missing route and a name that
# does not resolve each give their error at once; a receiver stopped with SIGSTOP, mid-transfer
# or before it, gives "stalled" or "no answer" within bounded time; ten sends at once share one
# listener (eight served, the rest from the backlog) while the agent's loop keeps answering.
# GPUs: bench_host on the test double of the CUDA runtime and cuBLAS (tests/fakecudart, through
# LD_LIBRARY_PATH) and without any, in a mount namespace where this machine's own CUDA
# libraries, if it has any, are hidden: the figures, a failing, a slow, an old and a hung GPU.
# NCCL: bench_nccl on the NCCL test double (tests/fakenccl) with those GPUs: a node's own world
# of two ranks (the id as a partial answer, then the figures), bad requests refused (an "env"
# that is not NCCL's own), a peer that never joins (killed at the deadline, reaped soon after the
# answer), a stop;
# bench_dcgmi where DCGM is not installed, and on test doubles of dcgmi: one that exits 3 s after
# closing its output (its own status, not killed; the loop answers meanwhile), one that ignores
# SIGTERM and hangs (killed at the deadline, said so), and ones in a directory others can write,
# directly or through a link (refused, never run).
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh
. tests/lib/netns.sh

AGENT="$DDPTOP_BUILD/ddptop-agent"
FAKE="$DDPTOP_BUILD/fakecudart"
tmp=$(mktemp -d /tmp/ddptop-it-bench.XXXXXX)
cleanup() {
    # every agent the driver started wrote its pid here (stopped ones are woken to die)
    if [ -f "$tmp/pids" ]; then
        while read -r p; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done <"$tmp/pids"
    fi
    netns_cleanup
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
touch "$tmp/pids"

if [ ! -x "$AGENT" ] || [ ! -f "$FAKE/libcudart.so.12" ] || [ ! -f "$FAKE/libcublas.so.12" ]; then
    tap_fail "agent and fake CUDA libraries built" "missing $AGENT or $FAKE/*.so.12: run make first"
    tap_done
    exit 1
fi

# Two namespaces, one veth pair: vA (10.99.0.1) in A, vB (10.99.0.2) in B. The addresses live
# only inside the namespaces, so they clash with nothing and no packet leaves them.
NA="$NETNS_PREFIX-a" NB="$NETNS_PREFIX-b"
netns_sweep_dead
if ! netns_ns "$NA" || ! netns_ns "$NB" ||
   ! ip -n "$NA" link add vA type veth peer name vB netns "$NB" ||
   ! ip -n "$NA" addr add 10.99.0.1/24 dev vA || ! ip -n "$NB" addr add 10.99.0.2/24 dev vB ||
   ! ip -n "$NA" link set vA up || ! ip -n "$NB" link set vB up; then
    tap_fail "two network namespaces on a veth pair (needs root: ip netns, veth)"
    tap_done
    exit 1
fi
netns_wait_ping 10.99.0.2 "$NA" || { tap_fail "10.99.0.2 reachable from A"; tap_done; exit 1; }

# The 20 ms each way: netem where the kernel has it; else (CONFIG_NET_SCH_NETEM off, as here)
# a second link A-B of two tun devices, 10.98.0.1 - 10.98.0.2, through a userspace delay line
# (tests/lib/delayline.py) that holds every packet 20 ms in each direction.
if ip netns exec "$NA" tc qdisc add dev vA root netem delay 20ms 2>/dev/null; then
    ip netns exec "$NA" tc qdisc del dev vA root
    DELAY_MODE=netem DELAY_ADDR_B=10.99.0.2
else
    DELAY_MODE=tun DELAY_ADDR_B=10.98.0.2
    for side in A:1:2 B:2:1; do
        IFS=: read -r s me peer <<<"$side"
        ns=$NA; [ "$s" = B ] && ns=$NB
        ip -n "$ns" tuntap add dev "d$s" mode tun &&
            ip -n "$ns" addr add "10.98.0.$me" peer "10.98.0.$peer" dev "d$s" &&
            ip -n "$ns" link set "d$s" up || { tap_fail "tun device d$s"; tap_done; exit 1; }
        ip netns exec "$ns" python3 tests/lib/delayline.py "d$s" "$tmp/delay$s.sock" \
            "$tmp/delay$([ "$s" = A ] && echo B || echo A).sock" 20 &
        echo $! >>"$tmp/pids"
        disown $!   # killed at the end (cleanup): no job notice
    done
    netns_wait_ping 10.98.0.2 "$NA" || { tap_fail "10.98.0.2 reachable from A through the delay line"; tap_done; exit 1; }
fi

# Hides this machine's CUDA runtime and cuBLAS (those ld.so.cache names and the toolkit's
# directories) under empty tmpfs mounts, in a mount namespace of the agent's own: a bare node.
cat >"$tmp/bare.sh" <<'SH'
for d in $(ldconfig -p | sed -n 's|.*=> \(.*\)/libcu\(dart\|blas\)[^/]*$|\1|p' | sort -u) \
         /usr/local/cuda*/lib /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib; do
    [ -d "$d" ] && mount -t tmpfs ddptop-bare "$d"
done
unset CUDA_HOME
exec "$@"
SH

cat >"$tmp/driver.py" <<'PY'
import json, os, select, signal, subprocess, sys, threading, time

AGENT, TMP, FAKE = os.environ["AGENT"], os.environ["TMP"], os.environ["FAKE"]
NA, NB = os.environ["NA"], os.environ["NB"]
DELAY_MODE, DELAY_ADDR_B = os.environ["DELAY_MODE"], os.environ["DELAY_ADDR_B"]
ADDR_A, ADDR_B = "10.99.0.1", "10.99.0.2"
import tap
from tap import check

NONCE = "00112233445566778899aabbccddeeff"


class Agent:
    def __init__(self, prefix=(), env=None):
        self.p = subprocess.Popen(list(prefix) + [AGENT], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env)
        with open(os.path.join(TMP, "pids"), "a") as f:
            f.write(f"{self.p.pid}\n")
        self.buf = b""
        self.pending = []
        self.next_id = 1
        self.hello = self.read_msg(10)

    def read_msg(self, timeout):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from the agent")
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise EOFError("the agent closed its stdout")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, obj):
        if "id" not in obj:
            obj = dict(obj, id=self.next_id)
            self.next_id += 1
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()
        return obj["id"]

    def wait_id(self, i, timeout=10.0):
        for m in self.pending:
            if m.get("id") == i:
                self.pending.remove(m)
                return m
        end = time.monotonic() + timeout
        while True:
            try:
                m = self.read_msg(max(0.01, end - time.monotonic()))
            except Exception as ex:
                return {"driver_error": repr(ex)}
            if m.get("id") == i:
                return m
            self.pending.append(m)

    def request(self, obj, timeout=10.0):
        return self.wait_id(self.send(obj), timeout)

    def stop(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGCONT)
            self.p.kill()
        self.p.wait()


def in_ns(ns):
    return ["ip", "netns", "exec", ns]


def quick_clock(ag):
    """A clock request's answer time: the agent's loop is not blocked."""
    t0 = time.monotonic()
    c = ag.request({"op": "clock"}, 5)
    return c.get("ev") == "clock", time.monotonic() - t0


def tc(ns, *args):
    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc"] + list(args), check=True)


a = Agent(in_ns(NA))
b = Agent(in_ns(NB))
check("both agents start in their namespaces", a.hello.get("ev") == "hello" and b.hello.get("ev") == "hello")

# ---- bench_listen ----
la = a.request({"op": "bench_listen", "id": 100, "nonce": NONCE})
lb = b.request({"op": "bench_listen", "id": 200, "nonce": NONCE})
pa, pb = la.get("port"), lb.get("port")
check("bench_listen: bench_listening with an ephemeral port",
      la.get("ev") == "bench_listening" and la.get("id") == 100 and isinstance(pa, int) and pa > 0
      and "error" not in la, la)
r = a.request({"op": "bench_listen", "nonce": "xyz"})
check("bench_listen: a nonce that is not hex is refused", r.get("ev") == "error" and "nonce" in r.get("error", ""), r)

def send(ag, addr, port, nonce=NONCE, seconds=1.0, pings=5, timeout=30, **extra):
    req = dict({"op": "bench_send", "address": addr, "port": port, "nonce": nonce,
                "seconds": seconds, "pings": pings}, **extra)
    t0 = time.monotonic()
    r = ag.request(req, timeout)
    return r, time.monotonic() - t0

def figures_ok(r):
    return (r.get("ev") == "bench_sent" and "error" not in r and r.get("bytes", 0) > 0 and
            r.get("seconds", 0) > 0 and isinstance(r.get("rtt_us"), (int, float)) and
            abs(r["gbps"] - r["bytes"] * 8 / r["seconds"] / 1e9) < 1e-3 * max(1, r["gbps"]))

# ---- unshaped, both ways ----
r, took = send(b, ADDR_A, pa)
check("bench_send B to A unshaped: bytes, seconds, rtt_us and gbps = bytes*8/seconds/1e9",
      figures_ok(r) and 0.9 < r["seconds"] < 4 and took < 6, r, took)
fast = r.get("gbps", 0)
print(f"# unshaped B->A: {fast} Gb/s, rtt {r.get('rtt_us')} us")

# ---- to itself: the sender and the receiver in one loop, which must never wait on either ----
r, took = send(a, "127.0.0.1", pa, seconds=0.5)
check("an agent measures to its own listener (both ends in one loop)", figures_ok(r) and took < 4, r, took)
r, took = send(a, "[::1]", pa, seconds=0.5)
check("IPv6: [::1] reaches the same listener (one socket for both families)",
      figures_ok(r) if os.path.exists("/proc/net/if_inet6") else r.get("error") is not None, r)

# ---- A's side shaped to 50 Mbit/s ----
tc(NA, "add", "dev", "vA", "root", "tbf", "rate", "50mbit", "burst", "32kbit", "latency", "400ms")
t0 = time.monotonic()
sid = a.send({"op": "bench_send", "address": ADDR_B, "port": pb, "nonce": NONCE, "seconds": 2.0, "pings": 5})
ok_clock, ctook = quick_clock(a)
check("a transfer runs in the loop: a clock is answered meanwhile", ok_clock and ctook < 0.5, ctook)
r = a.wait_id(sid, 20)
took = time.monotonic() - t0
print(f"# shaped A->B (tbf 50mbit): {r.get('gbps')} Gb/s, {r.get('bytes')} bytes in {r.get('seconds')} s")
check("shaped 50 Mbit/s A to B: about 0.05 Gb/s (0.035 to 0.055)",
      figures_ok(r) and 0.035 <= r["gbps"] <= 0.055 and took < 8, r, took)
r, took = send(b, ADDR_A, pa)
print(f"# B->A while A's side is shaped: {r.get('gbps')} Gb/s")
check("the other direction stays well above it (over 10x)",
      figures_ok(r) and r["gbps"] > 10 * 0.055, r)
tc(NA, "del", "dev", "vA", "root")

# ---- 20 ms each way ----
if DELAY_MODE == "netem":
    tc(NA, "add", "dev", "vA", "root", "netem", "delay", "20ms")
    tc(NB, "add", "dev", "vB", "root", "netem", "delay", "20ms")
r, took = send(a, DELAY_ADDR_B, pb, seconds=1.0, pings=5)
print(f"# 20 ms each way ({DELAY_MODE}): rtt {r.get('rtt_us')} us, {r.get('gbps')} Gb/s")
check(f"20 ms each way ({DELAY_MODE}): rtt_us about 40000 (39000 to 50000)",
      figures_ok(r) and 39000 <= r["rtt_us"] <= 50000, r)
r, took = send(a, DELAY_ADDR_B, pb, pings=0, seconds=0.2)
check("pings 0: rtt_us null, the transfer still measured", r.get("rtt_us", 0) is None and r.get("bytes", 0) > 0, r)
if DELAY_MODE == "netem":
    tc(NA, "del", "dev", "vA", "root")
    tc(NB, "del", "dev", "vB", "root")

# ---- refusals: a wrong nonce, a silent client, a stranger ----
r, took = send(b, ADDR_A, pa, nonce="ffffffffffffffffffffffffffffffff")
check("a wrong nonce: wrong service, no figures", r.get("error") == "wrong service" and
      r.get("rtt_us", 0) is None and "bytes" not in r and took < 3, r, took)
client = r'''
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
if sys.argv[3]:
    s.sendall(sys.argv[3].encode())
t0 = time.monotonic()
try:
    d = s.recv(100)
except Exception as ex:
    d = repr(ex).encode()
print(round(time.monotonic() - t0, 2), d)
'''
out = subprocess.run(in_ns(NB) + ["python3", "-c", client, ADDR_A, str(pa), ""],
                     capture_output=True, text=True, timeout=15).stdout.split()
check("a client that says nothing is closed after about 2 s, told nothing",
      len(out) == 2 and 1.5 <= float(out[0]) <= 4 and out[1] == "b''", out)
out = subprocess.run(in_ns(NB) + ["python3", "-c", client, ADDR_A, str(pa), "GET / HTTP/1.0\r\n\r\n"],
                     capture_output=True, text=True, timeout=15).stdout.split()
check("a stranger's bytes: closed at once, told nothing",
      len(out) == 2 and float(out[0]) < 1 and out[1] == "b''", out)

# ---- errors of the connection ----
r, took = send(b, ADDR_A, 9)
check("a closed port: connection refused, at once", r.get("error") == "connection refused" and took < 2, r, took)
subprocess.run(["ip", "-n", NB, "route", "add", "unreachable", "10.99.9.9/32"], check=True)
r, took = send(b, "10.99.9.9", 1000)
check("no route: no route to host, at once", r.get("error") == "no route to host" and took < 2, r, took)
# a neighbour entry for a MAC nobody has: the SYNs leave and vanish
subprocess.run(["ip", "-n", NB, "neigh", "add", "10.99.0.66", "lladdr", "02:00:00:00:00:66",
                "dev", "vB", "nud", "permanent"], check=True)
r, took = send(b, "10.99.0.66", 1000)
check("SYNs lost on the way: no answer after the 3 s connect deadline",
      r.get("error") == "no answer" and 2.5 < took < 6, r, took)
r, took = send(b, "no-such-host.invalid", 1000)
check("a name that does not resolve: unknown host", r.get("error") == "unknown host", r)
r = b.request({"op": "bench_send", "address": ADDR_A, "port": pa, "nonce": NONCE, "seconds": 11})
check("seconds above 10: an error naming it", r.get("ev") == "error" and "seconds" in r.get("error", ""), r)

# ---- a receiver stopped mid-transfer, and before ----
t0 = time.monotonic()
sid = b.send({"op": "bench_send", "address": ADDR_A, "port": pa, "nonce": NONCE, "seconds": 6, "pings": 3})
time.sleep(1.0)
os.kill(a.p.pid, signal.SIGSTOP)
ok_clock, ctook = quick_clock(b)
r = b.wait_id(sid, 20)
took = time.monotonic() - t0
print(f"# stopped receiver: {r.get('error')} after {took:.1f} s, {r.get('sent')} bytes taken")
check("the receiver stopped mid-transfer: stalled, 3 to 4 s after its stop (never a hang)",
      r.get("error") == "stalled" and took < 7 and r.get("sent", 0) > 0 and
      isinstance(r.get("rtt_us"), (int, float)), r, took)
check("the sender's loop answers meanwhile", ok_clock and ctook < 0.5, ctook)
t0 = time.monotonic()
r = b.request({"op": "bench_send", "address": ADDR_A, "port": pa, "nonce": NONCE, "seconds": 1}, 20)
took = time.monotonic() - t0
check("the receiver stopped before: no answer to the first ping, after about 3 s",
      r.get("error") == "no answer" and 2.5 < took < 6, r, took)
os.kill(a.p.pid, signal.SIGCONT)
time.sleep(0.3)
r, took = send(b, ADDR_A, pa, seconds=0.5)
check("woken, the receiver serves again", figures_ok(r), r)

# ---- ten at once: eight served, two from the backlog ----
t0 = time.monotonic()
ids = [b.send({"op": "bench_send", "address": ADDR_A, "port": pa, "nonce": NONCE, "seconds": 0.5, "pings": 2})
       for _ in range(10)]
ok_clock, ctook = quick_clock(b)
rs = [b.wait_id(i, 30) for i in ids]
took = time.monotonic() - t0
check("ten sends at once to one listener: all measured (eight at once, the others after)",
      all(figures_ok(r) for r in rs) and took < 8, [r.get("error") or r.get("gbps") for r in rs], took)
check("the loop answers while ten run", ok_clock and ctook < 0.5, ctook)
lc = b.request({"op": "bench_listen", "nonce": NONCE})
ids = [a.send({"op": "bench_send", "address": ADDR_B, "port": pb, "nonce": NONCE, "seconds": 0.5}),
       a.send({"op": "bench_send", "address": ADDR_B, "port": lc.get("port"), "nonce": NONCE, "seconds": 0.5})]
rs = [a.wait_id(i, 20) for i in ids]
check("two listeners on one agent, measured at once", all(figures_ok(r) for r in rs), rs)

# ---- bench_unlisten ----
r = a.request({"op": "bench_unlisten", "id": 100})
check("bench_unlisten by the listen's id: the port, how many served and refused",
      r.get("ev") == "bench_unlisten" and r.get("port") == pa and r.get("served", 0) >= 16 and
      r.get("refused") == 3 and "error" not in r, r)
r, took = send(b, ADDR_A, pa)
check("after bench_unlisten the port is closed", r.get("error") == "connection refused", r)
r = b.request({"op": "bench_unlisten", "port": lc.get("port")})
check("bench_unlisten by port", r.get("port") == lc.get("port") and "error" not in r, r)
r = b.request({"op": "bench_unlisten", "port": lc.get("port")})
check("bench_unlisten twice: an error", "error" in r and r.get("ev") == "bench_unlisten", r)
a.stop()
b.stop()

# ---- bench_host ----
bare = ["unshare", "-m", "sh", os.path.join(TMP, "bare.sh")]
def host(env_extra=None, gpu_seconds=10, timeout=60, fake=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPTOP_FAKE_CUDART")}
    env.pop("LD_LIBRARY_PATH", None)
    if fake:
        env["LD_LIBRARY_PATH"] = FAKE
    env.update(env_extra or {})
    ag = Agent(bare, env)
    t0 = time.monotonic()
    r = ag.request({"op": "bench_host", "gpu_seconds": gpu_seconds}, timeout)
    return ag, r, time.monotonic() - t0

ag, r, took = host(fake=False)
print(f"# no CUDA: cpu_mem_gbs {r.get('cpu_mem_gbs')}, {took:.1f} s")
check("bench_host without CUDA: the CPU figure, no GPUs, gpu_error says no CUDA runtime",
      r.get("ev") == "bench_host" and r.get("cpu_mem_gbs", 0) > 0 and r.get("gpus") == [] and
      (r.get("gpu_error") or "").startswith("no CUDA runtime (libcudart.so."), r)
check("bench_host without CUDA: done in under 3 s", took < 3, took)
ag.stop()

def near(x, want):
    return isinstance(x, (int, float)) and abs(x - want) <= 0.02 * want

ag, r, took = host()
gs = r.get("gpus") or [{}]
print(f"# fake GPUs: {json.dumps(gs[0])}, {took:.1f} s")
check("bench_host on the fake CUDA: two GPUs, each with every figure the fake implies",
      len(gs) == 2 and r.get("gpu_error", 0) is None and r.get("cpu_mem_gbs", 0) > 0 and
      all(g.get("index") == i and g.get("name") == "FAKE H100 (ddptop test double)" and
          near(g.get("tf32_tflops"), 100) and near(g.get("bf16_tflops"), 200) and
          near(g.get("d2d_gbs"), 2000) and near(g.get("h2d_gbs"), 25) and
          g.get("memory_mib") == 81559 and g.get("cc") == "9.0" and g.get("error", 0) is None
          for i, g in enumerate(gs)), r)
r2 = ag.request({"op": "bench_host", "gpu_seconds": 0.01})
check("gpu_seconds below 0.1: an error naming it", r2.get("ev") == "error" and "gpu_seconds" in r2.get("error", ""), r2)
ag.stop()

ag, r, took = host({"DDPTOP_FAKE_CUDART_FAIL": "0", "DDPTOP_FAKE_CUDART_SLOW": "1"})
gs = r.get("gpus") or [{}, {}]
check("a failing GPU: its entry's error, no figures; the other GPU measured",
      len(gs) == 2 and "uncorrectable ECC error" in (gs[0].get("error") or "") and
      gs[0].get("tf32_tflops", 0) is None and gs[0].get("name") and r.get("gpu_error", 0) is None, r)
check("a slow GPU: a quarter of every figure",
      near(gs[1].get("tf32_tflops"), 25) and near(gs[1].get("bf16_tflops"), 50) and
      near(gs[1].get("d2d_gbs"), 500) and near(gs[1].get("h2d_gbs"), 6.25) and gs[1].get("error", 0) is None, gs[1])
ag.stop()

ag, r, took = host({"DDPTOP_FAKE_CUDART_OLD": "1", "DDPTOP_FAKE_CUDART_GPUS": "3"})
gs = r.get("gpus") or [{}, {}]
check("three GPUs, one of compute capability 7.0: its bf16 is null, its tf32 measured",
      len(gs) == 3 and gs[1].get("cc") == "7.0" and gs[1].get("bf16_tflops", 0) is None and
      near(gs[1].get("tf32_tflops"), 100) and gs[1].get("error", 0) is None and near(gs[2].get("bf16_tflops"), 200), gs)
ag.stop()

ag, r, took = host({"DDPTOP_FAKE_CUDART_NODEV": "1"})
check("no GPU visible: gpu_error from cudaGetDeviceCount",
      r.get("gpus") == [] and r.get("gpu_error") == "cudaGetDeviceCount: no CUDA-capable device is detected", r)
ag.stop()

ag = Agent(bare, dict(os.environ, LD_LIBRARY_PATH=FAKE, DDPTOP_FAKE_CUDART_HANG="1"))
t0 = time.monotonic()
hid = ag.send({"op": "bench_host", "gpu_seconds": 4})
time.sleep(1.5)
ok_clock, ctook = quick_clock(ag)
busy = ag.request({"op": "bench_host"})
r = ag.wait_id(hid, 30)
took = time.monotonic() - t0
print(f"# a hung GPU: answered after {took:.1f} s: {r.get('gpu_error')}")
check("a GPU that hangs: answered at the deadline (gpu_seconds + 8 s) with the GPUs so far",
      r.get("ev") == "bench_host" and "timed out" in (r.get("gpu_error") or "") and
      len(r.get("gpus", [])) == 1 and near(r["gpus"][0].get("tf32_tflops"), 100) and 11 < took < 16, r, took)
check("the loop answers while the GPUs are measured", ok_clock and ctook < 0.5, ctook)
check("a second bench_host while one runs: refused", busy.get("ev") == "error" and "already" in busy.get("error", ""), busy)
t0 = time.monotonic()
ag.p.stdin.close()
try:
    rc = ag.p.wait(5)
except subprocess.TimeoutExpired:
    rc = "still running"
check("the agent still exits at stdin's end, its thread hung in a GPU call", rc == 0 and time.monotonic() - t0 < 3, rc)
ag.stop()

# ---- bench_nccl: one agent's own world, bad requests, a peer that never joins, a stop ----
NCCL_LIBS = FAKE + ":" + os.path.join(os.path.dirname(FAKE), "fakenccl")
ag = Agent(bare, dict(os.environ, LD_LIBRARY_PATH=NCCL_LIBS))
i = ag.send({"op": "bench_nccl", "ranks": 2, "rank0": 0, "gpus": 2, "bytes": 1048576, "seconds": 20})
first = ag.wait_id(i, 20)
final = ag.wait_id(i, 20)
print(f"# bench_nccl, 2 fake GPUs: {json.dumps(final)}")
check("bench_nccl, 2 GPUs of one node: the unique id as a partial answer, then the figures",
      first.get("ev") == "bench_nccl_id" and first.get("more") is True and len(first.get("uid", "")) == 256 and
      final.get("ev") == "bench_nccl" and final.get("error", 0) is None and final.get("busbw_gbs", 0) > 0 and
      final.get("ranks") == 2 and final.get("gpus") == 2 and final.get("bytes") == 1048576 and
      abs(final["busbw_gbs"] - final["algbw_gbs"]) <= 0.002, (first, final))
for bad, word in [({"ranks": 2, "rank0": 1, "gpus": 2, "bytes": 4096}, "rank0"),
                  ({"ranks": 2, "rank0": 0, "gpus": 2, "bytes": 4096, "uid": "zz"}, "uid"),
                  ({"ranks": 2, "rank0": 0, "gpus": 2, "bytes": 1}, "bytes"),
                  ({"ranks": 2, "rank0": 0, "gpus": 2, "bytes": 4096, "env": {"LD_PRELOAD": "/tmp/x.so"}}, "env"),
                  ({"ranks": 2, "rank0": 0, "gpus": 2, "bytes": 4096, "env": {"NCCL_DEBUG": "INFO\nX=1"}}, "env")]:
    r = ag.request(dict(bad, op="bench_nccl"))
    check(f"bench_nccl refuses a bad {word}: an error naming it", r.get("ev") == "error" and word in r.get("error", ""), (bad, r))

def nccl_children(pid):
    out = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            if st.split(") ")[1].split()[1] == str(pid) and "(ddptop-nccl)" in st:
                out.append(d)
        except (OSError, IndexError):
            pass
    return out

def nccl_gone_soon(pid, within=1.0):
    """The killed NCCL process is reaped by the agent's timer soon after the answer (never
    waited for: the answer does not wait for the driver to let it go)."""
    end = time.monotonic() + within
    while nccl_children(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not nccl_children(pid)

check("after its figure the NCCL process exits and is reaped, soon",
      nccl_gone_soon(ag.p.pid, 5))
t0 = time.monotonic()
i = ag.send({"op": "bench_nccl", "ranks": 4, "rank0": 0, "gpus": 2, "bytes": 4096, "seconds": 2})
ag.wait_id(i, 10)
ok_clock, ctook = quick_clock(ag)
waiting = nccl_children(ag.p.pid)
r = ag.wait_id(i, 10)
took = time.monotonic() - t0
check("a peer that never joins: timed out at the deadline, the NCCL process killed and reaped",
      (r.get("error") or "").startswith("timed out after 2 s") and 1.5 < took < 5 and len(waiting) == 1 and
      nccl_gone_soon(ag.p.pid), (r, took, waiting))
check("the loop answers while NCCL waits for its peers", ok_clock and ctook < 0.5, ctook)
i = ag.send({"op": "bench_nccl", "ranks": 4, "rank0": 0, "gpus": 2, "bytes": 4096, "seconds": 60})
ag.wait_id(i, 10)
busy = ag.request({"op": "bench_nccl", "ranks": 2, "rank0": 0, "gpus": 2, "bytes": 4096})
t0 = time.monotonic()
s = ag.request({"op": "bench_nccl_stop", "reason": "NCCL failed on 10.0.0.9"})
r = ag.wait_id(i, 5)
check("a second bench_nccl while one waits: refused", busy.get("ev") == "error" and "already" in busy.get("error", ""), busy)
check("bench_nccl_stop: the measurement ends at once, saying why",
      s.get("stopped") is True and (r.get("error") or "").startswith("stopped: NCCL failed on 10.0.0.9") and
      time.monotonic() - t0 < 2 and nccl_gone_soon(ag.p.pid), (s, r))
r = ag.request({"op": "bench_dcgmi"})
check("bench_dcgmi where DCGM is not installed: said so, nothing else",
      r.get("ev") == "bench_dcgmi" and r.get("status") == "not installed" and r.get("failed") == [], r)
ag.stop()

# ---- bench_dcgmi on test doubles of dcgmi (shell scripts) found on the agent's PATH ----
DCGM_PASS = json.dumps({"DCGM GPU Diagnostic": {"test_categories": [
    {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]}]}})
def dcgmi_double(d, body, mode=0o755):
    os.makedirs(d, exist_ok=True)
    os.chmod(d, mode)
    path = os.path.join(d, "dcgmi")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return d

def dcgmi_agent(d):
    return Agent(env=dict(os.environ, PATH=d + ":" + os.environ["PATH"]))

# closes its output, then exits normally 3 s later (a CUDA program's teardown): not killed
late = dcgmi_double(os.path.join(TMP, "dcgmi-late"),
                    f"echo '{DCGM_PASS}'\nexec 1>&-\nsleep 3\nexit 0\n")
ag = dcgmi_agent(late)
t0 = time.monotonic()
i = ag.send({"op": "bench_dcgmi", "seconds": 20})
time.sleep(1.0)
ok_clock, ctook = quick_clock(ag)
r = ag.wait_id(i, 20)
took = time.monotonic() - t0
print(f"# dcgmi that exits 3 s after its output ended: {json.dumps(r)} after {took:.1f} s")
check("dcgmi exiting after its output ended: its own exit status 0 and its verdict, not killed (137)",
      r.get("status") == "pass" and r.get("exit") == 0 and r.get("error", 0) is None and 2.5 < took < 6, r, took)
check("the loop answers while a program's exit is awaited", ok_clock and ctook < 0.5, ctook)
ag.stop()

# ignores SIGTERM and never ends: killed at the deadline, said so, its group gone
pidfile = os.path.join(TMP, "dcgmi-hang.pid")
hang = dcgmi_double(os.path.join(TMP, "dcgmi-hang"),
                    f"trap '' TERM\necho $$ >{pidfile}\nsleep 100 &\necho $! >>{pidfile}\nwait\n")
ag = dcgmi_agent(hang)
t0 = time.monotonic()
i = ag.send({"op": "bench_dcgmi", "seconds": 5})
time.sleep(1.5)
ok_clock, ctook = quick_clock(ag)
r = ag.wait_id(i, 20)
took = time.monotonic() - t0
time.sleep(0.5)
try:
    pids = [int(x) for x in open(pidfile).read().split()]
except (OSError, ValueError):
    pids = []
alive = [p for p in pids if os.path.exists(f"/proc/{p}") and
         open(f"/proc/{p}/stat").read().split(") ")[1].split()[0] != "Z"]
check("dcgmi that hangs, ignoring SIGTERM: killed at its deadline, the answer says it did not finish",
      r.get("status") == "error" and "did not finish in time" in (r.get("error") or "") and
      4.5 < took < 8 and len(pids) == 2 and not alive, (r, took, pids, alive))
check("the loop answers while it hangs", ok_clock and ctook < 0.5, ctook)
r = ag.request({"op": "clock"})
check("the agent answers after the kill", r.get("ev") == "clock", r)
ag.stop()

# a dcgmi in a directory others can write, and one reached by a link from a safe directory
# into such a place: refused, never run (the double leaves a mark when it runs)
for name, how in [("open", "in a 0777 directory on PATH"), ("link", "a link from a safe directory into a 0777 one")]:
    mark = os.path.join(TMP, f"ran-{name}")
    d = dcgmi_double(os.path.join(TMP, f"dcgmi-{name}-target"), f"touch {mark}\necho '{DCGM_PASS}'\n", 0o777)
    if name == "link":
        safe = os.path.join(TMP, "dcgmi-link")
        os.makedirs(safe, mode=0o755, exist_ok=True)
        os.symlink(os.path.join(d, "dcgmi"), os.path.join(safe, "dcgmi"))
        d = safe
    ag = dcgmi_agent(d)
    r = ag.request({"op": "bench_dcgmi", "seconds": 10})
    time.sleep(0.3)
    check(f"dcgmi {how}: refused, said so, never run",
          r.get("status") == "error" and r.get("error") == "dcgmi in a directory others can write: not run" and
          not os.path.exists(mark), r)
    ag.stop()

tap.done()
PY

PYTHONPATH="$PWD/tests/lib" AGENT="$AGENT" FAKE="$FAKE" TMP="$tmp" NA="$NA" NB="$NB" \
    DELAY_MODE="$DELAY_MODE" DELAY_ADDR_B="$DELAY_ADDR_B" \
    python3 "$tmp/driver.py"
