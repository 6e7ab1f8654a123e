#!/usr/bin/env bash
# it_install: `make install` and `make uninstall` (README "Install"). Into PREFIX=$tmp: the
# installed ddptop (with no ddptop-agent beside it) runs a local job through the agent in
# PREFIX/libexec/ddptop/, and fails naming the agent when that is taken away; it finds the
# themes in PREFIX/share/ddptop/themes; `man` opens its page from PREFIX/share/man; the bash
# completion offers exactly the subcommands of the command table, a command's options and the
# run ids of the log directory; --version names the version and the agent protocol; `make
# uninstall` removes every file install put there. With DESTDIR, everything lands under it.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_REL=${BUILD:-build}
T=$(mktemp -d /tmp/it_install.XXXXXX)
chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
P=$T/prefix
export HOME=$T/home XDG_CONFIG_HOME=   # the user's own themes stay out of it
mkdir -p "$HOME"

out=$(make -s install BUILD="$BUILD_REL" PREFIX="$P" 2>&1)
rc=$?
want="bin/ddptop libexec/ddptop/ddptop-agent libexec/ddptop/ddptop-train share/man/man1/ddptop.1
libexec/ddptop/ddptop-agent-x86_64 libexec/ddptop/ddptop-agent-aarch64
share/bash-completion/completions/ddptop share/ddptop/themes/default.theme"
missing=""
for f in $want; do [ -f "$P/$f" ] || missing="$missing $f"; done
if [ $rc -eq 0 ] && [ -z "$missing" ] && [ -x "$P/bin/ddptop" ] && [ -x "$P/libexec/ddptop/ddptop-agent" ] &&
   [ ! -e "$P/bin/ddptop-agent" ]; then
    tap_ok "make install PREFIX=\$tmp puts ddptop in bin/, the agents (this machine's, x86_64, aarch64) and the trainer in libexec/ddptop/, the man page, completion and themes in share/"
else
    tap_fail "make install PREFIX=\$tmp puts ddptop in bin/, the agent and the trainer in libexec/ddptop/, the man page, completion and themes in share/" \
        "rc $rc, missing:$missing" "$out" "$(cd "$P" 2>/dev/null && find . | sort)"
fi
DDP=$P/bin/ddptop

# ---- the installed ddptop runs a local job through the installed agent --------------------------
cd "$T"
out=$("$DDP" --headless --no-check --log-dir "$T/logs" --run-id inst1 -- sh -c 'echo installed-rank-$RANK' 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q '^\[r0 [^]]*\] installed-rank-0$' <<<"$out" && grep -q '^\[r1 [^]]*\] installed-rank-1$' <<<"$out"; then
    tap_ok "the installed ddptop runs a local job (2 ranks) with the agent from libexec/ddptop/"
else
    tap_fail "the installed ddptop runs a local job (2 ranks) with the agent from libexec/ddptop/" "rc $rc" "$out"
fi
# Without the installed agent the same run fails, naming where it looked: the job above did use it.
mv "$P/libexec/ddptop/ddptop-agent" "$T/agent.away"
out=$("$DDP" --headless --no-check --log-dir "$T/logs" --run-id inst2 -- true 2>&1)
rc=$?
mv "$T/agent.away" "$P/libexec/ddptop/ddptop-agent"
if [ $rc -ne 0 ] && grep -q "cannot execute $P/bin/ddptop-agent" <<<"$out"; then
    tap_ok "without PREFIX/libexec/ddptop/ddptop-agent the run fails and names the agent (exit $rc)"
else
    tap_fail "without PREFIX/libexec/ddptop/ddptop-agent the run fails and names the agent" "rc $rc" "$out"
fi
cd - >/dev/null

# ---- themes, version ----------------------------------------------------------------------------
# An unknown theme lists where ddptop looked and the themes it found there: the installed ones
# (without PREFIX/share/ddptop/themes only the compiled-in "default" would be listed).
out=$(cd "$T" && script -qec "stty rows 30 cols 120; DDPTOP_NO_SESSION=1 '$DDP' --theme nosuch -- true" /dev/null 2>&1)
if grep -q "$P/bin/../share/ddptop/themes" <<<"$out" && grep -qE 'themes: default, light, high-contrast, mono' <<<"$out" &&
   [ ! -d /usr/share/ddptop/themes ]; then
    tap_ok "the installed ddptop finds its themes in PREFIX/share/ddptop/themes"
else
    tap_fail "the installed ddptop finds its themes in PREFIX/share/ddptop/themes" "$out"
fi

version=$(sed -n 's/^#define DDPTOP_VERSION "\(.*\)"/\1/p' launcher/util/version.h)
proto=$(sed -n 's/^#define PROTOCOL_VERSION \([0-9]*\).*/\1/p' launcher/wire/protocol.h)
out=$("$DDP" --version)
if [ -n "$version" ] && [ -n "$proto" ] && [ "$out" = "ddptop $version (agent protocol $proto)" ]; then
    tap_ok "ddptop --version: $out"
else
    tap_fail "ddptop --version names the version and the protocol" "got '$out', want 'ddptop $version (agent protocol $proto)'"
fi

# ---- the man page -------------------------------------------------------------------------------
out=$(MANPATH="$P/share/man" MANPAGER=cat MANWIDTH=80 man ddptop 2>&1)
out_l=$(MANPAGER=cat man -l "$P/share/man/man1/ddptop.1" 2>&1)
if grep -q 'launch and watch multi-node data-parallel training' <<<"$out" &&
   grep -q 'launch and watch multi-node data-parallel training' <<<"$out_l"; then
    tap_ok "man ddptop opens the installed page (MANPATH=PREFIX/share/man, and man -l)"
else
    tap_fail "man ddptop opens the installed page" "man: $(head -5 <<<"$out")" "man -l: $(head -5 <<<"$out_l")"
fi

# ---- the bash completion ------------------------------------------------------------------------
# complete WORD...: what the completion offers for the last word, one per line.
complete_words() {
    PATH="$P/bin:$PATH" bash --norc -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        _ddptop
        printf "%s\n" "${COMPREPLY[@]}"' _ "$P/share/bash-completion/completions/ddptop" "$@" | sort -u
}
table=$("$DDP" --commands | sort)
help_cmds=$("$DDP" --help | sed -nE 's/^ +ddptop ([a-z][a-z0-9-]*).*/\1/p' | sort -u)
mkdir -p "$T/empty" && cd "$T/empty"
offered=$(complete_words ddptop "")
cd - >/dev/null
if [ "$(echo "$table" | wc -l)" -ge 6 ] && [ "$offered" = "$table" ] && [ "$help_cmds" = "$table" ]; then
    tap_ok "the completion offers exactly the command table's subcommands, as --help lists them ($(echo $table))"
else
    tap_fail "the completion offers exactly the command table's subcommands, as --help lists them" \
        "table: $(echo $table)" "offered: $(echo $offered)" "--help: $(echo $help_cmds)"
fi
got=$(complete_words ddptop logs --fol)
got2=$(complete_words ddptop check --max)
got3=$(complete_words ddptop logs --log-dir "$T/logs" "")
got4=$(complete_words ddptop view --log-dir "$T/logs" ins)
if [ "$got" = "--follow" ] && [ "$got2" = "--max-skew-ms" ] && grep -qx inst1 <<<"$got3" && grep -qx inst1 <<<"$got4"; then
    tap_ok "the completion offers a command's options (from its --help) and the run ids of --log-dir"
else
    tap_fail "the completion offers a command's options (from its --help) and the run ids of --log-dir" \
        "logs --fol: $got" "check --max: $got2" "logs --log-dir L: $(echo $got3)" "view ins: $(echo $got4)"
fi

# ---- uninstall ----------------------------------------------------------------------------------
out=$(make -s uninstall BUILD="$BUILD_REL" PREFIX="$P" 2>&1)
rc=$?
left=$(cd "$P" && find . -type f -o -type l)
if [ $rc -eq 0 ] && [ -z "$left" ] && [ ! -e "$P/libexec/ddptop" ] && [ ! -e "$P/share/ddptop" ]; then
    tap_ok "make uninstall removes every file install put in PREFIX, and ddptop's own folders"
else
    tap_fail "make uninstall removes every file install put in PREFIX, and ddptop's own folders" "rc $rc" "$out" "left: $left"
fi

# ---- DESTDIR: staged for a package --------------------------------------------------------------
out=$(make -s install BUILD="$BUILD_REL" DESTDIR="$T/stage" PREFIX=/opt/ddptop-it 2>&1)
rc=$?
staged=$(cd "$T/stage" 2>/dev/null && find . -type f | sort | paste -sd' ')
if [ $rc -eq 0 ] && [ -x "$T/stage/opt/ddptop-it/bin/ddptop" ] && [ ! -e /opt/ddptop-it ] &&
   "$T/stage/opt/ddptop-it/bin/ddptop" --version >/dev/null &&
   make -s uninstall BUILD="$BUILD_REL" DESTDIR="$T/stage" PREFIX=/opt/ddptop-it >/dev/null 2>&1 &&
   [ -z "$(find "$T/stage" -type f)" ]; then
    tap_ok "DESTDIR stages the install under it (and uninstall removes it there)"
else
    tap_fail "DESTDIR stages the install under it (and uninstall removes it there)" "rc $rc" "$out" "staged: $staged"
fi

tap_done
