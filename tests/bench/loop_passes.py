#!/usr/bin/python3
"""The controller loop's passes (tests/bench/scale.sh, BENCH_SCALE_PASSES=1): reads
`perf script -F time,event,trace` of sys_enter_poll/sys_exit_poll (the loop thread's) and
sched_switch (in and out of that thread) from stdin, and says how long the loop was away from
poll() each time: on the CPU, waiting runnable (preempted: the machine's other processes), and
blocked. A key that arrives during a pass waits for its end, so a pass's time on the CPU is
ddptop's own part of a key's latency; the runnable wait is the scheduler's.
Usage: perf script ... | loop_passes.py TID
(read_passes is tests/bench/pass_profile.py's too.)"""
import re
import sys


def read_passes(lines, tid):
    """The passes of thread tid in perf script's lines: (start s, end s, on the CPU s, runnable
    waiting s) each, from a return of poll() to the next call."""
    ev = []
    for line in lines:
        m = re.match(r"\s*([\d.]+):\s+(\S+):\s*(.*)", line)
        if not m:
            continue
        t, name, rest = float(m.group(1)), m.group(2), m.group(3)
        if name == "sched:sched_switch":
            s = re.search(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)", rest)
            if not s:
                continue
            if int(s.group(1)) == tid:
                ev.append((t, "out", s.group(2)))
            if int(s.group(3)) == tid:
                ev.append((t, "in", ""))
        elif name.endswith("sys_enter_poll"):
            ev.append((t, "enter", ""))
        elif name.endswith("sys_exit_poll"):
            ev.append((t, "exit", ""))
    ev.sort()
    passes = []
    start = None
    for t, kind, state in ev:
        if kind == "exit":
            start, run_from, on, waiting, out_at, out_state = t, t, 0.0, 0.0, None, ""
        elif start is None:
            continue
        elif kind == "out":
            if run_from is not None:
                on += t - run_from
            run_from, out_at, out_state = None, t, state
        elif kind == "in":
            if out_at is not None and out_state.startswith("R"):
                waiting += t - out_at
            run_from = t
        elif kind == "enter":
            if run_from is not None:
                on += t - run_from
            passes.append((start, t, on, waiting))
            start = None
    return passes


if __name__ == "__main__":
    passes = [((e - s) * 1e3, on * 1e3, w * 1e3) for s, e, on, w in read_passes(sys.stdin, int(sys.argv[1]))]
    if not passes:
        print("loop passes: none recorded (perf could not trace the controller?)")
        sys.exit(1)
    on_sorted = sorted(p[1] for p in passes)
    top_on = max(passes, key=lambda p: p[1])
    top_wall = max(passes, key=lambda p: p[0])
    print("| the loop's passes between polls (%d) | on the CPU: median %.2f ms, 99th %.1f ms, longest %.1f ms "
          "(wall %.0f ms) | |" % (len(passes), on_sorted[len(on_sorted) // 2], on_sorted[int(len(on_sorted) * 0.99)],
                                   top_on[1], top_on[0]))
    print("| the longest pass by the clock | %.0f ms: %.1f ms on the CPU, %.0f ms runnable, waiting for a core | |"
          % top_wall)
