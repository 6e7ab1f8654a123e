#!/usr/bin/env python3
"""Second copies of the event loop (launcher/util/evloop.c) in the C sources: a poll() of more
than one fd (a loop of its own; a poll of one fd with a deadline is a wait, not a loop), and a
signal handler that writes (a signal self-pipe of its own). Comments and strings are blanked
first. Prints FILE:LINE: what, one a line, for every file under launcher/, tui/ and runtime/
except launcher/util/evloop.c, or for the files named.

usage: evloop_copies.py [--root DIR] [FILE...]
"""
import os
import re
import sys

HOME = 'launcher/util/evloop.c'


def blank(src):
    """Comments, strings and character literals as spaces, newlines kept."""
    pat = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), src)


def balanced(code, i, open_ch, close_ch):
    """The text from code[i] (an open_ch) to its matching close_ch, exclusive."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_ch:
            depth += 1
        elif code[j] == close_ch:
            depth -= 1
            if depth == 0:
                return code[i + 1:j]
    return code[i + 1:]


def top_level_args(text):
    args, depth, cur = [], 0, ''
    for ch in text:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        if ch == ',' and depth == 0:
            args.append(cur.strip())
            cur = ''
        else:
            cur += ch
    args.append(cur.strip())
    return args


def line_of(code, pos):
    return code.count('\n', 0, pos) + 1


def scan(path, shown):
    with open(path, errors='replace') as f:
        code = blank(f.read())
    found = []
    for m in re.finditer(r'(?<![\w.>])poll\s*\(', code):
        args = top_level_args(balanced(code, m.end() - 1, '(', ')'))
        if len(args) >= 2 and args[1] != '1':
            found.append('%s:%d: poll() of %s fds: a loop of its own' % (shown, line_of(code, m.start()), args[1]))
    names = set(re.findall(r'\bsa_handler\s*=\s*(\w+)', code))
    names |= set(re.findall(r'\bsignal\s*\(\s*\w+\s*,\s*(\w+)\s*\)', code))
    names -= {'SIG_DFL', 'SIG_IGN', 'SIG_ERR'}
    for name in sorted(names):
        d = re.search(r'\bvoid\s+%s\s*\(\s*int\b[^)]*\)\s*\{' % re.escape(name), code)
        if not d:
            continue
        body = balanced(code, d.end() - 1, '{', '}')
        # to a pipe: not the terminal's restore sequence of a crash handler
        to = [top_level_args(balanced(body, w.end() - 1, '(', ')'))[0]
              for w in re.finditer(r'\bwrite\s*\(', body)]
        if any(fd not in ('STDOUT_FILENO', 'STDERR_FILENO', '1', '2') for fd in to):
            found.append('%s:%d: signal handler %s() writes to a pipe: a self-pipe of its own'
                         % (shown, line_of(code, d.start()), name))
    return found


def main(argv):
    root = '.'
    if len(argv) >= 2 and argv[0] == '--root':
        root, argv = argv[1], argv[2:]
    files = argv
    if not files:
        for top in ('launcher', 'tui', 'runtime'):
            for d, _, names in os.walk(os.path.join(root, top)):
                for n in names:
                    if n.endswith('.c'):
                        rel = os.path.relpath(os.path.join(d, n), root)
                        if rel != HOME:
                            files.append(rel)
    out = []
    for rel in sorted(files):
        out += scan(os.path.join(root, rel), rel)
    for line in out:
        print(line)
    return 1 if out else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
