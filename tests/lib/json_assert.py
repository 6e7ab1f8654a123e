#!/usr/bin/python3
# Asserts on a `ddptop check --json` document for the shell tests:
#   json_assert.py FILE 'PYTHON EXPRESSION' ...
# Each expression must be true; names available in it:
#   d          the whole document           H        the list of hosts (hostfile order)
#   h(k)       a host by index, or by "addr:port" / host name
#   st(k, c)   status of check c of host k  ck(k, c) the check object
#   txt(k, c)  the check as JSON text (detail, hint, every field: for "mentions X" checks)
#   low(s)     s.lower()
#   os         the os module (os.uname(), os.confstr(): this machine's facts)
#   ver(s)     "2.28" as (2, 28), for comparing versions
#   ssh_ok(k)  the ssh check of host k passed, or only warned that the login shell was slow
#              (root's login shell here runs pyenv's init: on a loaded machine it passes 5 s)
# On failure it prints the expression and the host entries involved as TAP comments ("# ...")
# and exits 1. A file that is not exactly one JSON document fails too: stdout of --json must
# hold nothing else.
import json
import os
import sys


def main():
    path, exprs = sys.argv[1], sys.argv[2:]
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        print(f"# {path}: not one JSON document: {e}")
        try:
            with open(path) as f:
                for line in f.read().splitlines()[:20]:
                    print("#   " + line)
        except OSError:
            pass
        return 1
    H = d.get("hosts", [])

    def h(k):
        if isinstance(k, int):
            return H[k]
        for e in H:
            if f"{e.get('address')}:{e.get('port')}" == k or e.get("host") == k:
                return e
        raise KeyError(f"no host {k!r}")

    def ck(k, c):
        return h(k)["checks"][c]

    def st(k, c):
        return ck(k, c).get("status")

    def txt(k, c):
        return json.dumps(ck(k, c))

    def ssh_ok(k):
        c = ck(k, "ssh")
        slow = c.get("status") == "warn" and (c.get("login_shell_ms") or 0) > 5000
        return c.get("status") == "pass" or slow

    env = {"d": d, "H": H, "h": h, "ck": ck, "st": st, "txt": txt, "ssh_ok": ssh_ok,
           "low": lambda s: s.lower(), "json": json, "os": os,
           "ver": lambda s: tuple(int(x) for x in s.split("."))}
    bad = 0
    for e in exprs:
        try:
            ok = eval(e, env)
        except Exception as ex:  # a missing field is a failed assertion, not a crash
            ok = False
            print(f"# {e}: {type(ex).__name__}: {ex}")
        if not ok:
            bad += 1
            print(f"# false: {e}")
    if bad:
        for line in json.dumps(d, indent=1).splitlines()[:120]:
            print("#   " + line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
