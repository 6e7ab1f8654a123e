/* Command line of `ddptop check`: options in any order around HOSTFILE (or --slurm/--pbs),
 * the training command after "--". The SSH options are parsed by ssh_cli_option so that
 * `ddptop run` accepts the same ones. Usage and hostfile errors return 2; nothing exits. */
#include "cmd_check.h"
#include "cmd.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/ioctl.h>

#include "check/node_opts.h"
#include "check/check_report_text.h"
#include "controller/controller.h"
#include "hosts/hosts_source.h"
#include "ssh/ssh_cli.h"
#include "ssh/transport_kind.h"
#include "util/cli.h"
#include "util/util.h"

#define TAKE(lng, shrt)                                                                  \
    (rc = cli_opt_value(argc, argv, i, lng, shrt, &val)) < 0                                 \
        ? cli_fail(err, errlen, "%s needs a value (see ddptop check --help)", lng) : rc

void cmd_check_usage(FILE *f)
{
    fputs("usage: ddptop check HOSTFILE [options] [-- CMD ARGS...]\n"
          "       ddptop check --slurm|--pbs [options] [-- CMD ARGS...]\n"
          "Checks that the nodes can train together: ssh, clock, gpu, env parity, tcp, nccl.\n"
          "CMD (optional) is the training command: its binary's sha256 is compared across nodes.\n"
          "\n"
          "  --json               one JSON document on stdout (schema: docs/check.md)\n"
          "  --all                a line per host (by default hosts with the same results\n"
          "                       share one, named as a hostlist: n[001-255])\n"
          "  --fanout N           hosts connecting at once (default 64)\n"
          "  --max-skew-ms MS     clock offset that fails (default 500; a tenth warns)\n"
          "  --master-port P      rendezvous port tested on the first host (default 29500)\n"
          "  --mesh MODE          tcp probes: full (every pair), sample (ring + 3 random peers per\n"
          "                       node: O(N)), auto (full up to 64 nodes; the default)\n"
          "  --mesh-seed N        the sample's seed (\"mesh\": {\"seed\"} of --json): probe the same pairs\n"
          "  --bench              also measure: TCP bandwidth and round trips between nodes, each\n"
          "                       node's CPU memory and GPUs, the slow ones named (docs/check.md)\n"
          "  --bench-seconds S    each transfer's length (default 1; about 5 rounds of them)\n"
          "  --bench-min-ratio R  below R x the median is slow (default 0.5)\n"
          "  --bench-nccl-mib M   each NCCL all-reduce's size where nodes have GPUs and NCCL (256)\n"
          "  --bench-dcgmi        also `dcgmi diag -r 1` where DCGM is installed (about a minute)\n"
          "  --env K=V            environment the ranks would get (repeatable; hostfile keys win)\n"
          "  -v, --verbose        progress on stderr (twice: libssh messages too)\n"
          "  -h, --help           this text\n",
          f);
    fputs(hosts_source_usage(), f);
    transport_kinds_usage(f);
    ssh_cli_usage(f);
    fputs("\nExit status: 0 nothing failed, 1 a check failed, 2 usage or hostfile error.\n", f);
}

int cmd_check_parse(int argc, char **argv, struct node_opts *o, struct hostlist *hl, char *err, size_t errlen)
{
    const char *val = NULL;
    struct hosts_source src = {0};
    int rc;
    int *i, idx;
    node_opts_init(o);
    memset(hl, 0, sizeof *hl);
    i = &idx;
    for (idx = 0; idx < argc; idx++) {
        const char *a = argv[idx];
        if (strcmp(a, "--") == 0) {
            o->cmd = argv + idx + 1;
            o->n_cmd = (size_t)(argc - idx - 1);
            if (!o->n_cmd) return cli_fail(err, errlen, "nothing after --: give the training command or drop the --");
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cmd_check_usage(stdout);
            return 1;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (hosts_source_file(&src, a, err, errlen) < 0) return -1;
            continue;
        }
        if (hosts_source_option(&src, a)) continue;
        rc = hosts_source_value_option(&src, argc, argv, i, "check", err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        rc = transport_opts_option(&o->transport, argc, argv, i, "check", err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        rc = ssh_cli_option("check", argc, argv, i, &o->ssh, err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        rc = node_opts_mesh_option(o, argc, argv, i, err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        rc = node_opts_bench_option(o, argc, argv, i, err, errlen);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        if (strcmp(a, "--json") == 0) o->json = true;
        else if (strcmp(a, "--all") == 0) o->all = true;
        else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) o->verbose++;
        else if (strcmp(a, "-vv") == 0) o->verbose += 2;
        else if ((rc = TAKE("--fanout", NULL)) != 0) {
            if (rc < 0 || cli_parse_int("--fanout", val, 1, 4096, &o->fanout, err, errlen) < 0) return -1;
        } else if ((rc = TAKE("--max-skew-ms", NULL)) != 0) {
            if (rc < 0 || cli_parse_int("--max-skew-ms", val, 1, 3600000, &o->max_skew_ms, err, errlen) < 0) return -1;
        } else if ((rc = TAKE("--master-port", NULL)) != 0) {
            if (rc < 0 || cli_parse_int("--master-port", val, 1, 65535, &o->master_port, err, errlen) < 0) return -1;
        } else if ((rc = TAKE("--env", NULL)) != 0) {
            if (rc < 0 || node_opts_add_env(o, val, err, errlen) < 0) return -1;
        } else {
            return cli_fail(err, errlen, "unknown option '%s' (see ddptop check --help)", a);
        }
    }
    o->ssh.verbose = o->verbose > 1 ? o->verbose - 1 : 0;
    if (node_opts_hosts(o, &src, hl, err, errlen) < 0) return -1;
    o->ssh.agent_local = ssh_cli_local_agent();
    return 0;
}

/* ---- `ddptop check` as a front end of the controller in check-only mode ------------------- */

struct check_screen {
    bool live, colour, progress;
    unsigned flags;          /* CHECK_TEXT_*: colour, --all */
    bool cut;                /* the live table was cut to the terminal's height */
    char last_progress[120];
    /* the live table: lines drawn so far (the cursor goes back up over them) and when */
    size_t drawn_lines;
    int64_t last_draw_ms;
};

/* Lines the live table may take: the terminal's height less the cursor's line and one for
 * the note; 0 when stdout is no terminal. */
static size_t live_budget(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row < 4) return 0;
    return (size_t)ws.ws_row - 2;
}

/* The live table on a terminal (btop's split: the report makes the rows, check_report_table;
 * the front end draws them): redraws the table in place (cursor up + clear line), at most
 * every 100 ms unless force. Folded, the table's length changes as verdicts come in: what a
 * shorter table leaves below is cleared, and a table taller than the terminal is cut (the
 * cursor cannot go back above the screen) with a note; print_report then prints it whole. */
static void screen_live(struct check_screen *s, const struct check_report *r, FILE *tty, bool force)
{
    struct strbuf sb, table;
    int64_t now = mono_ms();
    size_t lines = 0, total = 0, budget = live_budget();
    if (!force && s->drawn_lines && now - s->last_draw_ms < 100) return;
    s->last_draw_ms = now;
    strbuf_init(&sb);
    strbuf_init(&table);
    /* back to the table's first line, then rewrite every line: widths may have changed */
    if (s->drawn_lines) strbuf_addf(&sb, "\r\033[%zuA", s->drawn_lines);
    check_report_table(r, &table, s->flags);
    for (size_t i = 0; i < table.len; i++) total += table.buf[i] == '\n';
    s->cut = budget && total > budget;
    for (const char *p = table.buf; p && *p && lines < (s->cut ? budget - 1 : total);) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        strbuf_adds(&sb, "\r\033[2K");
        strbuf_add(&sb, p, len);
        strbuf_adds(&sb, "\n");
        p += len + (nl ? 1 : 0);
        lines++;
    }
    if (s->cut) {
        strbuf_addf(&sb, "\r\033[2K... %zu more lines (the whole table follows when every host is checked)\n",
                    total - lines);
        lines++;
    }
    if (s->drawn_lines > lines) strbuf_adds(&sb, "\033[J"); /* a shorter table: clear the rest */
    strbuf_done(&table);
    s->drawn_lines = lines;
    fwrite(sb.buf, 1, sb.len, tty);
    fflush(tty);
    strbuf_done(&sb);
}

/* Rows past their first round trips (or failed): what "N/M hosts ready" counts. */
static size_t rows_ready(const struct check_report *r)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        k += r->rows[i].checks[CHECK_SSH].status == CHECK_FAIL || r->rows[i].checks[CHECK_CLOCK].status != CHECK_PENDING;
    return k;
}

static void screen_progress(void *ctx, const struct check_report *r)
{
    struct check_screen *s = ctx;
    char line[120];
    if (s->live) {
        screen_live(s, r, stdout, false);
        return;
    }
    if (!s->progress) return;
    snprintf(line, sizeof line, "ddptop check: %zu/%zu hosts ready", rows_ready(r), r->n);
    if (strcmp(line, s->last_progress) == 0) return;
    snprintf(s->last_progress, sizeof s->last_progress, "%s", line);
    fprintf(stderr, "\r\033[2K%s", line);
    fflush(stderr);
}

static bool table_fits_terminal(size_t rows)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0) return false;
    return rows + 2 < ws.ws_row;
}

static void print_report(const struct node_opts *o, const struct check_report *r, const struct check_screen *s)
{
    struct strbuf out;
    strbuf_init(&out);
    if (o->json) {
        cJSON *doc = check_report_json(r);
        char *txt = cJSON_Print(doc);
        if (!txt) util_fatal("out of memory (cJSON)");
        strbuf_adds(&out, txt);
        strbuf_adds(&out, "\n");
        free(txt);
        cJSON_Delete(doc);
    } else {
        if (!s->live || s->cut) check_report_table(r, &out, s->flags);
        check_report_details(r, &out, s->flags);
    }
    fwrite(out.buf, 1, out.len, stdout);
    fflush(stdout);
    strbuf_done(&out);
}

int cmd_check_run(const struct node_opts *o, const struct hostlist *hl)
{
    struct run_opts ro;
    struct check_screen s = {0};
    struct frontend fe = {.ctx = &s, .on_check_progress = screen_progress};
    struct controller *c;
    const struct check_report *r;
    char err[512];
    bool tty = isatty(STDOUT_FILENO);
    const char *nc = getenv("NO_COLOR");
    int rc;
    s.colour = tty && !(nc && *nc);
    s.flags = (s.colour ? CHECK_TEXT_COLOUR : 0) | (o->all ? CHECK_TEXT_ALL : 0);
    /* a line per host only when they all fit; folded, screen_live cuts what does not */
    s.live = !o->json && tty && (o->all ? table_fits_terminal(hl->n) : live_budget() > 0);
    /* -v prints log lines instead; both on one terminal would garble each other */
    s.progress = !s.live && !o->verbose && isatty(STDERR_FILENO);
    run_opts_init(&ro);
    node_opts_done(&ro.nodes);
    ro.nodes = *o; /* borrowed: the caller frees its options */
    ro.check_only = true;
    ro.headless = true;
    c = controller_new(&ro, hl, &fe, err, sizeof err);
    if (!c) {
        fprintf(stderr, "ddptop check: %s\n", err);
        return 2;
    }
    rc = controller_run(c);
    if (s.last_progress[0]) fputs("\r\033[2K", stderr);
    r = controller_check_report(c);
    if (rc == 130 || !r) {
        fprintf(stderr, "ddptop check: stopped before every host was checked\n");
    } else {
        if (s.live) screen_live(&s, r, stdout, true);
        if (s.cut) printf("\r\033[%zuA\033[J", s.drawn_lines); /* the whole table replaces it */
        print_report(o, r, &s);
    }
    controller_free(c);
    return rc;
}

int cmd_check_main(int argc, char **argv)
{
    struct node_opts o;
    struct hostlist hl;
    char err[1024] = "";
    int rc = cmd_check_parse(argc, argv, &o, &hl, err, sizeof err);
    if (rc == 0) rc = cmd_check_run(&o, &hl);
    else if (rc == 1) rc = 0;
    else {
        fprintf(stderr, "ddptop check: %s\n", err);
        rc = 2;
    }
    hostlist_free(&hl);
    node_opts_done(&o);
    return rc;
}

static int check_main(int argc, char **argv)
{
    return cmd_check_main(argc - 1, argv + 1);
}

const struct cmd_entry cmd_check_entry = {
    .name = "check",
    .args = "HOSTFILE [options] [-- CMD ARGS...]\n--slurm|--pbs [options] [-- CMD ARGS...]",
    .summary = "preflight of a cluster",
    .main = check_main,
    .usage = cmd_check_usage,
};
