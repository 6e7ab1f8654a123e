#!/usr/bin/python3
"""What the controller loop's longest passes did (tests/bench/scale.sh, BENCH_SCALE_PASSES=2).
Reads two `perf script` outputs: PASSES (`-F time,event,trace` of the loop thread's poll() calls
and context switches, as tests/bench/loop_passes.py) and SAMPLES (`-F tid,time,event,ip,sym`
of `perf record --call-graph dwarf -p CONTROLLER`). Splits the passes with loop_passes.py's read_passes,
puts each sample of the loop thread into its pass, and for the TOP passes with the most time on
the CPU prints when they ran (seconds from the first event), their CPU, and the functions their
samples were in, inclusive (a sample counts once for each function on its stack): ddptop's own
functions first, then the leaves (where the time was spent: a system call, libc).
Usage: pass_profile.py TID PASSES_TXT SAMPLES_TXT [TOP]"""
import bisect
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loop_passes import read_passes  # noqa: E402

tid = int(sys.argv[1])
top = int(sys.argv[4]) if len(sys.argv) > 4 else 3

with open(sys.argv[2], errors="replace") as f:
    passes = read_passes(f, tid)  # (start, end, on the CPU, waiting), s
if not passes:
    print("pass profile: no passes recorded")
    sys.exit(1)
t_first = passes[0][0]

# samples: a header line "TID TIME: PERIOD EVENT:" then one frame a line, a blank line between
samples = []  # (time, [frames, leaf first])
cur = None
with open(sys.argv[3], errors="replace") as f:
    for line in f:
        h = re.match(r"\s*(\d+)\s+([\d.]+):\s", line)
        if h and not line.startswith("\t") and not line.startswith("        "):
            cur = None
            if int(h.group(1)) == tid:
                cur = (float(h.group(2)), [])
                samples.append(cur)
            continue
        if cur is None:
            continue
        s = line.strip()
        if not s:
            cur = None
            continue
        parts = s.split(None, 1)
        sym = parts[1] if len(parts) > 1 else parts[0]
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym.split(" (")[0])
        cur[1].append(sym)
samples.sort()

starts = [p[0] for p in passes]
per_pass = collections.defaultdict(list)
for t, frames in samples:
    i = bisect.bisect_right(starts, t) - 1
    if i >= 0 and t <= passes[i][1]:
        per_pass[i].append(frames)

print("pass profile: %d passes, %d samples of thread %d" % (len(passes), len(samples), tid))
order = sorted(range(len(passes)), key=lambda i: -passes[i][2])
own = re.compile(r"^(ctl_|controller|run_|job_|transport_|tm_|logw_|agent_|wire_|dash|draw|timers|loop_|events_|"
                 r"record_|rank_|ring_|strbuf_|json|cJSON|sanitize|evloop|plan_|nccl_|hang_|root_cause|outbox|"
                 r"notify|headless|session|frame|view|pane|layout|tui_|screen|spawn|ssh_|lines_|metrics|"
                 r"on_|watches_|logs_|fe_)")
for i in order[:top]:
    s, e, on, _ = passes[i]
    fr = per_pass.get(i, [])
    print("\n- pass at %.2f s: %.1f ms on the CPU, %.0f ms by the clock, %d samples" %
          (s - t_first, on * 1e3, (e - s) * 1e3, len(fr)))
    if not fr:
        continue
    incl = collections.Counter()
    leaf = collections.Counter()
    for frames in fr:
        for name in set(frames):
            if own.match(name):
                incl[name] += 1
        if frames:
            leaf[frames[0]] += 1
    print("  ddptop's functions (inclusive): " +
          ", ".join("%s %d%%" % (n, 100 * c // len(fr)) for n, c in incl.most_common(14)))
    print("  leaves: " + ", ".join("%s %d%%" % (n, 100 * c // len(fr)) for n, c in leaf.most_common(8)))
