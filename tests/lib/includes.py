#!/usr/bin/python3
# The #include "..." graph of launcher/ and tui/, for tests/it_rooms.sh and for a person
# looking for tangles:
#   includes.py edges                      every include as "FILE -> TARGET"
#   includes.py cycles                     modules that include each other, directly or in a
#                                          loop through others (exit 1 if any)
#   includes.py rooms ROOM:DEP,DEP ...     includes against the rooms' direction (exit 1 if any)
# --root DIR first looks at another tree (tests/it_rooms.sh checks the checker on a made-up one).
# A module is a .c and its .h (foo.c + foo.h), with an internal header foo_int.h counted as
# part of foo: so "two modules include each other" means foo's files use bar's header and
# bar's files use foo's. Quoted includes are resolved the way the compiler does with the
# Makefile's -I flags (the file's own folder, then launcher/, runtime/, tui/); one that
# resolves nowhere is reported as such.
# A room is the folder under launcher/ (tui/ is the room "tui", a folder in it such as tui/cmd/ or tui/session/
# the room "cmd"). Within a room includes are bare ("job.h"); across rooms they name the room
# ("job/job.h"), but tui/'s own headers are bare from anywhere: -Itui finds them.
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources():
    for top in ("launcher", "tui"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def room(path):
    parts = path.split("/")
    return parts[1] if parts[0] in ("launcher", "tui") and len(parts) > 2 else parts[0]


def module(path):
    m = path.rsplit(".", 1)[0]
    return m[:-4] if m.endswith("_int") else m


def edges():
    """(file, written, target or None) for every quoted include."""
    out = []
    for f in sources():
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in INCLUDE.findall(text):
            target = None
            for base in (os.path.dirname(f), "launcher", "runtime", "tui"):   # as -I says
                cand = os.path.normpath(os.path.join(base, inc))
                if os.path.isfile(os.path.join(ROOT, cand)):
                    target = cand
                    break
            out.append((f, inc, target))
    return out


def cmd_edges():
    for f, inc, t in edges():
        print(f"{f} -> {t or '(unresolved) ' + inc}")
    return 0


def cmd_cycles():
    graph = {}
    why = {}
    for f, _, t in edges():
        if not t:
            continue
        a, b = module(f), module(t)
        if a != b:
            graph.setdefault(a, set()).add(b)
            why.setdefault((a, b), []).append(f"{f} -> {t}")
    bad = 0
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if a < b and a in graph.get(b, ()):
                bad += 1
                print(f"{a} <-> {b}: " + "; ".join(why[(a, b)] + why[(b, a)]))
    # Longer loops (a -> b -> c -> a) tangle modules just the same.
    for comp in components(graph):
        if len(comp) > 2 or (len(comp) == 2 and bad == 0):
            bad += 1
            print("loop through " + " -> ".join(sorted(comp)))
    return 1 if bad else 0


def components(graph):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    nodes = set(graph) | {b for bs in graph.values() for b in bs}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def cmd_rooms(rules):
    allowed = {}
    for r in rules:
        name, _, deps = r.partition(":")
        allowed[name] = set(d for d in deps.split(",") if d)
    bad = 0
    for f, inc, t in edges():
        ra = room(f)
        if not t:
            print(f"{f}: #include \"{inc}\" is found nowhere (not in its folder, not under launcher/)")
            bad += 1
            continue
        rb = room(t)
        if ra not in allowed:
            print(f"{f}: room '{ra}' is not in the table")
            bad += 1
        elif ra != rb and rb not in allowed[ra]:
            may = ", ".join(sorted(allowed[ra]))
            print(f"{f}: includes {t}: {ra}/ may include " + (f"only {may}" if may else "no other room"))
            bad += 1
        elif ra != rb and "/" not in inc and os.path.dirname(t) != "tui":
            print(f"{f}: includes {t} as \"{inc}\": across rooms an include names the room")
            bad += 1
        elif ra == rb and "/" in inc and os.path.dirname(f) == os.path.dirname(t):
            print(f"{f}: includes \"{inc}\": within a room an include is bare")
            bad += 1
    return 1 if bad else 0


def main(argv):
    global ROOT
    if len(argv) >= 3 and argv[1] == "--root":
        ROOT = os.path.abspath(argv[2])
        argv = argv[:1] + argv[3:]
    if len(argv) >= 2 and argv[1] == "edges":
        return cmd_edges()
    if len(argv) >= 2 and argv[1] == "cycles":
        return cmd_cycles()
    if len(argv) >= 3 and argv[1] == "rooms":
        return cmd_rooms(argv[2:])
    print(__doc__ or "usage: includes.py edges | cycles | rooms ROOM:DEP,... ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
