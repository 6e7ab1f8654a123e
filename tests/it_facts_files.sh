#!/usr/bin/env bash
# Integration (issue 22): the agent's facts read python3's and torch's versions from the
# installed files, without starting python3, and cache them on the node.
#   1. Debian's /usr/bin/python3 and python3-torch: the versions are the ones python3 itself
#      gives (sys.version_info, torch.__version__), from the files, then from the cache.
#   2. A python3.11 of its own prefix (a copy of Debian's) with a torch in its site-packages:
#      its version.py changed -> the next facts say the new version (the cache noticed); torch
#      removed -> the python3 probe runs (files cannot tell) and its answer is cached too.
#   3. A cache planted by another user (setpriv, uid 65534) is not used.
#   4. `ddptop check --pbs` on one node: the env check passes with the versions read.
# Each agent gets TMPDIR=$D/tmp*, so its cache is this test's alone.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/build}
AGENT=$BUILD_DIR/ddptop-agent
# $D is under /var/tmp: step 3 runs its agent with a private /tmp (below)
D=$(mktemp -d /var/tmp/ddptop-it-factsfiles.XXXXXX)
cleanup() { rm -rf "$D"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
chmod 755 "$D"
mkdir -p "$D/tmp" "$D/work"

# facts TMPDIR PATH: one agent, one facts request; prints "python3 torch python_source ms"
cat >"$D/facts.py" <<'PY'
import json, os, subprocess, sys, time
env = dict(os.environ, TMPDIR=sys.argv[1], PATH=sys.argv[2])
env.pop("PYTHONPATH", None)
p = subprocess.Popen([sys.argv[3]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=sys.argv[4])
p.stdout.readline()
t0 = time.monotonic()
p.stdin.write(b'{"op":"facts","id":1,"cmd":null,"env":{}}\n'); p.stdin.flush()
f = json.loads(p.stdout.readline())
ms = (time.monotonic() - t0) * 1000
p.stdin.close(); p.wait()
print(f.get("python3"), f.get("torch"), f.get("python_source"), "%.0f" % ms)
PY
facts() { /usr/bin/python3 "$D/facts.py" "$1" "$2" "$AGENT" "$D/work"; }

# ---- 1. Debian's python3 and torch ----
PYV=$(/usr/bin/python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
TORCH=$(cd "$D/work" && /usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo None)
SYSPATH=/usr/bin:/bin
a=$(facts "$D/tmp" "$SYSPATH")
b=$(facts "$D/tmp" "$SYSPATH")
tap_check "Debian python3: facts say what python3 says ($PYV, torch $TORCH), read from the files: $a" \
    test "$(echo "$a" | cut -d' ' -f1-3)" = "$PYV $TORCH files"
tap_check "Debian python3: the second facts take them from the node's cache: $b" \
    test "$(echo "$b" | cut -d' ' -f1-3)" = "$PYV $TORCH cache"
f=$(find "$D/tmp/ddptop-$(id -u)/cache" -name 'python-*' ! -name '*.lock' | head -1)
tap_check "the cache file is 0600 in a 0700 directory ($f)" \
    test "$(stat -c %a "$f" 2>/dev/null) $(stat -c %a "$(dirname "$f")" 2>/dev/null)" = "600 700"

# ---- 2. a prefix of its own: a changed install is noticed, and the probe's fallback ----
P=$D/py
real=$(readlink -f /usr/bin/python3)
XY=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
mkdir -p "$P/bin" "$P/lib/python$XY/site-packages/torch"
cp "$real" "$P/bin/python$XY" && ln -s "python$XY" "$P/bin/python3"
# the standard library where python looks for it (os.py is its landmark), so the probe runs too
ln -s "/usr/lib/python$XY"/* "$P/lib/python$XY/" 2>/dev/null
rm -f "$P/lib/python$XY/site-packages" 2>/dev/null; mkdir -p "$P/lib/python$XY/site-packages/torch"
: >"$P/lib/python$XY/site-packages/torch/__init__.py"
echo "__version__ = '7.7.0'" >"$P/lib/python$XY/site-packages/torch/version.py"
OWN=$P/bin:/usr/bin:/bin
a=$(facts "$D/tmp" "$OWN")
b=$(facts "$D/tmp" "$OWN")
echo "__version__ = '7.7.1+new'" >"$P/lib/python$XY/site-packages/torch/version.py"
c=$(facts "$D/tmp" "$OWN")
tap_check "own prefix: torch 7.7.0 from its site-packages, then from the cache: $a / $b" \
    test "$(echo "$a" | cut -d' ' -f1-3) $(echo "$b" | cut -d' ' -f1-3)" = "$PYV 7.7.0 files $PYV 7.7.0 cache"
tap_check "version.py changed: the next facts say 7.7.1+new (the cache's key noticed): $c" \
    test "$(echo "$c" | cut -d' ' -f1-3)" = "$PYV 7.7.1+new files"
rm -rf "$P/lib/python$XY/site-packages/torch"
d=$(facts "$D/tmp" "$OWN")
e=$(facts "$D/tmp" "$OWN")
tap_check "torch removed: the python3 probe decides (no torch), and its answer is cached: $d / $e" \
    test "$(echo "$d" | cut -d' ' -f1-3) $(echo "$e" | cut -d' ' -f1-3)" = "$PYV None probe $PYV None cache"

# ---- 3. a cache planted by another user ----
# uid 65534 makes TMPDIR's ddptop-UID/cache before us, with an answer under the very name the
# agent would read (sha256 of the host's name, a NUL and the interpreter's path).
mkdir -p "$D/tmp2" && chmod 1777 "$D/tmp2"
name=$(/usr/bin/python3 -c 'import hashlib, os, sys; print("python-" + hashlib.sha256(os.uname().nodename.encode() + b"\0" + sys.argv[1].encode()).hexdigest()[:16])' /usr/bin/python3)
setpriv --reuid 65534 --regid 65534 --clear-groups sh -c "umask 022; mkdir -p '$D/tmp2/ddptop-$(id -u)/cache' && \
    printf '{\"key\":\"x\",\"python3\":\"6.6.6\",\"torch\":\"6.6.6\"}' >'$D/tmp2/ddptop-$(id -u)/cache/$name'"
# The agent turns from the foreign directory to /tmp's or /dev/shm's: those are fresh tmpfs in a
# mount namespace of this test's, so that no cache of this test stays in the machine's /tmp.
g=$(unshare --mount --propagation private bash -c \
    '. "$1" && private_tmp_mount 16m /dev/shm && exec /usr/bin/python3 "$2" "$3" "$4" "$5" "$6"' _ \
    "$PWD/tests/lib/private_tmp.sh" "$D/facts.py" "$D/tmp2" "$SYSPATH" "$AGENT" "$D/work")
tap_check "a cache directory another user made is not used: $g" \
    test "$(echo "$g" | cut -d' ' -f1-2)" = "$PYV $TORCH"

# ---- 4. ddptop check on one node ----
printf 'localhost\n' >"$D/nodefile"
mkdir -p "$D/bin" && cp tests/pbs/pbs_tmrsh "$D/bin/" 2>/dev/null
PATH=$PWD/tests/pbs:$SYSPATH PBS_NODEFILE=$D/nodefile TMPDIR=$D/tmp NO_COLOR=1 timeout 60 \
    "$BUILD_DIR/ddptop" check --pbs --json >"$D/c.json" 2>"$D/c.err"
rc=$?
tap_check "ddptop check --pbs: the env check passes (exit $rc)" /usr/bin/python3 -c "
import json, sys
d = json.load(open('$D/c.json'))
sys.exit(0 if d['hosts'][0]['checks']['env']['status'] in ('pass', 'warn') else 1)"
tap_done
