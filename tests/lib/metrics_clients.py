#!/usr/bin/python3
"""Clients of the --metrics endpoint for tests/it_metrics.sh (standard library only).

  stamp                       stdin to stdout, each line prefixed with its arrival time (epoch s)
  get URL OUT                 GET URL; prints "STATUS CONTENT-TYPE", the body into OUT
  query PROM EXPR             Prometheus's instant query API: one line per series, "LABELS VALUE"
  targets PROM                the scrape targets: one line per target, "HEALTH LASTERROR"
  hostile HOST PORT           hostile clients, one after another, each told as
                              "PASS|FAIL<TAB>what<TAB>detail" lines; then "WINDOW T0 T1"
  flow FILE T0 T1             the ranks' "tick RANK N PRINTED" lines that arrived in [T0, T1]
                              (FILE from stamp): count, per second, the largest delay between
                              printed and arrived, the largest gap between two lines of a rank
"""
import json
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request


def cmd_stamp():
    out = sys.stdout
    for line in sys.stdin:
        out.write("%.3f %s" % (time.time(), line))
        out.flush()


def cmd_get(url, out):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = r.read()
            status, ctype = r.status, r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        body, status, ctype = e.read(), e.code, e.headers.get("Content-Type", "")
    with open(out, "wb") as f:
        f.write(body)
    print(status, ctype)


def cmd_query(prom, expr):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        data = json.load(r)
    for s in data.get("data", {}).get("result", []):
        labels = ",".join('%s="%s"' % kv for kv in sorted(s["metric"].items()))
        print("{%s} %s" % (labels, s["value"][1]))


def cmd_targets(prom):
    with urllib.request.urlopen(prom + "/api/v1/targets", timeout=10) as r:
        data = json.load(r)
    for t in data["data"]["activeTargets"]:
        print(t["health"], t.get("lastError", "") or "-")


# ---- hostile clients ----------------------------------------------------------------------

def connect(host, port, timeout=10):
    s = socket.create_connection((host, port), timeout=timeout)
    return s


def read_answer(s, limit=1 << 20):
    """What the server sent until it closed: (bytes, how it ended: 'closed', 'reset', 'timeout')."""
    got = b""
    try:
        while len(got) < limit:
            b = s.recv(65536)
            if not b:
                return got, "closed"
            got += b
        return got, "more"
    except ConnectionResetError:
        return got, "reset"
    except socket.timeout:
        return got, "timeout"


def status(got):
    line = got.split(b"\r\n", 1)[0].decode("latin-1")
    return line


def report(ok, what, detail):
    print("%s\t%s\t%s" % ("PASS" if ok else "FAIL", what, detail), flush=True)


def garbage(host, port):
    s = connect(host, port)
    s.sendall(b"\x00\x01\xffgarbage \x7f\r\n\r\n")
    got, how = read_answer(s)
    s.close()
    st = status(got)
    report(st.startswith("HTTP/1.1 400") or (not got and how in ("closed", "reset")),
           "garbage request line: 400 or closed", "%s (%s)" % (st or "nothing", how))


def slowloris(host, port):
    """A header byte a second: the server answers 408 or closes within its 5 s, not never."""
    s = connect(host, port, timeout=15)
    t0 = time.time()
    s.sendall(b"GET /metrics HTTP/1.1\r\n")
    got, how = b"", "timeout"
    for ch in b"X-Slow: " + b"a" * 20:
        try:
            s.sendall(bytes([ch]))
        except (BrokenPipeError, ConnectionResetError):
            break
        s.settimeout(1.0)
        try:
            b = s.recv(65536)
            if not b:
                how = "closed"
                break
            got += b
            if b"\r\n\r\n" in got:
                s.settimeout(5)
                more, how = read_answer(s)
                got += more
                break
        except socket.timeout:
            continue
        except ConnectionResetError:
            how = "reset"
            break
    took = time.time() - t0
    s.close()
    st = status(got)
    report((st.startswith("HTTP/1.1 408") or how in ("closed", "reset")) and took < 9,
           "slowloris (a header byte a second): 408 or closed within the request's 5 s",
           "%s (%s) after %.1f s" % (st or "nothing", how, took))


def huge_header(host, port):
    s = connect(host, port)
    sent = 0
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: ")
        chunk = b"a" * 65536
        while sent < (1 << 20):
            s.sendall(chunk)
            sent += len(chunk)
        s.sendall(b"\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    got, how = read_answer(s)
    s.close()
    st = status(got)
    report(st.startswith("HTTP/1.1 431") or (not got and how in ("closed", "reset")),
           "1 MB header: 431 or closed", "%s (%s) after %d KiB sent" % (st or "nothing", how, sent >> 10))


def many(host, port, n=500):
    """n connections at once, held: those past the server's limit are told 503 at once (read
    before asking); the others ask and get 200. Every one gets 200 or 503, or is closed."""
    socks, refused = [], 0
    for _ in range(n):
        try:
            socks.append(connect(host, port, timeout=10))
        except OSError:
            refused += 1
    time.sleep(0.5)
    counts = {}
    for s in socks:
        s.setblocking(False)
        try:
            early = s.recv(65536)
        except BlockingIOError:
            early = None
        except ConnectionResetError:
            early = b""
        s.settimeout(10)
        if early is None:
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            except OSError:
                pass
            got, how = read_answer(s)
        else:
            more, how = read_answer(s) if early else (b"", "closed")
            got = early + more
        st = status(got)
        key = st.split(" ", 2)[1] if st.startswith("HTTP/1.1 ") else how
        if key == "200" and not got.endswith(b"# EOF\n"):
            key = "200-cut"
        counts[key] = counts.get(key, 0) + 1
        s.close()
    bad = {k: v for k, v in counts.items() if k not in ("200", "503", "closed", "reset")}
    report(not bad and counts.get("200", 0) >= 1 and counts.get("503", 0) >= 1,
           "%d connections at once: each answered 200 (whole) or 503, or closed; some of each" % n,
           "answers: %s; not connected: %d" % (json.dumps(counts, sort_keys=True), refused))


def normal(host, port, what):
    """A scrape after the others: 200 again once the server's slots are free."""
    deadline = time.time() + 10
    st, last = "", ""
    while time.time() < deadline:
        s = connect(host, port)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        got, how = read_answer(s)
        s.close()
        st = status(got)
        if st.startswith("HTTP/1.1 200") and got.endswith(b"# EOF\n"):
            break
        last = st or how
        time.sleep(0.2)
    report(st.startswith("HTTP/1.1 200"), what, st or last)


def cmd_hostile(host, port):
    port = int(port)
    t0 = time.time()
    # the slowloris runs beside the others, as it would
    slow = threading.Thread(target=slowloris, args=(host, port))
    slow.start()
    garbage(host, port)
    huge_header(host, port)
    many(host, port)
    slow.join()
    normal(host, port, "a plain scrape after them: 200")
    print("WINDOW %.3f %.3f" % (t0, time.time()), flush=True)


def cmd_flow(path, t0, t1):
    t0, t1 = float(t0), float(t1)
    n, max_delay, last, max_gap = 0, 0.0, {}, 0.0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            # ARRIVED [rR host] tick RANK N PRINTED
            if len(parts) < 7 or parts[3] != "tick":
                continue
            arrived, rank, printed = float(parts[0]), parts[4], float(parts[6])
            if arrived < t0 or arrived > t1:
                last[rank] = arrived
                continue
            n += 1
            max_delay = max(max_delay, arrived - printed)
            if rank in last:
                max_gap = max(max_gap, arrived - last[rank])
            last[rank] = arrived
    span = max(t1 - t0, 1e-9)
    print("lines %d per_s %.1f max_delay_ms %d max_gap_ms %d" % (n, n / span, max_delay * 1000, max_gap * 1000))


def main(argv):
    cmds = {"stamp": cmd_stamp, "get": cmd_get, "query": cmd_query, "targets": cmd_targets,
            "hostile": cmd_hostile, "flow": cmd_flow}
    if len(argv) < 2 or argv[1] not in cmds:
        sys.stderr.write(__doc__)
        return 2
    cmds[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
