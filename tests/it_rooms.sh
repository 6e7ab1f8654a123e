#!/usr/bin/env bash
# it_rooms: the rooms of launcher/ (docs/architecture.md, each room's README.md) hold their
# shape. (a) every include across rooms follows the dependency direction of the table below
# (the same as the READMEs' "May include" lines, which are compared with it), bare within a
# room and room-qualified across; (b) no two modules include each other, directly or in a
# loop; (c) build/ddptop-agent needs no libssh and no curses, and holds no symbol of a room
# other than agent, wire and util; (d) job, node and rank states are assigned only in
# launcher/job/job_state.c (and job.c, which builds a job and starts an attempt); (f) the
# job model (launcher/job/) does no I/O; (e) every room has a README.md. Each checker is
# first run on a made-up tree or file with a known violation, so a checker that can no
# longer see one fails here instead of passing quietly.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
INCLUDES="python3 tests/lib/includes.py"
tmp=$(mktemp -d /tmp/ddptop-it-rooms.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# What each room may include: the dependency direction, tui -> run -> check -> ssh, job ->
# wire, hosts -> util, record -> job (the model it writes and reads back into), and agent ->
# wire -> util. Keep it equal to docs/architecture.md.
RULES=(
    util:
    hosts:util
    wire:util
    job:wire,hosts,util
    record:job,wire,util
    ssh:wire,hosts,util
    check:ssh,job,wire,hosts,util
    run:check,ssh,record,job,wire,hosts,util
    agent:wire,util
    tui:run,check,record,job,util
)
ALL_ROOMS="agent ssh wire check record job run hosts util tui"
LAUNCHER_ROOMS=$(for d in launcher/*/; do basename "$d"; done)

# ---- the checkers see a violation when there is one -------------------------------------------

fake=$tmp/tree
mkdir -p "$fake/launcher/util" "$fake/launcher/job" "$fake/launcher/hosts" "$fake/tui"
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
out=$($INCLUDES --root "$fake" rooms "${RULES[@]}" 2>&1)
if [ $? -ne 0 ] && grep -q 'launcher/util/u.h: includes launcher/job/a.h: util/ may include no other room' <<<"$out" &&
   grep -q 'launcher/job/d.c: includes tui/theme.h: job/ may include only hosts, util, wire' <<<"$out" &&
   grep -q 'launcher/job/c.c: includes "job/b.h": within a room an include is bare' <<<"$out"; then
    tap_ok "the room checker sees includes against the direction and a room-qualified one within a room"
else
    tap_fail "the room checker sees includes against the direction and a room-qualified one within a room" "$out"
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
for r in $LAUNCHER_ROOMS; do
    printf '%s\n' "${RULES[@]}" | grep -q "^$r:" || missing="$missing $r"
done
if [ -z "$missing" ]; then tap_ok "every folder of launcher/ is a room in the table"
else tap_fail "every folder of launcher/ is a room in the table" "not in RULES:$missing"; fi

# A README's "May include: ..." up to the first '.', ';' or '(' names the rooms it may use.
readme_rooms() {
    sed -n '/^May include:/,/^$/p' "$1" | tr '\n' ' ' | sed 's/^May include://; s/[.;(].*//' |
        tr ', ' '\n\n' | grep -xE "$(echo $ALL_ROOMS | tr ' ' '|')" | sort | tr '\n' ' '
}
diffs=()
for rule in "${RULES[@]}"; do
    r=${rule%%:*}
    [ "$r" = tui ] && continue
    f=launcher/$r/README.md
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
for r in run check ssh record job hosts tui; do
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

# ---- (f) the job model does no I/O -----------------------------------------------------------

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
for r in $LAUNCHER_ROOMS; do
    f=launcher/$r/README.md
    if [ ! -s "$f" ] || ! grep -q '^May include:' "$f"; then missing="$missing $f"; fi
done
if [ -z "$missing" ]; then tap_ok "every room of launcher/ has a README.md saying what it may include"
else tap_fail "every room of launcher/ has a README.md saying what it may include" "missing or without 'May include:':$missing"; fi

linked=""
for r in $LAUNCHER_ROOMS; do
    grep -q "(../launcher/$r/README.md)" docs/architecture.md || linked="$linked $r"
done
if [ -z "$linked" ]; then tap_ok "docs/architecture.md links every room's README.md"
else tap_fail "docs/architecture.md links every room's README.md" "not linked:$linked"; fi

tap_done
