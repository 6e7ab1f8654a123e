#!/usr/bin/env bash
# it_rooms: the rooms of launcher/ and tui/ (docs/architecture.md, each room's README.md) hold
# their shape. (a) every include across rooms follows the dependency direction of the table below
# (the same as the READMEs' "May include" lines, which are compared with it), bare within a
# room and room-qualified across; (b) no two modules include each other, directly or in a
# loop; (c) build/ddptop-agent needs no libssh and no curses, and holds no symbol of a room
# other than agent, wire and util; (d) job, node and rank states are assigned only in
# launcher/job/job_state.c (and job.c, which builds a job and starts an attempt); (e) every
# room has a README.md; (f) every subcommand is an entry of the one command table
# (tui/cmd/cmd.c): none dispatched elsewhere, no command file outside it; (g) a transport kind
# is one file (launcher/ssh/kind_NAME.c) and one line of the table in transport_kinds.c, and no
# other file tests which kind a transport is (no via, no o.local, no kind compared); (h) one
# event loop: no poll() of several fds or signal self-pipe outside launcher/util/evloop.c but
# an allowlist with reasons; (i) the job model (launcher/job/) does no I/O; (j) calls between
# files (from the built objects) follow the rooms' direction, with no call circle between rooms;
# (k) inside launcher/agent, launcher/job and launcher/controller no call cycle joins four files
# or more, and the events ring (job_events.c) calls nothing of NCCL's (nccl*.c); (l) the
# controller's files are in layers (controller_int.h): no call goes up or across a layer; (m)
# no file of ours defines a function or variable that the C library exports (recv, poll, read,
# ...), and no program of ours exports one in its dynamic symbol table: such a definition
# replaces libc's for every caller in the program, shared libraries included.
# Each checker is first run on a made-up tree or file with a known violation, so a checker that
# can no longer see one fails here instead of passing quietly.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
INCLUDES="python3 tests/lib/includes.py"
tmp=$(mktemp -d /tmp/ddptop-it-rooms.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# What each room may include: the dependency direction, cmd -> tui -> controller -> check -> ssh,
# record -> job -> wire, hosts -> util (record: the model it writes and reads back into;
# openmetrics, under the controller: the --metrics endpoint, reading the model), and
# agent -> wire -> util. The session layer (tui/session/) sits beside the dashboard: only the
# commands (tui/cmd/) include it; the dashboard is handed what it needs of it
# (tui/frontend_session.h), and it includes nothing of the dashboard. Keep it equal to
# docs/architecture.md.
RULES=(
    dist:
    util:
    hosts:util
    wire:util
    job:wire,hosts,util
    record:job,wire,util
    ssh:wire,hosts,util
    check:ssh,job,wire,hosts,util
    openmetrics:job,util
    controller:openmetrics,check,ssh,record,job,wire,hosts,util
    agent:wire,util
    tui:controller,check,record,job,util
    session:record,job,util
    cmd:tui,session,controller,openmetrics,check,ssh,record,job,wire,hosts,util
)
ALL_ROOMS="agent ssh wire check record job controller openmetrics hosts util tui session cmd dist"
LAUNCHER_ROOMS=$(for d in launcher/*/; do basename "$d"; done)
TUI_ROOMS=$(for d in tui/*/; do [ -d "$d" ] && basename "$d"; done)
# A room's folder: launcher/ROOM, or tui/ROOM for the rooms inside tui/.
room_dir() { if [ -d "launcher/$1" ]; then echo "launcher/$1"; else echo "tui/$1"; fi; }

# ---- the checkers see a violation when there is one -------------------------------------------

fake=$tmp/tree
mkdir -p "$fake/launcher/util" "$fake/launcher/job" "$fake/launcher/hosts" "$fake/tui/session"
printf '#include "job/a.h"\n' >"$fake/launcher/util/u.h"            # util may include nothing
printf '#include "b.h"\n' >"$fake/launcher/job/a.c"                  # a <-> b
printf '\n' >"$fake/launcher/job/a.h"
printf '#include "a.h"\n' >"$fake/launcher/job/b.c"
printf '\n' >"$fake/launcher/job/b.h"
printf '#include "job/b.h"\n' >"$fake/launcher/job/c.c"            # qualified within a room
printf '#include "theme.h"\n' >"$fake/launcher/job/d.c"             # found in tui/ through -Itui
printf '\n' >"$fake/tui/theme.h"
printf '#include "x.h"\n' >"$fake/launcher/hosts/y.c"                # x -> y -> z -> x
printf '#include "y.h"\n' >"$fake/launcher/hosts/z.c"
printf '#include "z.h"\n' >"$fake/launcher/hosts/x.c"
touch "$fake/launcher/hosts/x.h" "$fake/launcher/hosts/y.h" "$fake/launcher/hosts/z.h"
printf '#include "session/s.h"\n' >"$fake/tui/dash.c"              # the dashboard uses the session
printf '#include "theme.h"\n#include "s.h"\n' >"$fake/tui/session/s.c"  # the session draws
printf '\n' >"$fake/tui/session/s.h"
mkdir -p "$fake/tui/cmd"
printf '#include "session/s.h"\n#include "theme.h"\n' >"$fake/tui/cmd/prog_main.c"   # the entry may
out=$($INCLUDES --root "$fake" rooms "${RULES[@]}" 2>&1)
if [ $? -ne 0 ] && grep -q 'launcher/util/u.h: includes launcher/job/a.h: util/ may include no other room' <<<"$out" &&
   grep -q 'launcher/job/d.c: includes tui/theme.h: job/ may include only hosts, util, wire' <<<"$out" &&
   grep -q 'launcher/job/c.c: includes "job/b.h": within a room an include is bare' <<<"$out" &&
   grep -q 'tui/dash.c: includes tui/session/s.h: tui/ may include only check, controller, job, record, util' <<<"$out" &&
   grep -q 'tui/session/s.c: includes tui/theme.h: session/ may include only job, record, util' <<<"$out" &&
   ! grep -q 'prog_main.c' <<<"$out"; then
    tap_ok "the room checker sees includes against the direction (the dashboard using the session, the session the dashboard) and a room-qualified one within a room"
else
    tap_fail "the room checker sees includes against the direction (the dashboard using the session, the session the dashboard) and a room-qualified one within a room" "$out"
fi
out=$($INCLUDES --root "$fake" cycles 2>&1)
if [ $? -ne 0 ] && grep -q 'launcher/job/a <-> launcher/job/b' <<<"$out" &&
   grep -q 'loop through launcher/hosts/x -> launcher/hosts/y -> launcher/hosts/z' <<<"$out"; then
    tap_ok "the cycle checker sees two modules including each other and a longer loop"
else
    tap_fail "the cycle checker sees two modules including each other and a longer loop" "$out"
fi

# ---- (a) includes follow the direction; the READMEs say the same ------------------------------

out=$($INCLUDES rooms "${RULES[@]}" 2>&1)
if [ $? -eq 0 ]; then tap_ok "every cross-room include in launcher/ and tui/ follows the rooms' direction"
else tap_fail "every cross-room include in launcher/ and tui/ follows the rooms' direction" "$out"; fi

missing=""
for r in $LAUNCHER_ROOMS $TUI_ROOMS; do
    printf '%s\n' "${RULES[@]}" | grep -q "^$r:" || missing="$missing $r"
done
if [ -z "$missing" ]; then tap_ok "every folder of launcher/ and tui/ is a room in the table"
else tap_fail "every folder of launcher/ and tui/ is a room in the table" "not in RULES:$missing"; fi

# A README's "May include: ..." up to the first '.', ';' or '(' names the rooms it may use.
readme_rooms() {
    sed -n '/^May include:/,/^$/p' "$1" | tr '\n' ' ' | sed 's/^May include://; s/[.;(].*//' |
        tr ', ' '\n\n' | grep -xE "$(echo $ALL_ROOMS | tr ' ' '|')" | sort | tr '\n' ' '
}
diffs=()
for rule in "${RULES[@]}"; do
    r=${rule%%:*}
    [ "$r" = tui ] && continue
    f=$(room_dir "$r")/README.md
    [ -f "$f" ] || continue   # (e) reports it
    want=$(echo "${rule#*:}" | tr ',' '\n' | grep . | sort | tr '\n' ' ')
    got=$(readme_rooms "$f")
    [ "$want" = "$got" ] || diffs+=("$f says it may include '${got% }', the table here '${want% }'")
done
if [ ${#diffs[@]} -eq 0 ]; then tap_ok "each room's README.md names the rooms the table allows"
else tap_fail "each room's README.md names the rooms the table allows" "${diffs[@]}"; fi

# ---- (b) no two modules include each other ----------------------------------------------------

out=$($INCLUDES cycles 2>&1)
if [ $? -eq 0 ]; then tap_ok "no two modules in launcher/ and tui/ include each other"
else tap_fail "no two modules in launcher/ and tui/ include each other" "$out"; fi

# ---- (c) what ddptop-agent is made of ---------------------------------------------------------

AGENT=$BUILD_DIR/ddptop-agent
# The libraries a program needs (its own NEEDED entries and what ldd resolves) that are
# libssh or curses.
ssh_or_curses_libs() {
    { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; ldd "$1" 2>&1; } |
        grep -ioE 'lib(ssh|n?curses|ncursesw|tinfo|panel|form|menu)[a-z0-9_]*\.so[.0-9]*' | sort -u
}
# Symbols a program defines that another room's archive defines (every room's but agent,
# wire and util), and ssh/curses functions it leaves undefined.
foreign_symbols() {
    nm --defined-only "$1" | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/prog"
    comm -12 "$tmp/other" "$tmp/prog"
    nm -u "$1" | awk '{ print $NF }' | grep -E '^(ssh_|sftp_|initscr|newwin|wrefresh|doupdate|endwin)'
}
: >"$tmp/other"
for r in controller openmetrics check ssh record job hosts tui; do
    lib=$BUILD_DIR/lib$r.a
    [ -f "$lib" ] && nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 { print $3 }' >>"$tmp/other"
done
sort -u "$tmp/other" -o "$tmp/other"

if [ ! -x "$AGENT" ] || [ ! -x "$BUILD_DIR/ddptop" ] || [ ! -s "$tmp/other" ]; then
    tap_fail "ddptop-agent links no libssh and no curses" "missing $AGENT, $BUILD_DIR/ddptop or the room archives: run make first"
    tap_fail "ddptop-agent holds no symbol of another room" "missing $AGENT: run make first"
else
    # ddptop itself is what the agent must not be: the checks must see it there.
    seen_libs=$(ssh_or_curses_libs "$BUILD_DIR/ddptop" | paste -sd' ')
    seen_syms=$(foreign_symbols "$BUILD_DIR/ddptop" | wc -l)
    bad=$(ssh_or_curses_libs "$AGENT")
    if [ -z "$bad" ] && [ -n "$seen_libs" ]; then
        tap_ok "ddptop-agent links no libssh and no curses (ddptop does: $seen_libs)"
    else
        tap_fail "ddptop-agent links no libssh and no curses" "the agent: $(echo $bad)" \
            "ddptop (must be seen): ${seen_libs:-nothing seen}"
    fi
    bad=$(foreign_symbols "$AGENT")
    if [ -z "$bad" ] && [ "$seen_syms" -gt 0 ]; then
        tap_ok "ddptop-agent holds no symbol of another room ($(wc -l <"$tmp/other") checked; ddptop has $seen_syms)"
    else
        tap_fail "ddptop-agent holds no symbol of another room" "the agent: $(echo $bad)" \
            "ddptop (must be seen): $seen_syms"
    fi
fi
if grep -qE '^AGENT_ROOMS[[:space:]]*=[[:space:]]*agent wire util[[:space:]]*$' Makefile; then
    tap_ok "the Makefile links ddptop-agent from agent, wire and util"
else
    tap_fail "the Makefile links ddptop-agent from agent, wire and util" "$(grep -n AGENT_ROOMS Makefile)"
fi

# ---- (d) who assigns job, node and rank states ------------------------------------------------

# The enumerators of enum job_state, enum rank_state and enum node_state, from job/job.h.
enumerators=$(perl -0ne 'while (/enum\s+(?:job|rank|node)_state\s*\{(.*?)\}/sg) {
        my $b = $1; $b =~ s{/\*.*?\*/}{}sg; print "$1\n" while $b =~ /\b([A-Z][A-Z0-9_]*)\b/g }' \
    launcher/job/job.h | sort -u | paste -sd'|')
# An assignment (not ==, !=, <=, >=) of a state: its value one of those enumerators (also as a
# designated initialiser, ".state = RANK_PENDING"), or any value into a job's, a node's or a
# rank's state field reached by the names the model uses (j->, job->, ranks[i]., nodes[i].,
# rank_at()/node_at()->). Comments and strings are blanked first; prints FILE:LINE: text.
state_writes() {
    ENUMS="$enumerators" perl -0ne '
        my $src = $_;
        my $code = $src;
        # blank comments and string literals, keeping newlines so line numbers hold
        $code =~ s{(/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'"'"'(?:\\.|[^'"'"'\\\n])*'"'"')}{ (my $m = $1) =~ s/[^\n]/ /g; $m }sge;
        my $e = $ENV{ENUMS};
        my $field = qr{(?:\.|->)\s*state\s*=(?!=)};
        my $by_value = qr{$field\s*(?:\(\s*enum\s+\w+\s*\)\s*)?(?:$e)\b};
        my $by_name = qr{(?:\b(?:j|job)\s*->|\b(?:ranks|nodes)\s*\[[^\]]*\]\s*\.|\b(?:rank_at|node_at)\s*\([^()]*\)\s*->)\s*state\s*=(?!=)};
        while ($code =~ /($by_value|$by_name)/g) {
            my $line = 1 + (substr($code, 0, $-[0]) =~ tr/\n//);
            my $text = (split /\n/, $src)[$line - 1];
            $text =~ s/^\s+//;
            print "$ARGV:$line: $text\n";
        }' "$@"
}

cat >"$tmp/violation.c" <<'EOF'
void bad(struct job *j, struct rank_info *r, struct ssh_conn *c)
{
    r->state = RANK_FAILED;
    c->job->state =
        JOB_DONE;
    j->nodes[2].state = st;
    *r = (struct rank_info){ .rank = 1, .state = RANK_PENDING };
    if (r->state == RANK_RUNNING || j->state != JOB_DONE) c->state = SSH_CONN_FAILED;
    /* r->state = RANK_LOST; in a comment */
    puts("j->state = JOB_DONE");
}
EOF
out=$(state_writes "$tmp/violation.c")
want="$tmp/violation.c:3: r->state = RANK_FAILED;
$tmp/violation.c:4: c->job->state =
$tmp/violation.c:6: j->nodes[2].state = st;
$tmp/violation.c:7: *r = (struct rank_info){ .rank = 1, .state = RANK_PENDING };"
if [ -n "$enumerators" ] && [ "$out" = "$want" ]; then
    tap_ok "the state-write pattern finds assignments and initialisers, not comparisons, comments or strings"
else
    tap_fail "the state-write pattern finds assignments and initialisers, not comparisons, comments or strings" \
        "enumerators: $enumerators" "found:" "$out" "expected:" "$want"
fi

mapfile -t sources < <(find launcher tui -name '*.[ch]' ! -path launcher/job/job_state.c ! -path launcher/job/job.c | sort)
out=$(state_writes "${sources[@]}")
if [ -z "$out" ]; then
    tap_ok "job, node and rank states are assigned only in job/job_state.c and job/job.c (${#sources[@]} files)"
else
    tap_fail "job, node and rank states are assigned only in job/job_state.c and job/job.c" \
        "call a transition of launcher/job/job_state.h instead:" "$out"
fi
# job.c may set the first states of what it builds (job_new, a new attempt): nothing else.
out=$(state_writes launcher/job/job.c | grep -vE ': (j->state = JOB_CHECKING|n->state = NODE_CONNECTING|r->state = RANK_PENDING);$')
if [ -z "$out" ]; then tap_ok "job/job.c sets only the initial states (CHECKING, CONNECTING, PENDING)"
else tap_fail "job/job.c sets only the initial states (CHECKING, CONNECTING, PENDING)" "$out"; fi

# ---- (h) one event loop ----------------------------------------------------------------------

# Outside launcher/util/evloop.c, a poll() of more than one fd or a signal handler that writes
# to a pipe is a second copy of the event loop. Allowed only here, by file name (a move keeps
# it), each with its reason; an entry with nothing left to excuse fails too.
EVLOOP_COPIES="python3 tests/lib/evloop_copies.py"
declare -A LOOP_ALLOWED=(
    [agent_exec.c]="probes: a few children read to their end within one request, then gone"
    [agent_relay.c]="the Slurm relay's thread: two fds, and a thread must not touch the agent's loop"
    [session_client.c]="the attach client: a process of its own around a terminal, no other loop in it"
    [comm_ring.c]="ddptop-train's ring thread: the runtime links no launcher room"
    [store_server.c]="ddptop-train's rendezvous store thread: the runtime links no launcher room"
)
mkdir -p "$tmp/loops/tui"
cat >"$tmp/loops/tui/second.c" <<'LOOP'
static int sp[2];
static void on_sig(int s) { unsigned char b = s; write(sp[1], &b, 1); }
static void crash(int s) { write(STDERR_FILENO, "x", 1); }
void loop(struct pollfd *p, int n)
{
    sa.sa_handler = on_sig;
    signal(SIGSEGV, crash);
    poll(p, 1, 10);      /* one fd with a deadline: a wait */
    poll(p, n, -1);
    /* poll(p, 3, 0) in a comment */
}
LOOP
out=$($EVLOOP_COPIES --root "$tmp/loops" 2>&1)
want="tui/second.c:9: poll() of n fds: a loop of its own
tui/second.c:2: signal handler on_sig() writes to a pipe: a self-pipe of its own"
home=$($EVLOOP_COPIES launcher/util/evloop.c 2>&1)
if [ "$out" = "$want" ] && grep -q 'evloop_on_signal() writes to a pipe' <<<"$home" &&
   grep -q 'poll() of .*n_pfd fds' <<<"$home"; then
    tap_ok "the event-loop checker sees a poll of several fds and a self-pipe handler (and evloop.c's own)"
else
    tap_fail "the event-loop checker sees a poll of several fds and a self-pipe handler (and evloop.c's own)" \
        "found:" "$out" "expected:" "$want" "in evloop.c:" "$home"
fi

out=$($EVLOOP_COPIES 2>&1)
bad=() used=()
while IFS= read -r l; do
    [ -n "$l" ] || continue
    f=$(basename "${l%%:*}")
    if [ -n "${LOOP_ALLOWED[$f]:-}" ]; then used+=("$f"); else bad+=("$l"); fi
done <<<"$out"
stale=()
for f in "${!LOOP_ALLOWED[@]}"; do
    printf '%s\n' "${used[@]}" | grep -qx "$f" || stale+=("$f: allowed, but no second loop is left in it: take it off the list")
done
if [ ${#bad[@]} -eq 0 ] && [ ${#stale[@]} -eq 0 ]; then
    tap_ok "one event loop: no other poll() of several fds or signal self-pipe (${#LOOP_ALLOWED[@]} allowed, with reasons)"
else
    tap_fail "one event loop: no other poll() of several fds or signal self-pipe" \
        "use launcher/util/evloop.h (evloop_watch, evloop_signal), or add the file to LOOP_ALLOWED with a reason:" \
        "${bad[@]}" "${stale[@]}"
fi

# ---- (i) the job model does no I/O -----------------------------------------------------------

# The model hands what is to be kept to its sink (record/run_files.c): a call in launcher/job/
# of anything that opens, writes, makes, removes, syncs or locks a file, raises a limit, or of
# the run files' modules is refused. Comments and strings are blanked first; member calls
# (sink->log) are not calls of these. IO_EXEMPT: FILE:FUNCTION whose body may (plan_token
# reads /dev/urandom for the agents' token: entropy, not the run's files).
IO_CALLS='open|openat|fopen|fdopen|freopen|creat|write|pwrite|writev|fwrite|fputs|fputc|putc|fprintf|vfprintf|dprintf|fflush|read|pread|fread|fgets|getline|mkdir|mkdirat|mkdtemp|mkstemp|unlink|unlinkat|remove|rename|renameat|rmdir|link|symlink|fsync|fdatasync|sync_file_range|ftruncate|truncate|chmod|fchmod|chown|fchown|lstat|stat|fstat|flock|lockf|setrlimit|opendir|readdir|close|fclose|dup|dup2|popen|util_mkdir_p|util_replace_file|util_fopen_write|util_write_all|logw_\w+|run_owner_\w+|run_files_\w+|run_record_\w+'
IO_EXEMPT=${IO_EXEMPT:-launcher/job/plan.c:plan_token}
io_calls() {
    CALLS="$IO_CALLS" EXEMPT="$IO_EXEMPT" perl -0ne '
        my $src = $_;
        my $code = $src;
        $code =~ s{(/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'"'"'(?:\\.|[^'"'"'\\\n])*'"'"')}{ (my $m = $1) =~ s/[^\n]/ /g; $m }sge;
        for my $ex (split / /, $ENV{EXEMPT}) {
            my ($f, $fn) = split /:/, $ex;
            next unless $ARGV eq $f;
            # the function body, from its definition to the first "}" alone on a line
            $code =~ s#(\b\Q$fn\E\s*\([^;{]*\)\s*\{.*?\n\})# (my $m = $1) =~ s/[^\n]/ /g; $m #se;
        }
        my $calls = $ENV{CALLS};
        while ($code =~ /(?<![\w.>])($calls)\s*\(/g) {
            my $name = $1;
            my $line = 1 + (substr($code, 0, $-[0]) =~ tr/\n//);
            my $text = (split /\n/, $src)[$line - 1];
            $text =~ s/^\s+//;
            print "$ARGV:$line: $name: $text\n";
        }' "$@" || echo "io_calls: the pattern failed to run"
}

mkdir -p "$tmp/io/launcher/job"
cat >"$tmp/io/launcher/job/io.c" <<'EOF'
static void bad(struct job *j, int fd)
{
    FILE *f = fopen(j->log_dir, "w");
    write (fd, "x", 1);
    logw_events(j->w, "x", 1);
    mkdir(j->log_dir, 0700);
    j->sink->log(j->sink->ctx, 0, 0, 0, 0, "x", 1, true);
    job_log_write(j, 0, 0, 0, "x", 1, true);
    snprintf(buf, sizeof buf, "open(");  /* write(fd) in a comment */
    if (f) fclose(f);
}
int plan_token(char out[33])
{
    int fd = open("/dev/urandom", 0);
    close(fd);
}
EOF
out=$(cd "$tmp/io" && IO_EXEMPT=launcher/job/io.c:plan_token io_calls launcher/job/io.c)
want='launcher/job/io.c:3: fopen: FILE *f = fopen(j->log_dir, "w");
launcher/job/io.c:4: write: write (fd, "x", 1);
launcher/job/io.c:5: logw_events: logw_events(j->w, "x", 1);
launcher/job/io.c:6: mkdir: mkdir(j->log_dir, 0700);
launcher/job/io.c:10: fclose: if (f) fclose(f);'
if [ "$out" = "$want" ]; then
    tap_ok "the I/O pattern finds calls that touch files, not member calls, longer names, comments, strings or an exempt function"
else
    tap_fail "the I/O pattern finds calls that touch files, not member calls, longer names, comments, strings or an exempt function" \
        "found:" "$out" "expected:" "$want"
fi

mapfile -t job_sources < <(find launcher/job -name '*.[ch]' | sort)
out=$(io_calls "${job_sources[@]}")
if [ ${#job_sources[@]} -gt 0 ] && [ -z "$out" ]; then
    tap_ok "the job model does no I/O: no file, limit or writer call in launcher/job/ (${#job_sources[@]} files)"
else
    tap_fail "the job model does no I/O: no file, limit or writer call in launcher/job/" \
        "hand it to the job's sink (struct job_sink; record/run_files.c writes the run's files):" "$out"
fi

# ---- (e) every room has a README.md -----------------------------------------------------------

missing=""
for r in $LAUNCHER_ROOMS $TUI_ROOMS; do
    f=$(room_dir "$r")/README.md
    if [ ! -s "$f" ] || ! grep -q '^May include:' "$f"; then missing="$missing $f"; fi
done
if [ -z "$missing" ]; then tap_ok "every room of launcher/ and tui/ has a README.md saying what it may include"
else tap_fail "every room of launcher/ and tui/ has a README.md saying what it may include" "missing or without 'May include:':$missing"; fi

linked=""
for r in $LAUNCHER_ROOMS $TUI_ROOMS; do
    grep -q "(../$(room_dir "$r")/README.md)" docs/architecture.md || linked="$linked $r"
done
if [ -z "$linked" ]; then tap_ok "docs/architecture.md links every room's README.md"
else tap_fail "docs/architecture.md links every room's README.md" "not linked:$linked"; fi

# ---- (f) one command table --------------------------------------------------------------------

# Subcommands outside the table of ROOT/tui/cmd/cmd.c, one line each: a dispatch on argv[1]'s
# word, or a comparison with a command's name, anywhere but cmd.c; a command's main (NAME_cli_main)
# outside tui/cmd/; a tui/cmd/cmd_NAME.c whose entry is not in the table; a struct cmd_entry defined outside
# tui/cmd/ or not listed in the table. ddptop-agent (launcher/agent/) is another program.
command_strays() {
    local root=$1 listed names f n e file line what
    listed=$(sed -n '/cmd_table\[\] *=/,/};/p' "$root/tui/cmd/cmd.c" | grep -oE 'cmd_[a-z0-9_]+_entry' | sort -u)
    names=$(cd "$root" && grep -rh -A3 -E '^const struct cmd_entry cmd_[a-z0-9_]+_entry' tui launcher |
        sed -n 's/.*\.\(name\|alias\) *= *"\([^"]*\)".*/\2/p' | paste -sd'|')
    (cd "$root" && grep -rnE 'strcmp\(argv\[1\], *"[^-]' launcher tui --include='*.c' |
        grep -vE '^(tui/cmd/cmd\.c|launcher/agent/)' | sed 's/$/  (dispatch outside the table)/')
    [ -n "$names" ] && (cd "$root" && grep -rnE "strcmp\([^;]*\"($names)\"\)" launcher tui --include='*.c' |
        grep -vE '^(tui/cmd/cmd\.c|launcher/agent/)' | sed 's/$/  (a command word compared outside the table)/')
    (cd "$root" && grep -rnE '^int ([a-z0-9_]+_cli|cmd_[a-z0-9_]+)_main\(' launcher tui --include='*.c' | grep -v '^tui/cmd/' |
        sed 's/$/  (a command outside tui\/cmd\/ and its table)/')
    for f in "$root"/tui/cmd/cmd_*.c; do
        [ -e "$f" ] || continue
        n=${f##*/cmd_}
        n=${n%.c}
        grep -qx "cmd_${n}_entry" <<<"$listed" || echo "tui/cmd/cmd_$n.c: cmd_${n}_entry is not in cmd_table (tui/cmd/cmd.c)"
    done
    (cd "$root" && grep -rnoE '^const struct cmd_entry cmd_[a-z0-9_]+_entry' launcher tui) |
    while IFS=: read -r file line what; do
        e=${what##* }
        case $file in tui/cmd/*) ;; *) echo "$file:$line: $e defined outside tui/cmd/";; esac
    done
}

fake=$tmp/cmdtree
mkdir -p "$fake/tui/cmd" "$fake/launcher/controller" "$fake/launcher/agent"
cat >"$fake/tui/cmd/cmd.c" <<'EOF'
const struct cmd_entry *const cmd_table[] = {
    &cmd_run_entry, &cmd_ls_entry,
    NULL,
};
int cmd_dispatch(int argc, char **argv) { return strcmp(argv[1], "ls"); }
EOF
printf 'const struct cmd_entry cmd_run_entry = {\n    .name = "run",\n};\n' >"$fake/tui/cmd/cmd_run.c"
printf 'const struct cmd_entry cmd_ls_entry = {\n    .name = "ls",\n};\n' >"$fake/tui/cmd/cmd_ls.c"
printf 'const struct cmd_entry cmd_gc_entry = {\n    .name = "gc",\n};\n' >"$fake/tui/cmd/cmd_gc.c"
printf 'const struct cmd_entry cmd_top_entry = {\n    .name = "top",\n};\n' >"$fake/tui/top.c"
printf 'int main(int c, char **v) { if (strcmp(v[1], "ls") == 0) return 1; return 0; }\n' >"$fake/tui/main2.c"
printf 'int f(char **argv) { return strcmp(argv[1], "prune") == 0; }\n' >"$fake/launcher/controller/prune.c"
printf 'int g(void) { return 0; }\n' >"$fake/launcher/controller/opts_cli.c"
printf 'int top_cli_main(int argc, char **argv)\n{ return 0; }\n' >"$fake/launcher/controller/top_cli.c"
printf 'int main(int c, char **argv) { return strcmp(argv[1], "ls"); }\n' >"$fake/launcher/agent/agent_main.c"
out=$(command_strays "$fake")
if grep -q '^tui/main2.c:1:.*a command word compared outside the table' <<<"$out" &&
   grep -q '^launcher/controller/prune.c:1:.*dispatch outside the table' <<<"$out" &&
   grep -q '^launcher/controller/top_cli.c:1:.*a command outside tui/cmd/' <<<"$out" &&
   grep -q '^tui/cmd/cmd_gc.c: cmd_gc_entry is not in cmd_table' <<<"$out" &&
   grep -q '^tui/top.c:1: cmd_top_entry defined outside tui/cmd/' <<<"$out" &&
   ! grep -qE '^(tui/cmd/cmd\.c|launcher/agent/|tui/cmd/cmd_(run|ls)\.c|launcher/controller/opts_cli)' <<<"$out"; then
    tap_ok "the command-table checker sees a dispatch, a command word compared, a command's main and entries outside the table"
else
    tap_fail "the command-table checker sees a dispatch, a command word compared, a command's main and entries outside the table" "$out"
fi

out=$(command_strays "$PWD")
n_entries=$(sed -n '/cmd_table\[\] *=/,/};/p' tui/cmd/cmd.c | grep -oE 'cmd_[a-z0-9_]+_entry' | sort -u | wc -l)
if [ -z "$out" ] && [ "$n_entries" -ge 6 ]; then
    tap_ok "every subcommand is an entry of tui/cmd/cmd.c's table ($n_entries), dispatched nowhere else"
else
    tap_fail "every subcommand is an entry of tui/cmd/cmd.c's table, dispatched nowhere else" \
        "entries in the table: $n_entries" "$out"
fi

# ---- (g) a transport kind is one file; no other file tests which kind a transport is ---------

# Two things are transports. How an agent's lines flow is an ops table (struct transport_ops,
# launcher/ssh/transport_int.h), one a file, launcher/ssh/transport_WAY.c, that transport.c
# dispatches through: nothing else looks at t->ops. How ddptop starts its agents is a kind
# (struct transport_kind, launcher/ssh/transport_kind.h): one file, launcher/ssh/kind_NAME.c,
# that defines kind_NAME, and one line X(NAME) of the table in launcher/ssh/transport_kinds.c;
# the controller, the preflight and the command lines call its operations and read its
# properties. Anywhere else a test of the kind would be the ten edits of issue 32 again: the
# enum of old (hosts_via), a field or variable that says which kind it is (via, o.local), a
# kind's name or --transport's value compared, a kind compared or named, t->ops compared.
mapfile -t ops_files < <(ls launcher/ssh/transport_*.c 2>/dev/null | grep -v '/transport_kinds\.c$' | sort)
ops_names=$(perl -ne 'print "$1\n" if /\bstruct\s+transport_ops\s+(\w+)\s*=/' "${ops_files[@]}" /dev/null |
    sort -u | paste -sd'|')
mapfile -t kind_files < <(ls launcher/ssh/kind_*.c 2>/dev/null | sort)
kind_names=$(perl -ne 'print "$1\n" if /^\s*\.name\s*=\s*"([^"]+)"/' "${kind_files[@]}" /dev/null | sort -u |
    paste -sd'|')
# FILE:LINE: text of every test of a transport's kind in the files given. Comments (and, for all
# but the comparison with a kind name, strings) are blanked first: a message may name a kind.
kind_tests() {
    OPS="$ops_names" KINDS="$kind_names" perl -0ne '
        my $src = $_;
        (my $nocom = $src) =~ s{(/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'"'"'(?:\\.|[^'"'"'\\\n])*'"'"')}{
            my $m = $1; $m =~ /^["'"'"']/ ? $m : ($m =~ s/[^\n]/ /gr) }sge;
        (my $code = $nocom) =~ s{("(?:\\.|[^"\\\n])*"|'"'"'(?:\\.|[^'"'"'\\\n])*'"'"')}{ $1 =~ s/[^\n]/ /gr }sge;
        my $kinds = $ENV{KINDS} || "ssh|srun|tm|local";
        (my $flags = "$kinds|pbs_tmrsh|remote") =~ s/\bssh\|//; # .ssh: the connection options
        my $kind = qr{(?:\btransport\s*(?:\.|->)\s*kind|->\s*o\s*->\s*kind)\b};
        my @code_re = (
            qr{\benum\s+hosts_via\b|\bHOSTS_VIA_\w+},                                 # the enum of old
            qr{\bvia\b},                                                              # a "via" in code
            qr{(?:\.|->)\s*(?:$flags)\b(?!\s*(?:\.|->|\[))},                          # a kind flag
            qr{\bstruct\s+transport_ops\b|->\s*ops\s*[!=]=},                          # an ops table
            qr{\bkind_(?:$kinds)\b},                                                  # a kind named
            qr{$kind\s*[!=]=|[!=]=\s*[\w.>-]*?$kind|[!=]=\s*&\s*kind_\w+|\bkind_\w+\s*[!=]=}, # compared
            qr{\btransport_kind_find\s*\(},                                           # looked up
        );
        push @code_re, qr{\b(?:$ENV{OPS})\b} if $ENV{OPS};
        my %seen;
        my $report = sub {
            my $line = 1 + (substr($_[0], 0, $_[1]) =~ tr/\n//);
            return if $seen{$line}++;
            my $text = (split /\n/, $src)[$line - 1];
            $text =~ s/^\s+//;
            print "$ARGV:$line: $text\n";
        };
        for my $re (@code_re) { while ($code =~ /$re/g) { $report->($code, $-[0]) } }
        # a kind name, or what holds one (--transport, a check report), compared
        while ($code =~ /\bstrn?(?:case)?cmp\s*\(([^;{}]*)\)/g) {
            my ($at, $args) = ($-[0], $1);
            my $lit = substr($nocom, $-[1], $+[1] - $-[1]);
            $report->($code, $at) if $lit =~ /"(?:$kinds|pbs_tmrsh|child)"/ ||
                                     $args =~ /(?:\bkind\s*->\s*name|\bnamed|->\s*(?:link|transport))\b/;
        }' "$@"
}

cat >"$tmp/kinds.c" <<'EOF'
#include "ssh/transport.h"
static bool is_local(const struct transport *t) { return t->ops == &child_ops; }
static bool is_srun(const struct check_report *r) { return strcmp(r->link, "srun") == 0; }
static void f(struct controller *c, size_t i)
{
    if (c->o.check.via == HOSTS_VIA_SRUN) return;
    const struct host *h = c->o.local ? NULL : &c->hl->hosts[i];
    if (c->o.check.transport.kind == &kind_srun || strcmp(c->o.check.transport.named, "tm") == 0) return;
    printf("via %s, tm\n", h->name); /* c->o.local, T_SRUN and strcmp(x, "srun") in a comment */
    ssh_cli_option("run", 0, NULL, NULL, &c->o.check.ssh, NULL, 0);
    if (ev->kind == EV_END || strcmp(kind, "link") == 0) return;
    int64_t t = c->o.check.ssh.timeout_s + transport_kind_hello_ms(c->o.check.transport.kind);
}
EOF
out=$(kind_tests "$tmp/kinds.c" | sort -t: -k2,2n)
want="$tmp/kinds.c:2: static bool is_local(const struct transport *t) { return t->ops == &child_ops; }
$tmp/kinds.c:3: static bool is_srun(const struct check_report *r) { return strcmp(r->link, \"srun\") == 0; }
$tmp/kinds.c:6: if (c->o.check.via == HOSTS_VIA_SRUN) return;
$tmp/kinds.c:7: const struct host *h = c->o.local ? NULL : &c->hl->hosts[i];
$tmp/kinds.c:8: if (c->o.check.transport.kind == &kind_srun || strcmp(c->o.check.transport.named, \"tm\") == 0) return;"
n_ops=$(tr '|' '\n' <<<"$ops_names" | grep -c .)
if [ "${#ops_files[@]}" -ge 3 ] && [ "$n_ops" -eq "${#ops_files[@]}" ] && [ "$out" = "$want" ]; then
    tap_ok "each way of carrying an agent's lines fills one ops table ($ops_names); the kind-test pattern finds tests of a kind (the enum, via, o.local, a kind name or a kind compared, t->ops), not a kind named in a comment, a string or a message"
else
    tap_fail "each way of carrying an agent's lines fills one ops table; the kind-test pattern finds tests of a kind" \
        "ops files: ${ops_files[*]}" "ops tables: $ops_names" "found:" "$out" "expected:" "$want"
fi

# Each kind is its file and its line: kind_NAME.c defines kind_NAME and no other kind, and the
# table lists every such file once.
table=$(sed -n '/#define TRANSPORT_KINDS(X)/,/table.s end/p' launcher/ssh/transport_kinds.c |
    grep -oE '^[[:space:]]*X\([a-z0-9_]+\)' | sed 's/.*X(//; s/)//' | sort)
files=$(for f in "${kind_files[@]}"; do basename "$f" .c | sed 's/^kind_//'; done | sort)
bad=""
for f in "${kind_files[@]}"; do
    k=$(basename "$f" .c)
    defs=$(grep -cE '^const struct transport_kind [a-z0-9_]+ = \{' "$f")
    grep -qE "^const struct transport_kind $k = \{" "$f" && [ "$defs" -eq 1 ] || bad="$bad $f"
done
if [ -n "$table" ] && [ "$table" = "$files" ] && [ -z "$(uniq -d <<<"$table")" ] && [ -z "$bad" ]; then
    tap_ok "each transport kind is one file, launcher/ssh/kind_NAME.c, and one line of the table ($(echo $table))"
else
    tap_fail "each transport kind is one file and one line of the table" "table: $(echo $table)" \
        "kind files: $(echo $files)" "files not defining exactly their kind_NAME:$bad"
fi

# The kinds' files and the table are where kinds are known; the ops files and transport.c may
# look at their own ops tables.
mapfile -t sources < <(find launcher tui -name '*.[ch]' ! -path 'launcher/ssh/kind_*.c' \
    ! -path launcher/ssh/transport_kinds.c ! -path launcher/ssh/transport_kind.h \
    ! -path launcher/ssh/transport_int.h | sort)
is_ops_file='^launcher/ssh/transport(_[a-z]+)?\.c$'
out=$(kind_tests $(printf '%s\n' "${sources[@]}" | grep -vE "$is_ops_file")
      kind_tests $(printf '%s\n' "${sources[@]}" | grep -E "$is_ops_file") |
          grep -vE ':[0-9]+: .*(struct transport_ops|\b('"$ops_names"')\b)'
      grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(ssh/)?transport_int\.h"' "${sources[@]}" |
          grep -vE '^launcher/ssh/transport(_[a-z]+)?\.c:')
if [ -z "$out" ]; then
    tap_ok "no file but a kind's own tests which kind a transport is: not the controller, the checks, the hosts or any other (${#sources[@]} files)"
else
    tap_fail "no file but a kind's own tests which kind a transport is" \
        "ask the kind (launcher/ssh/transport_kind.h: an operation or a property of struct transport_kind) instead:" "$out"
fi

# ---- (j) calls follow the rooms' direction; no call circle between rooms ---------------------

# Includes are not the only way across rooms: a function declared in one room's header but
# defined in another's lets the first call the second without including it. tests/lib/calls.py
# reads the calls from the built objects (nm: what each object leaves undefined, and which
# object defines it): (1) every call across rooms follows RULES, (2) no files of different
# rooms call each other, directly or around a circle. A call through a pointer is no edge, by
# design: the dashboard calls the session only through the hooks tui/cmd/ hands it.
CALLS="python3 tests/lib/calls.py"
fake=$tmp/calls
mkdir -p "$fake/launcher/util" "$fake/launcher/job" "$fake/launcher/record" "$fake/launcher/hosts" \
    "$fake/tui/session" "$fake/tui/cmd"
# util's two files call each other: within a room that is no circle
printf 'int util_b(void);\nint util_a(int n) { return n ? util_b() : 0; }\n' >"$fake/launcher/util/u1.c"
printf 'int util_a(int);\nint util_b(void) { return util_a(0); }\n' >"$fake/launcher/util/u2.c"
# job calls record through a declaration of its own (no include), record calls job back
printf 'int record_get(void);\nint util_a(int);\nint job_count(void) { return record_get() + util_a(1); }\n' >"$fake/launcher/job/job.c"
printf 'int job_peek(void);\nint record_get(void) { return job_peek(); }\n' >"$fake/launcher/record/rec.c"
printf 'int job_count(void);\nint job_peek(void) { static int d; return d++ ? 0 : job_count(); }\n' >"$fake/launcher/job/job_peek.c"
# the dashboard calls the session only through the hook the command hands it
printf 'int session_detach(void);\nint session_detach(void) { return 0; }\n' >"$fake/tui/session/s.c"
printf 'int dash_run(int (*detach)(void));\nint dash_run(int (*detach)(void)) { return detach(); }\n' >"$fake/tui/dash.c"
printf 'int session_detach(void);\nint dash_run(int (*)(void));\nint main(void) { return dash_run(session_detach); }\n' >"$fake/tui/cmd/c.c"
# an object whose source is gone is stale, not checked; a source with no object is reported
printf 'int record_get(void);\nint hosts_gone(void) { return record_get(); }\n' >"$fake/launcher/hosts/gone.c"
built=1
for c in $(cd "$fake" && find launcher tui -name '*.c'); do
    mkdir -p "$fake/build/obj/$(dirname "$c")"
    ${CC:-cc} -std=c11 -c "$fake/$c" -o "$fake/build/obj/${c%.c}.o" || built=0
done
rm "$fake/launcher/hosts/gone.c"
printf 'int hosts_h(void) { return 0; }\n' >"$fake/launcher/hosts/h.c"
out=$($CALLS --root "$fake" rooms "${RULES[@]}" 2>&1; echo "rc=$?")
out2=$($CALLS --root "$fake" circles 2>&1; echo "rc=$?")
circle='call circle between the rooms job, record (3 files): launcher/job/job.c --record_get()--> launcher/record/rec.c --job_peek()--> launcher/job/job_peek.c --job_count()--> launcher/job/job.c'
if [ $built -eq 1 ] && grep -qx 'rc=1' <<<"$out" && grep -qx 'rc=1' <<<"$out2" &&
   grep -qx 'launcher/job/job.c: calls record_get() of launcher/record/rec.c: job/ may call only hosts, util, wire' <<<"$out" &&
   grep -q '^launcher/hosts/h.c: no object in build/obj: run make' <<<"$out" &&
   [ "$(grep -c ': calls ' <<<"$out")" -eq 1 ] && ! grep -qE 'gone|session|tui' <<<"$out" &&
   grep -qxF "$circle" <<<"$out2" && [ "$(grep -c '^call circle' <<<"$out2")" -eq 1 ]; then
    tap_ok "the call checker sees a call against the direction through a declaration, and a call circle between rooms (not one within a room, not a hook called through a pointer, not a stale object)"
else
    tap_fail "the call checker sees a call against the direction through a declaration, and a call circle between rooms" \
        "rooms:" "$out" "circles:" "$out2" "expected the circle:" "$circle"
fi

out=$($CALLS --obj "$BUILD_DIR/obj" rooms "${RULES[@]}" 2>&1)
if [ $? -eq 0 ]; then tap_ok "every call across rooms in launcher/ and tui/ follows the rooms' direction ($out)"
else tap_fail "every call across rooms in launcher/ and tui/ follows the rooms' direction" \
    "call a room the table does not allow only through a pointer you are handed (a hook), never by name:" "$out"; fi
out=$($CALLS --obj "$BUILD_DIR/obj" circles 2>&1)
if [ $? -eq 0 ]; then tap_ok "no call circle between files of different rooms ($out)"
else tap_fail "no call circle between files of different rooms" "$out"; fi

# ---- (k) no call cycle of four files or more in the agent and the job model ----------------

# Files of a room that call each other around a circle are one module spread over files: each
# can only be understood, tested and changed with the others. Two or three files of one topic
# may (a file and its helper); four or more may not (issue 32: the agent's ranks side was four,
# the events ring and NCCL's account four). A group counts every file that reaches every other
# through calls inside the folder, so a knot of small circles is one group. And the events ring
# is a leaf of the model: whoever ends an attempt says NCCL's pending findings first, the ring
# never asks for them (it would tie every event to NCCL's account).
CYCLE_ROOMS="launcher/agent launcher/job launcher/controller"
fake=$tmp/cycles
mkdir -p "$fake/launcher/agent" "$fake/launcher/job" "$fake/launcher/util"
# a1 -> a2 -> a3 -> a4 -> a1: four files in one circle; p <-> q: two, allowed; leaf: called only
printf 'int a2(int);\nint leaf(void);\nint a1(int n) { return n ? a2(n - 1) + leaf() : 0; }\n' >"$fake/launcher/agent/a1.c"
printf 'int a3(int);\nint a2(int n) { return a3(n); }\n' >"$fake/launcher/agent/a2.c"
printf 'int a4(int);\nint a3(int n) { return a4(n); }\n' >"$fake/launcher/agent/a3.c"
printf 'int a1(int);\nint util_x(void);\nint a4(int n) { return a1(n) + util_x(); }\n' >"$fake/launcher/agent/a4.c"
printf 'int leaf(void) { return 1; }\n' >"$fake/launcher/agent/leaf.c"
printf 'int q(int);\nint p(int n) { return n ? q(n - 1) : 0; }\n' >"$fake/launcher/agent/p.c"
printf 'int p(int);\nint q(int n) { return p(n); }\n' >"$fake/launcher/agent/q.c"
# util calls back into the agent: no cycle inside launcher/agent for it
printf 'int a1(int);\nint util_x(void) { return a1(0); }\n' >"$fake/launcher/util/u.c"
# the events ring asks NCCL's account for its pending findings, which add events
printf 'void nccl_flush(void);\nvoid job_event_end(void) { nccl_flush(); }\nvoid job_event_add(void) {}\n' >"$fake/launcher/job/job_events.c"
printf 'void job_event_add(void);\nvoid nccl_flush(void) { job_event_add(); }\n' >"$fake/launcher/job/nccl_odd.c"
built=1
for c in $(cd "$fake" && find launcher -name '*.c'); do
    mkdir -p "$fake/build/obj/$(dirname "$c")"
    ${CC:-cc} -std=c11 -c "$fake/$c" -o "$fake/build/obj/${c%.c}.o" || built=0
done
out=$($CALLS --root "$fake" cycles $CYCLE_ROOMS --max 3 2>&1; echo "rc=$?")
out2=$($CALLS --root "$fake" never launcher/job/job_events.c 'launcher/job/nccl*.c' 2>&1; echo "rc=$?")
if [ $built -eq 1 ] && grep -qx 'rc=1' <<<"$out" &&
   grep -qx 'launcher/agent: 4 files call each other around circles (at most 3 may): a1.c, a2.c, a3.c, a4.c' <<<"$out" &&
   grep -qx '    launcher/agent/a4.c -> a1() -> launcher/agent/a1.c' <<<"$out" &&
   ! grep -qE 'leaf|p\.c|q\.c|u\.c' <<<"$out" &&
   grep -qx 'launcher/job: 2 files, no call cycle of more than 3 (smaller: job_events.c <-> nccl_odd.c)' <<<"$out" &&
   grep -qx 'rc=1' <<<"$out2" &&
   grep -qx 'launcher/job/job_events.c: calls nccl_flush() of launcher/job/nccl_odd.c' <<<"$out2"; then
    tap_ok "the cycle checker sees four files in one call circle in a folder (not two, not a file called only, not a circle through another folder), and the events ring calling NCCL's account"
else
    tap_fail "the cycle checker sees four files in one call circle in a folder, and the events ring calling NCCL's account" \
        "cycles:" "$out" "never:" "$out2"
fi

out=$($CALLS --obj "$BUILD_DIR/obj" cycles $CYCLE_ROOMS --max 3 2>&1)
if [ $? -eq 0 ]; then tap_ok "no call cycle joins four files or more in launcher/agent, launcher/job or launcher/controller (${out//$'\n'/; })"
else tap_fail "no call cycle joins four files or more in launcher/agent, launcher/job or launcher/controller" \
    "layer them: a file below calls nothing above it; what it needs from above it is handed (a result, an argument), not called:" "$out"; fi
out=$($CALLS --obj "$BUILD_DIR/obj" never launcher/job/job_events.c 'launcher/job/nccl*.c' 2>&1)
if [ $? -eq 0 ]; then tap_ok "the events ring calls nothing of NCCL's account ($out)"
else tap_fail "the events ring calls nothing of NCCL's account" \
    "say NCCL's pending findings (nccl_flush) where the attempt ends, before job_event_end:" "$out"; fi

# ---- (l) the controller in layers ----------------------------------------------------------

# Issue 32: the controller's files all called each other (handlers of agent messages called the
# policy that stops and restarts the job, every file called the plumbing that lived beside the
# policy). Now they are layers, the top first (launcher/controller/controller_int.h says what
# each is for): the loop; a person's actions and a run taken over; the progress step, the only place that decides to
# stop, restart, exclude or finish; the message table; the links; the preflight, stack dumps,
# GPU telemetry and exits; the job's shape; the leaves: what handlers share, the run's record,
# the node plumbing. A file calls only files of layers below its own, so a handler cannot call
# the policy (it notes a stop, the progress step acts), and the plumbing calls nothing of the
# controller. A new file must be given its layer here.
CTL_LAYERS=(
    "controller_run.c"
    "controller_act.c controller_adopt.c"
    "controller.c"
    "controller_agent.c"
    "controller_link.c"
    "controller_check.c controller_stacks.c controller_gpu.c controller_exits.c"
    "controller_spare.c"
    "controller_msg.c controller_record.c controller_node.c controller_metrics.c notify.c"
    "notify_opts.c notify_proc.c"
)
fake=$tmp/layers
mkdir -p "$fake/launcher/ctl" "$fake/launcher/util"
# top -> mid -> low, as it should be; mid also calls up (top) and across (side); stray is in no
# layer; the util call is out of the folder; gone.c is named but has no file
printf 'int ctl_mid(int);\nint ctl_top(int n) { return ctl_mid(n); }\n' >"$fake/launcher/ctl/top.c"
printf 'int ctl_low(void);\nint ctl_top(int);\nint ctl_side(void);\nint util_y(void);\nint ctl_mid(int n) { return n ? ctl_top(n - 1) + ctl_side() : ctl_low() + util_y(); }\n' >"$fake/launcher/ctl/mid.c"
printf 'int ctl_low(void);\nint ctl_side(void) { return ctl_low(); }\n' >"$fake/launcher/ctl/side.c"
printf 'int ctl_low(void) { return 0; }\n' >"$fake/launcher/ctl/low.c"
printf 'int ctl_low(void);\nint ctl_stray(void) { return ctl_low(); }\n' >"$fake/launcher/ctl/stray.c"
printf 'int ctl_top(int);\nint util_y(void) { return 1; }\n' >"$fake/launcher/util/u.c"
built=1
for c in $(cd "$fake" && find launcher -name '*.c'); do
    mkdir -p "$fake/build/obj/$(dirname "$c")"
    ${CC:-cc} -std=c11 -c "$fake/$c" -o "$fake/build/obj/${c%.c}.o" || built=0
done
out=$($CALLS --root "$fake" layers launcher/ctl top.c "mid.c side.c" "low.c gone.c" 2>&1; echo "rc=$?")
out2=$($CALLS --root "$fake" layers launcher/ctl/ top.c "mid.c side.c stray.c" low.c 2>&1; echo "rc=$?")
if [ $built -eq 1 ] && grep -qx 'rc=1' <<<"$out" &&
   grep -qx 'launcher/ctl/mid.c: calls ctl_top() of launcher/ctl/top.c, in a layer above it' <<<"$out" &&
   grep -qx 'launcher/ctl/mid.c: calls ctl_side() of launcher/ctl/side.c, in its own layer' <<<"$out" &&
   grep -q '^launcher/ctl/stray.c: in no layer of launcher/ctl' <<<"$out" &&
   grep -q '^launcher/ctl/gone.c: named in a layer, but no such file' <<<"$out" &&
   [ "$(grep -c ': calls ' <<<"$out")" -eq 2 ] && ! grep -qE 'util|low\.c: calls|top\.c: calls|side\.c: calls' <<<"$out" &&
   grep -qx 'rc=1' <<<"$out2" && [ "$(grep -c ': calls ' <<<"$out2")" -eq 2 ] && ! grep -q 'no layer' <<<"$out2"; then
    tap_ok "the layer checker sees a call up and a call within a layer (not one down, not one out of the folder), a file in no layer and a layer naming no file"
else
    tap_fail "the layer checker sees a call up and a call within a layer, a file in no layer and a layer naming no file" \
        "layers:" "$out" "layers (stray.c placed, a folder with its slash):" "$out2"
fi

out=$($CALLS --obj "$BUILD_DIR/obj" layers launcher/controller "${CTL_LAYERS[@]}" 2>&1)
if [ $? -eq 0 ]; then tap_ok "the controller's files call only the layers below their own ($out)"
else tap_fail "the controller's files call only the layers below their own" \
    "a handler records facts and notes a stop (ctl_note_stop) for the progress step; what a file needs from above is handed to it, not called; a new file gets its layer in CTL_LAYERS:" "$out"; fi

# ---- (m) no libc function defined again ------------------------------------------------------

# A function of libc's defined in our program is what every caller gets, libssh's and the
# loop's alike (issue 32: recv() and poll() were redefined to read libssh's sockets ahead): the
# rooms' direction no longer holds (util's loop called the ssh room's poll), it works only while
# a library calls through its PLT (a static or LTO libssh skips it silently), and one table
# served every caller by fd number. A library's own hooks, or an fd it is handed, do the same
# without it. Checked two ways: the objects (which file), with the C library ddptop loads; and
# the programs' dynamic symbol tables (where such a definition lands for the libraries to
# find; libc's variables copied in, stdin, environ, carry libc's version and are not ours).
LIBC=$(ldd "$BUILD_DIR/ddptop" 2>/dev/null | awk '$1 == "libc.so.6" { print $3 }')
[ -n "$LIBC" ] || LIBC=$(${CC:-cc} -print-file-name=libc.so.6)
# libc_again PROGRAM: the names PROGRAM's dynamic symbol table defines as its own (unversioned)
# that $LIBC exports too, one a line.
libc_again() {
    comm -12 <(nm -D --defined-only "$1" | awk 'NF >= 3 && $3 !~ /@/ { print $3 }' | sort -u) \
        <(nm -D --defined-only "$LIBC" | awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u)
}
fake=$tmp/libc
mkdir -p "$fake/launcher/ssh" "$fake/tui" "$fake/runtime"
cat >"$fake/launcher/ssh/ahead.c" <<'C'
#include <stddef.h>
#include <sys/types.h>
ssize_t recv(int fd, void *buf, size_t n, int flags) { (void)fd; (void)buf; (void)n; (void)flags; return -1; }
int ssh_ahead_pending(void) { return 0; }
C
printf 'static int poll(void) { return 0; }\nint tui_poll_keys(void) { return poll(); }\n' >"$fake/tui/keys.c"
printf 'int read_batch(void) { return 0; }\nint write(void) { return 1; }\n' >"$fake/runtime/data.c"
built=1
for c in launcher/ssh/ahead.c tui/keys.c runtime/data.c; do
    mkdir -p "$fake/build/obj/$(dirname "$c")"
    ${CC:-cc} -std=c11 -c "$fake/$c" -o "$fake/build/obj/${c%.c}.o" 2>/dev/null || built=0
done
printf '#include <sys/types.h>\n#include <stddef.h>\nssize_t recv(int f, void *b, size_t n, int g) { (void)f; (void)b; (void)n; (void)g; return 0; }\nint main(void) { return (int)recv(0, 0, 0, 0); }\n' >"$fake/prog.c"
${CC:-cc} -rdynamic -o "$fake/prog" "$fake/prog.c" 2>/dev/null || built=0
out=$($CALLS --root "$fake" libc "$LIBC" runtime 2>&1; echo "rc=$?")
out2=$(libc_again "$fake/prog")
if [ $built -eq 1 ] && grep -qx 'rc=1' <<<"$out" &&
   grep -q '^launcher/ssh/ahead.c: defines recv(), which libc.so.6 exports' <<<"$out" &&
   grep -q '^runtime/data.c: defines write(), which libc.so.6 exports' <<<"$out" &&
   ! grep -qE 'keys|pending|read_batch' <<<"$out" && [ "$out2" = recv ]; then
    tap_ok "the libc checker sees recv() and write() defined again in objects (not a static poll(), not names of ours), and recv() in a program's dynamic symbols"
else
    tap_fail "the libc checker sees recv() and write() defined again in objects, and recv() in a program's dynamic symbols" \
        "objects:" "$out" "program:" "$out2"
fi

out=$($CALLS --obj "$BUILD_DIR/obj" libc "$LIBC" runtime 2>&1)
if [ $? -eq 0 ]; then tap_ok "no file of launcher/, tui/ or runtime/ defines a name libc exports ($out)"
else tap_fail "no file of launcher/, tui/ or runtime/ defines a name libc exports" \
    "use the library's own hooks or an fd it is handed; name a function of ours module_verb:" "$out"; fi
bad=""
for prog in ddptop ddptop-agent ddptop-train; do
    [ -x "$BUILD_DIR/$prog" ] || { bad+="$prog: not built (make all)"$'\n'; continue; }
    again=$(libc_again "$BUILD_DIR/$prog")
    [ -z "$again" ] || bad+="$prog: exports $(echo $again) as its own, which $LIBC exports"$'\n'
done
if [ -z "$bad" ]; then tap_ok "ddptop, ddptop-agent and ddptop-train export no function or variable of libc's as their own"
else tap_fail "ddptop, ddptop-agent and ddptop-train export no function or variable of libc's as their own" "${bad%$'\n'}"; fi

tap_done
