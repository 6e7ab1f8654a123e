#!/usr/bin/python3
# The file-level call graph of launcher/ and tui/, read from the built objects, for
# tests/it_rooms.sh and for a person looking for tangles the includes do not show:
#   calls.py edges                     every use as "FILE -> SYMBOL -> FILE"
#   calls.py rooms ROOM:DEP,DEP ...    calls against the rooms' direction (exit 1 if any)
#   calls.py circles                   files of different rooms that call each other, directly
#                                      or around a circle through others (exit 1 if any)
#   calls.py cycles DIR... [--max N]   within each folder DIR, the groups of files joined by call
#                                      cycles (each reaches every other through calls inside
#                                      DIR); exit 1 if one has more than N files (default 3:
#                                      two or three files of one topic may call each other)
#   calls.py never FROM TO             calls from a file matching FROM to one matching TO (paths
#                                      with shell wildcards: launcher/job/nccl*.c); exit 1 if any
#   calls.py layers DIR LAYER...       DIR's files in layers, the top one first, each LAYER the
#                                      names of its files in one argument ('a.c b.c'): a file
#                                      may call only files of the layers below its own; exit 1
#                                      on a call up or within a layer, or a file of DIR that is
#                                      in no layer (or a name that is no file of DIR)
#   calls.py libc LIBC [TOP...]        functions and data of ours (launcher/ and tui/, and the
#                                      TOPs named: runtime) that the C library LIBC exports too:
#                                      a definition that takes libc's place for every caller in
#                                      the program, shared libraries included (exit 1 if any)
# --root DIR looks at another tree (its sources), --obj DIR at other objects (default
# ROOT/build/obj); tests/it_rooms.sh checks the checker on made-up objects first.
# Why objects and not the sources: a function declared in one room's header and defined in
# another's lets the first call the second without including it; `nm` sees every such call
# exactly. Each object's undefined symbols (U) are mapped to the object that defines them
# (T, W, D, R, B, ...); static functions (t) and calls through a pointer are no edges, by
# design: the dashboard calls the session only through the hooks tui/cmd/ hands it.
# A file is a .c (its object build/obj/X.o); objects whose source is gone are left out, and a
# source with no object is reported (run make, or the Makefile misses its folder). A room is
# the folder under launcher/, the folder under tui/, or "tui" for tui/'s own files, as in
# includes.py; the rules are the includes' direction (RULES in tests/it_rooms.sh).
import fnmatch
import os
import subprocess
import sys
from collections import deque

# the rooms and the strongly connected components are the include checker's (one rule for both)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from includes import components, room  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OBJ = None
TOPS = ("launcher", "tui")   # the programs ddptop and ddptop-agent; runtime/ is another program
DEFINED = set("TWVDRBGSCi")  # a definition another object can link against
UNDEFINED = set("Uw")


def sources(tops=TOPS):
    for top in tops:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith(".c"):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def objects(tops=TOPS):
    """{source: object path} for every source with an object; a list of sources without."""
    have, missing = {}, []
    for src in sorted(sources(tops)):
        o = os.path.join(OBJ, src[:-2] + ".o")
        if os.path.isfile(o):
            have[src] = o
        else:
            missing.append(src)
    return have, missing


def symbols(objs):
    """{source: (defined set, undefined set)} from one run of nm over all objects."""
    by_obj = {o: s for s, o in objs.items()}
    out = {s: (set(), set()) for s in objs}
    if not objs:
        return out
    try:
        text = subprocess.run(["nm", "-A"] + sorted(by_obj), check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"calls.py: nm failed: {e}")
    for line in text.splitlines():
        path, _, rest = line.partition(":")
        f = rest.split()
        if len(f) < 2 or path not in by_obj:
            continue
        kind, name = f[-2], f[-1]
        if kind in DEFINED:
            out[by_obj[path]][0].add(name)
        elif kind in UNDEFINED:
            out[by_obj[path]][1].add(name)
    return out


def graph():
    """({file: {file: sorted symbols}}, {symbol: kind word}, sources without object, n files)."""
    objs, missing = objects()
    syms = symbols(objs)
    definers = {}
    for s, (defs, _) in syms.items():
        for name in defs:
            definers.setdefault(name, []).append(s)
    g = {s: {} for s in syms}
    for s, (_, undef) in syms.items():
        for name in undef:
            where = definers.get(name)
            if not where:
                continue   # libc, curses, ssh, cJSON
            # Two programs may each define a name (main): the one in the caller's room wins.
            same = [w for w in where if room(w) == room(s)]
            d = sorted(same or where)[0]
            if d != s:
                g[s].setdefault(d, []).append(name)
    for s in g:
        for d in g[s]:
            g[s][d].sort()
    return g, missing, len(objs)


def show(names, limit=3):
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(n + "()" for n in names[:limit]) + more


def report_missing(missing):
    for s in missing:
        print(f"{s}: no object in {os.path.relpath(OBJ, ROOT)}: run make (or the Makefile "
              "misses its folder), else its calls go unchecked")
    return len(missing)


def cmd_edges():
    g, missing, _ = graph()
    for s in sorted(g):
        for d in sorted(g[s]):
            for name in g[s][d]:
                print(f"{s} -> {name} -> {d}")
    return 1 if report_missing(missing) else 0


def cmd_rooms(rules):
    allowed = {}
    for r in rules:
        name, _, deps = r.partition(":")
        allowed[name] = set(x for x in deps.split(",") if x)
    g, missing, n = graph()
    bad = report_missing(missing)
    across = 0
    for s in sorted(g):
        ra = room(s)
        if ra not in allowed:
            print(f"{s}: room '{ra}' is not in the table")
            bad += 1
            continue
        for d in sorted(g[s]):
            rb = room(d)
            if ra == rb:
                continue
            across += 1
            if rb not in allowed[ra]:
                may = ", ".join(sorted(allowed[ra]))
                print(f"{s}: calls {show(g[s][d])} of {d}: {ra}/ may call "
                      + (f"only {may}" if may else "no other room"))
                bad += 1
    if not bad:
        print(f"{n} files, {across} file pairs calling across rooms")
    return 1 if bad or n == 0 else 0


def cmd_circles():
    g, missing, n = graph()
    bad = report_missing(missing)
    for comp in (sorted(c) for c in components(g)):
        if len({room(f) for f in comp}) < 2:
            continue   # files of one room may call each other
        bad += 1
        inside = set(comp)
        # One circle to show: the first call across rooms in it, and the shortest way back.
        u, v = next((a, b) for a in sorted(comp) for b in sorted(g[a])
                    if b in inside and room(a) != room(b))
        back = {v: None}
        todo = deque([v])
        while u not in back:
            x = todo.popleft()
            for y in sorted(g[x]):
                if y in inside and y not in back:
                    back[y] = x
                    todo.append(y)
        path = [u]
        while path[-1] != v:
            path.append(back[path[-1]])
        chain = [u] + path[::-1]   # u -> v -> ... -> u
        text = chain[0] + "".join(f" --{show(g[a][b], 1)}--> {b}" for a, b in zip(chain, chain[1:]))
        rooms = ", ".join(sorted({room(f) for f in comp}))
        print(f"call circle between the rooms {rooms} ({len(comp)} files): {text}")
    if not bad:
        print(f"{n} files, no call circle between rooms")
    return 1 if bad or n == 0 else 0


def within(path, folder):
    return os.path.dirname(path) == folder.rstrip("/")


def cmd_cycles(folders, most):
    g, missing, n = graph()
    bad = report_missing(missing)
    for folder in folders:
        files = sorted(f for f in g if within(f, folder))
        if not files:
            print(f"{folder}: no object of a file there: run make (or a wrong folder)")
            bad += 1
            continue
        sub = {f: {d: names for d, names in g[f].items() if within(d, folder)} for f in files}
        groups = sorted((sorted(c) for c in components(sub) if len(c) > 1), key=lambda c: (-len(c), c))
        small = []
        for comp in groups:
            inside = set(comp)
            if len(comp) <= most:
                small.append(" <-> ".join(os.path.basename(f) for f in comp))
                continue
            bad += 1
            print(f"{folder}: {len(comp)} files call each other around circles (at most {most} may): "
                  + ", ".join(os.path.basename(f) for f in comp))
            for a in comp:
                for b in sorted(sub[a]):
                    if b in inside:
                        print(f"    {a} -> {show(sub[a][b], 2)} -> {b}")
        if len(groups) == 0 or all(len(c) <= most for c in groups):
            print(f"{folder}: {len(files)} files, no call cycle of more than {most}"
                  + (f" (smaller: {'; '.join(small)})" if small else " (none at all)"))
    return 1 if bad or n == 0 else 0


def cmd_never(src, dst):
    g, missing, n = graph()
    bad = report_missing(missing)
    found = 0
    for s in sorted(g):
        if not fnmatch.fnmatch(s, src):
            continue
        for d in sorted(g[s]):
            if fnmatch.fnmatch(d, dst):
                print(f"{s}: calls {show(g[s][d])} of {d}")
                found += 1
    if not found and not bad:
        print(f"no call from {src} to {dst} ({n} files)")
    return 1 if bad or found or n == 0 else 0


def cmd_layers(folder, layers):
    g, missing, n = graph()
    bad = report_missing(missing)
    folder = folder.rstrip("/")
    files = sorted(f for f in g if within(f, folder))
    level = {}
    for k, group in enumerate(layers):
        for name in group.split():
            path = os.path.join(folder, name)
            if path in level:
                print(f"{path}: named in two layers")
                bad += 1
            level[path] = k
    for f in files:
        if f not in level:
            print(f"{f}: in no layer of {folder} (say which layer it belongs to)")
            bad += 1
    for p in sorted(level):
        if p not in g:
            print(f"{p}: named in a layer, but no such file of {folder} has an object")
            bad += 1
    for f in files:
        for d in sorted(g[f]):
            if f not in level or d not in level or level[d] > level[f]:
                continue   # down, out of the folder, or a file in no layer (said above)
            where = "a layer above it" if level[d] < level[f] else "its own layer"
            print(f"{f}: calls {show(g[f][d])} of {d}, in {where}")
            bad += 1
    if not bad:
        print(f"{folder}: {len(files)} files in {len(layers)} layers, every call goes down")
    return 1 if bad or n == 0 else 0


def libc_exports(libc):
    """The names the C library's dynamic symbol table defines (versions stripped)."""
    try:
        text = subprocess.run(["nm", "-D", "--defined-only", libc], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"calls.py: nm -D {libc} failed: {e}")
    names = set()
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2 and f[-2] != "A":   # A: the version nodes themselves
            names.add(f[-1].split("@")[0])
    return names


def cmd_libc(libc, extra):
    exported = libc_exports(libc)
    if len(exported) < 500:
        print(f"{libc}: only {len(exported)} names exported: not the C library?")
        return 1
    objs, missing = objects(TOPS + tuple(extra))
    bad = report_missing(missing)
    found = 0
    for s, (defs, _) in sorted(symbols(objs).items()):
        again = sorted(defs & exported)
        if again:
            found += 1
            print(f"{s}: defines {show(again, 8)}, which {os.path.basename(libc)} exports: every call "
                  "in the program, a shared library's too, would get ours (interposition)")
    if not found and not bad:
        print(f"{len(objs)} files, none defines a name {os.path.basename(libc)} exports "
              f"({len(exported)} names)")
    return 1 if bad or found or not objs else 0


def main(argv):
    global ROOT, OBJ
    args = argv[1:]
    while len(args) >= 2 and args[0] in ("--root", "--obj"):
        if args[0] == "--root":
            ROOT = os.path.abspath(args[1])
        else:
            OBJ = os.path.abspath(args[1])
        args = args[2:]
    OBJ = OBJ or os.path.join(ROOT, "build", "obj")
    if args[:1] == ["edges"]:
        return cmd_edges()
    if args[:1] == ["rooms"] and len(args) >= 2:
        return cmd_rooms(args[1:])
    if args[:1] == ["circles"]:
        return cmd_circles()
    if args[:1] == ["cycles"] and len(args) >= 2:
        most, folders = 3, []
        rest = args[1:]
        while rest:
            if rest[0] == "--max" and len(rest) >= 2 and rest[1].isdigit():
                most, rest = int(rest[1]), rest[2:]
            else:
                folders, rest = folders + [rest[0]], rest[1:]
        if folders:
            return cmd_cycles(folders, most)
    if args[:1] == ["never"] and len(args) == 3:
        return cmd_never(args[1], args[2])
    if args[:1] == ["layers"] and len(args) >= 3:
        return cmd_layers(args[1], args[2:])
    if args[:1] == ["libc"] and len(args) >= 2:
        return cmd_libc(args[1], args[2:])
    print(__doc__ or "usage: calls.py [--root DIR] [--obj DIR] edges | rooms ROOM:DEP,... | circles"
          " | cycles DIR... [--max N] | never FROM TO | layers DIR LAYER... | libc LIBC [TOP...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
