"""TAP for the Python drivers of the shell tests (it_agent*.sh): one "ok N - name" or
"not ok N - name" line per check, with the facts that explain a failure as "#" comments
(bounded), and the closing plan line. The drivers import it with PYTHONPATH=tests/lib."""
import os
import sys

n = failed = 0


def check(name, cond, *info):
    """One TAP line; info (anything printable) is shown, 3000 characters each, on failure."""
    global n, failed
    n += 1
    print(f"ok {n} - {name}" if cond else f"not ok {n} - {name}")
    if not cond:
        failed += 1
        for item in info:
            for line in str(item)[:3000].splitlines():
                print(f"#   {line}")
    sys.stdout.flush()


def note(path, v):
    """Appends v as a line to $TMP/path: what the shell side reads after the driver."""
    with open(os.path.join(os.environ["TMP"], path), "a") as f:
        f.write(f"{v}\n")


def done():
    """The plan line, and the exit status: 1 when a check failed."""
    print(f"1..{n}")
    sys.exit(1 if failed else 0)
