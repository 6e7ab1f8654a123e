#!/usr/bin/env bash
# it_nodes_other: nodes that are not this machine (docs/check.md, "Which nodes"). Real nodes
# from tests/lib/noderoot.sh: "old", a Debian 11 root (glibc 2.31) on x86_64, and "arm", a
# Debian 11 arm64 root run through qemu-user and binfmt_misc, each with its own OpenSSH sshd
# and no -dev package or libssh installed; "here", a plain sshd on this machine (Debian 12).
#
#   - ddptop check uploads each node the agent its `uname -m` names, says which and why, shows
#     the node's arch, glibc and kernel (--json "node"), and warns (not fails) on mixed
#     architectures and glibc versions;
#   - an agent that needs a newer glibc than the node's, and a node of an architecture ddptop
#     has no agent for, fail before anything runs, naming the node, its glibc or architecture
#     and the fix;
#   - `make dist`: the x86_64 tarball unpacked on "old" runs there (--version, a local run of
#     two ranks, a check of "arm" that uploads the tarball's aarch64 agent); the aarch64 one
#     runs on "arm";
#   - one job across "old" (x86_64) and "arm" (aarch64): the tarballs' ddptop-train of each
#     architecture trains together (the CPU ring all-reduce between the two) and exits 0.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/noderoot.sh
. tests/lib/check_run.sh
. tests/lib/run_job.sh

B=${DDPTOP_BUILD:-$PWD/build}
W=""
cleanup() {
    check_run_cleanup
    rj_cleanup
    noderoot_cleanup || echo "# a node's processes outlived it"
    sshd_cleanup
    [ -n "$W" ] && rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for f in "$DDPTOP" "$B/ddptop-agent-x86_64" "$B/ddptop-agent-aarch64" "$B/tests/ddptop-agent-hostlibc"; do
    [ -x "$f" ] || { tap_fail "built: $f (make all)"; tap_done; exit 1; }
done
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit 1; fi
D=$SSHD_DIR
W=$(mktemp -d /tmp/ddptop-it.nodes.XXXXXX)
if ! noderoot_start old amd64 2>"$D/old.err"; then
    tap_fail "the Debian 11 x86_64 node starts" "$(tail -20 "$D/old.err")"; tap_done; exit 1
fi
if ! noderoot_start arm arm64 2>"$D/arm.err"; then
    tap_fail "the Debian 11 aarch64 node starts" "$(tail -20 "$D/arm.err")"; tap_done; exit 1
fi
ARM_PORT=$NODEROOT_PORT
if ! sshd_fleet_add here; then tap_fail "the sshd on this machine starts"; tap_done; exit 1; fi
node() { local n=$1; shift; timeout 120 ssh -F "$D/pdsh_config" "$n" "$@"; }

# The nodes are what they claim: real other machines for ddptop.
got=$(node old 'uname -m; getconf GNU_LIBC_VERSION; ls /usr/lib/*/libssh* /usr/include/libssh 2>/dev/null | wc -l')
got2=$(node arm 'uname -m; getconf GNU_LIBC_VERSION; ls /usr/lib/*/libssh* /usr/include/libssh 2>/dev/null | wc -l')
if [ "$(echo $got)" = "x86_64 glibc 2.31 0" ] && [ "$(echo $got2)" = "aarch64 glibc 2.31 0" ]; then
    tap_ok "nodes: old is x86_64 with glibc 2.31, arm is aarch64 with glibc 2.31, neither has libssh"
else
    tap_fail "nodes: old x86_64 glibc 2.31, arm aarch64 glibc 2.31, no libssh" "old: $got" "arm: $got2"
fi

SSH_OPTS=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/pdsh_config" --timeout 30)
printf 'old\narm\n' >"$D/two.txt"
printf 'here\nold\narm\n' >"$D/three.txt"

# ---- 1. check: each node gets its architecture's agent, and says which and why ----
run_check "$D/c1.json" "$D/two.txt" --json "${SSH_OPTS[@]}"
expect_rc "check old + arm: nothing fails (mixed architectures warn)" 0
jassert "check: old and arm run the agent of their uname -m, uploaded, glibc need and node glibc named" "$D/c1.json" \
    "ssh_ok(0) and ssh_ok(1)" \
    "ck(0, 'ssh')['agent']['arch'] == 'x86_64' and ck(0, 'ssh')['agent']['file'] == 'ddptop-agent-x86_64'" \
    "ck(1, 'ssh')['agent']['arch'] == 'aarch64' and ck(1, 'ssh')['agent']['file'] == 'ddptop-agent-aarch64'" \
    "all(ck(k, 'ssh')['agent']['chosen_by'] == 'uname -m' and ck(k, 'ssh')['agent_uploaded'] is True for k in (0, 1))" \
    "all(ver(ck(k, 'ssh')['agent']['glibc_needed']) <= (2, 28) and ck(k, 'ssh')['agent']['glibc'] == '2.31' for k in (0, 1))" \
    "' aarch64 (ddptop-agent-aarch64 for its uname -m; needs glibc 2.' in ck(1, 'ssh')['detail'] or st(1, 'ssh') == 'warn'" \
    "'has 2.31)' in ck(1, 'ssh')['detail'] or st(1, 'ssh') == 'warn'"
jassert "check: the node basics in --json (arch, glibc, kernel, OS)" "$D/c1.json" \
    "h(0)['node']['arch'] == 'x86_64' and h(1)['node']['arch'] == 'aarch64'" \
    "h(0)['node']['glibc'] == '2.31' and h(1)['node']['glibc'] == '2.31'" \
    "h(0)['node']['kernel'] == os.uname().release and 'Debian GNU/Linux 11' in h(1)['node']['os']"
jassert "check: mixed architectures are an env warning naming the odd one, not a failure" "$D/c1.json" \
    "any(x['fact'] == 'arch' and x['status'] == 'warn' for k in (0, 1) for x in ck(k, 'env')['differences'])" \
    "all(x['status'] != 'fail' for k in (0, 1) for x in ck(k, 'env')['differences'])" \
    "'aarch64' in txt(0, 'env') + txt(1, 'env')"
for n in old arm; do
    a=$([ $n = old ] && echo x86_64 || echo aarch64)
    up=$(node $n "ls ~/.cache/ddptop/" 2>&1)
    if [[ $up == ddptop-agent-0.1.0-p*-$a-* ]] && [ "$(echo "$up" | wc -l)" = 1 ]; then
        tap_ok "$n: one file uploaded, the $a agent ($up)"
    else
        tap_fail "$n: one file uploaded, the $a agent" "$up"
    fi
done
sum_here=$(sha256sum <"$B/ddptop-agent-aarch64" | cut -d' ' -f1)
sum_there=$(node arm 'sha256sum ~/.cache/ddptop/ddptop-agent-*' | cut -d' ' -f1)
if [ "$sum_here" = "$sum_there" ]; then tap_ok "arm: the uploaded agent is build/ddptop-agent-aarch64, byte for byte"
else tap_fail "arm: the uploaded agent is build/ddptop-agent-aarch64" "$sum_here vs $sum_there"; fi

run_check "$D/c2.json" "$D/two.txt" --json "${SSH_OPTS[@]}"
jassert "second check: both agents reused, nothing uploaded" "$D/c2.json" \
    "all(ck(k, 'ssh')['agent_uploaded'] is False for k in (0, 1))" "ssh_ok(0) and ssh_ok(1)"

# With this machine (Debian 12, glibc 2.36) among them: its glibc differs, a warning.
run_check "$D/c3.json" "$D/three.txt" --json "${SSH_OPTS[@]}"
jassert "check here + old + arm: glibc and arch differences warn, the odd node named" "$D/c3.json" \
    "h(0)['node']['glibc'] == os.confstr('CS_GNU_LIBC_VERSION').split()[1]" \
    "any(x['fact'] == 'libc' and x['status'] == 'warn' and '2.31' in x['detail'] for x in ck(0, 'env')['differences'])" \
    "'glibc differs' in ck(0, 'env')['detail']" \
    "any(x['fact'] == 'arch' and x['status'] == 'warn' for x in ck(2, 'env')['differences'])" \
    "not any(x['fact'] in ('libc', 'arch', 'kernel', 'os') and x['status'] == 'fail' for k in range(3) for x in ck(k, 'env')['differences'])"

# ---- 2. the nodes ddptop cannot serve: said before anything runs ----
# A ddptop whose agent was linked against this machine's glibc (2.34 needed): old has 2.31.
mkdir -p "$W/newlibc"
cp "$DDPTOP" "$W/newlibc/ddptop"
cp "$B/tests/ddptop-agent-hostlibc" "$W/newlibc/ddptop-agent"
need=$(readelf -V --wide "$W/newlibc/ddptop-agent" | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n | tail -1 | sed 's/GLIBC_//')
printf 'old\n' >"$D/old.txt"
DDPTOP_SAVED=$DDPTOP
DDPTOP=$W/newlibc/ddptop
run_check "$D/c4.json" "$D/old.txt" --json "${SSH_OPTS[@]}" --agent-dir /tmp/agents-new
expect_rc "an agent that needs glibc $need on a glibc 2.31 node: check fails" 1
jassert "too old a glibc: old fails, naming its glibc, the agent's need and what to do" "$D/c4.json" \
    "st(0, 'ssh') == 'fail'" \
    "'old has glibc 2.31, older than the $need that ddptop' in ck(0, 'ssh')['detail']" \
    "'nothing was run' in ck(0, 'ssh')['detail']" \
    "'glibc 2.28 or newer' in ck(0, 'ssh')['hint'] and 'PORTABLE=0' in ck(0, 'ssh')['hint']"
left=$(node old 'ls -A /tmp/agents-new 2>/dev/null')
if [ -z "$left" ]; then tap_ok "too old a glibc: nothing was uploaded to old"
else tap_fail "too old a glibc: nothing was uploaded to old" "$left"; fi

# A ddptop with the x86_64 agent only: arm is aarch64.
mkdir -p "$W/x86only"
cp "$DDPTOP_SAVED" "$W/x86only/ddptop"
cp "$B/ddptop-agent-x86_64" "$W/x86only/ddptop-agent"
printf 'arm\n' >"$D/arm.txt"
DDPTOP=$W/x86only/ddptop
run_check "$D/c5.json" "$D/arm.txt" --json "${SSH_OPTS[@]}" --agent-dir /tmp/agents-x86
expect_rc "no agent for the node's architecture: check fails" 1
jassert "no agent for aarch64: arm fails, naming its architecture, the agents there are and the fix" "$D/c5.json" \
    "st(0, 'ssh') == 'fail'" \
    "'arm is aarch64: this ddptop has agents for x86_64 only (nothing was run)' in ck(0, 'ssh')['detail']" \
    "'ddptop-agent-aarch64' in ck(0, 'ssh')['hint']"
DDPTOP=$DDPTOP_SAVED
left=$(node arm 'ls -A /tmp/agents-x86 2>/dev/null')
if [ -z "$left" ]; then tap_ok "no agent for aarch64: nothing was uploaded to arm"
else tap_fail "no agent for aarch64: nothing was uploaded to arm" "$left"; fi

# ---- 3. make dist: one tarball, unpacked anywhere, nothing installed ----
# BUILD as make test gave it (relative): the objects' dependency files name their targets so,
# and an absolute BUILD would not see a changed header.
if ! make -s --no-print-directory -j"$(nproc)" BUILD="${BUILD:-build}" dist >"$W/dist.out" 2>&1; then
    tap_fail "make dist" "$(tail -20 "$W/dist.out")"; tap_done; exit 1
fi
V=$("$DDPTOP" --version | awk '{print $2}')
T64=$B/dist/ddptop-$V-linux-x86_64.tar.gz
TARM=$B/dist/ddptop-$V-linux-aarch64.tar.gz
if [ -s "$T64" ] && [ -s "$TARM" ]; then tap_ok "make dist: $(basename "$T64") ($(du -h "$T64" | cut -f1)), $(basename "$TARM") ($(du -h "$TARM" | cut -f1))"
else tap_fail "make dist makes both tarballs" "$(ls -la "$B/dist" 2>&1)"; fi
# Every ELF file in either asks for glibc 2.28 at most.
mkdir -p "$W/unpacked"
tar -C "$W/unpacked" -xzf "$T64" && tar -C "$W/unpacked" -xzf "$TARM"
over=""
while IFS= read -r -d '' f; do
    readelf -h "$f" >/dev/null 2>&1 || continue
    o=$(readelf -V --wide "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' |
        awk -F. '$1 > 2 || ($1 == 2 && $2 > 28)' | sort -u | tr '\n' ' ')
    [ -n "$o" ] && over="$over ${f#"$W"/unpacked/}: $o;"
done < <(find "$W/unpacked" -type f -print0)
if [ -z "$over" ]; then tap_ok "dist: every program and library in both tarballs needs glibc 2.28 at most"
else tap_fail "dist: every program and library needs glibc 2.28 at most" "$over"; fi

# Unpacked on old (Debian 11, no libssh, no -dev package), run from there.
node old 'mkdir -p /tmp/dd && tar -C /tmp/dd --strip-components=1 -xzf -' <"$T64"
node arm 'mkdir -p /tmp/dd && tar -C /tmp/dd --strip-components=1 -xzf -' <"$TARM"
devs=$(node old "dpkg-query -W -f='\${Package}\n' | grep -e '-dev\$' -e '^libssh' | tr '\n' ' '")
out=$(node old '/tmp/dd/bin/ddptop --version' 2>&1)
if [ -z "$devs" ] && [ "$out" = "ddptop $V (agent protocol $("$DDPTOP" --version | sed 's/.*protocol \([0-9]*\).*/\1/'))" ]; then
    tap_ok "dist on old: ddptop --version from the unpacked tarball ($out), no -dev package or libssh there"
else
    tap_fail "dist on old: ddptop --version, no -dev package or libssh there" "$out" "packages: $devs"
fi
out=$(node arm '/tmp/dd/bin/ddptop --version' 2>&1)
if [ "$out" = "ddptop $V (agent protocol $("$DDPTOP" --version | sed 's/.*protocol \([0-9]*\).*/\1/'))" ]; then
    tap_ok "dist on arm: the aarch64 ddptop runs there ($out)"
else
    tap_fail "dist on arm: the aarch64 ddptop runs there" "$out"
fi
# A local run of two ranks: the tarball's agent and its ddptop-train (OpenBLAS linked in).
node old 'cd /tmp && /tmp/dd/bin/ddptop run --headless --nproc-per-node 2 --log-dir /tmp/logs --master-port 29517 </dev/null' \
    >"$W/local.out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q 'DONE after 1 attempt.*2 ranks on 1 node' "$W/local.out" &&
   grep -q 'step min/median/max 400/400/400' "$W/local.out"; then
    tap_ok "dist on old: a local run of 2 ranks of ddptop-train, 400 steps, exit 0"
else
    tap_fail "dist on old: a local run of 2 ranks, exit 0 (rc $rc)" "$(tail -15 "$W/local.out")"
fi
# ddptop check from old against arm: the tarball's aarch64 agent is chosen and uploaded.
node old 'mkdir -p /root/.ssh && umask 077 && cat >/root/.ssh/id_ed25519' <"$D/id_ed25519"
grep "^\[127.0.0.1\]:$ARM_PORT " "$D/known_hosts" | node old 'cat >/root/kh; : >/root/empty_config'
echo "127.0.0.1:$ARM_PORT" | node old 'cat >/root/hosts.txt'
node old "cd /tmp && /tmp/dd/bin/ddptop check /root/hosts.txt --json --known-hosts /root/kh -i /root/.ssh/id_ed25519 -F /root/empty_config --timeout 30 --agent-dir /tmp/agents-dist" \
    >"$W/c6.json" 2>"$W/c6.json.err"
rc=$?
if [ $rc = 0 ]; then tap_ok "dist on old: ddptop check of arm succeeds"
else tap_fail "dist on old: ddptop check of arm succeeds (rc $rc)" "$(cat "$W/c6.json.err" | tail -5)" "$(head -c 2000 "$W/c6.json")"; fi
jassert "dist on old: arm got the tarball's aarch64 agent, uploaded, its facts read" "$W/c6.json" \
    "ssh_ok(0) and ck(0, 'ssh')['agent']['file'] == 'ddptop-agent-aarch64' and ck(0, 'ssh')['agent_uploaded'] is True" \
    "h(0)['node']['arch'] == 'aarch64' and h(0)['node']['glibc'] == '2.31'"

# ---- 4. one job across x86_64 and aarch64 ----
# Each node runs the ddptop-train of its own architecture from its tarball (same path on
# both): the two train together through the CPU ring all-reduce, byte order and all.
MP=$(sshd_pick_port)
rj_run "$W/mixed.out" --limit 240 "$D/two.txt" --headless --no-check "${SSH_OPTS[@]}" --log-dir "$W/logs" \
    --master-port "$MP" --workdir /tmp -- /tmp/dd/libexec/ddptop/ddptop-train --steps 20 --hidden 64 --layers 1 \
    --batch-size 16 --log-every 5 --snapshot-every 0
rj_expect_rc "a job across old (x86_64) and arm (aarch64) exits 0" 0
if grep -q 'step min/median/max 20/20/20' "$RJ_OUT" && grep -q 'DONE after 1 attempt.*2 ranks on 2 nodes' "$RJ_OUT"; then
    tap_ok "the mixed job: both ranks trained 20 steps together"
else
    tap_fail "the mixed job: both ranks trained 20 steps together" "$(tail -20 "$RJ_OUT")"
fi

# Nothing of ours left running on either node once the job is done (the nodes' own sshd aside).
for n in old arm; do
    ps_out=$(noderoot_exec $n sh -c 'for p in /proc/[0-9]*; do cat "$p/comm"; done' 2>/dev/null |
             grep -v -x -e sshd -e sh -e cat | tr '\n' ' ')
    if [ -z "$ps_out" ]; then tap_ok "$n: no agent or rank left after the jobs"
    else tap_fail "$n: no agent or rank left after the jobs" "$ps_out"; fi
done
tap_done
