/* Unit tests for launcher/openmetrics/om_text.c and openmetrics.c: the exposition a Prometheus
 * server reads. Label values are escaped as the format says (backslash, quote, newline; a bad
 * UTF-8 byte replaced, since one would make the scraper refuse everything); numbers are
 * spelled as the format spells them; each family has its TYPE, UNIT where it has a unit, and
 * HELP before its samples, which stay together; a counter's samples end in _total; the text
 * ends in "# EOF". Every line of a rendered job is checked against the format's grammar (a
 * small validator here), and what the model does not know is left out, not written as 0.
 * Rendering 8,192 ranks is timed as a diagnostic; the figure that counts is the bench's
 * (tests/bench/openmetrics.sh, docs/performance.md). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/failure_line.h"
#include "job/gpu.h"
#include "job/job.h"
#include "job/job_state.h"
#include "job/rank_report.h"
#include "openmetrics/om_text.h"
#include "openmetrics/openmetrics.h"
#include "tap.h"
#include "util/util.h"

static char err[512];

static const char *escaped(const char *s)
{
    static struct strbuf sb;
    strbuf_reset(&sb);
    om_label_value(&sb, s);
    return sb.buf ? sb.buf : "";
}

static const char *number(double v)
{
    static struct strbuf sb;
    strbuf_reset(&sb);
    om_number(&sb, v);
    return sb.buf;
}

static void test_label_values(void)
{
    CHECK_STR(escaped("plain-name_1.x"), "plain-name_1.x");
    CHECK_STR(escaped("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    CHECK_STR(escaped("\\\\"), "\\\\\\\\");
    CHECK_STR(escaped("tab\there"), "tab\there");                 /* other controls may stay */
    CHECK_STR(escaped("gpu-n\xc3\xa9ud"), "gpu-n\xc3\xa9ud");     /* good UTF-8 stays */
    CHECK_STR(escaped("x\xffy"), "x\xef\xbf\xbdy");               /* a bad byte: U+FFFD */
    CHECK_STR(escaped("cut\xe2\x82"), "cut\xef\xbf\xbd");         /* a truncated sequence: one */
    CHECK_STR(escaped(""), "");
}

static void test_numbers(void)
{
    CHECK_STR(number(0), "0");
    CHECK_STR(number(3), "3");
    CHECK_STR(number(-7), "-7");
    CHECK_STR(number(2.5), "2.5");
    CHECK_STR(number(0.1), "0.1");
    CHECK_STR(number(3.125), "3.125");
    CHECK_STR(number(85899345920.0), "85899345920");
    CHECK_STR(number(NAN), "NaN");
    CHECK_STR(number(INFINITY), "+Inf");
    CHECK_STR(number(-INFINITY), "-Inf");
    CHECK_STR(number(1e300), "1e+300");
    /* a few decimals, written without printf: as short, and the same double read back */
    CHECK_STR(number(-0.5), "-0.5");
    CHECK_STR(number(0.001), "0.001");
    CHECK_STR(number(0.95), "0.95");
    CHECK_STR(number(1234.567), "1234.567");
    CHECK_STR(number(2.345678), "2.345678");
    CHECK_STR(number(-12.000001), "-12.000001");
    CHECK_STR(number(1e-7), "1e-07");
    CHECK(strtod(number(1e-7), NULL) == 1e-7);
    double third = 1.0 / 3.0;
    CHECK(strtod(number(third), NULL) == third);                  /* 17 digits where 15 lose it */
    CHECK(strtod(number(0.1 + 0.2), NULL) == 0.1 + 0.2);
}

static void test_family_lines(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    om_family(&sb, "x_seconds", "gauge", "seconds", "How long");
    om_family(&sb, "y", "counter", NULL, "How many");
    om_eof(&sb);
    CHECK_STR(sb.buf, "# TYPE x_seconds gauge\n# UNIT x_seconds seconds\n# HELP x_seconds How long\n"
                      "# TYPE y counter\n# HELP y How many\n# EOF\n");
    strbuf_done(&sb);
}

/* ---- a validator of the text format (the parts ddptop writes) ---------------------------- */

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || !(s[0] == '_' || s[0] == ':' || ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z'))) return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || s[i] == ':' || ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') || (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

static bool value_ok(const char *s)
{
    char *end;
    if (!strcmp(s, "NaN") || !strcmp(s, "+Inf") || !strcmp(s, "-Inf")) return true;
    strtod(s, &end);
    return *s && !*end && !strchr(s, ' ');
}

/* Checks every line; returns the number of samples, -1 (said) on the first bad line. */
static int validate(const char *text)
{
    char family[2048] = "", type[2048] = "", seen[256][96];
    int n_seen = 0, samples = 0;
    bool eof = false, described = false;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (!nl) { printf("# no newline after: %s\n", p); return -1; }
        char line[2048];
        size_t len = (size_t)(nl - p);
        if (len >= sizeof line) { printf("# line too long\n"); return -1; }
        memcpy(line, p, len);
        line[len] = '\0';
        p = nl + 1;
        if (eof) { printf("# a line after # EOF: %s\n", line); return -1; }
        if (!strcmp(line, "# EOF")) { eof = true; continue; }
        if (!strncmp(line, "# TYPE ", 7)) {
            char *sp = strchr(line + 7, ' ');
            if (!sp || !name_ok(line + 7, (size_t)(sp - line - 7))) { printf("# bad TYPE: %s\n", line); return -1; }
            *sp = '\0';
            for (int i = 0; i < n_seen; i++)
                if (!strcmp(seen[i], line + 7)) { printf("# family %s twice (its samples apart)\n", line + 7); return -1; }
            snprintf(family, sizeof family, "%s", line + 7);
            snprintf(type, sizeof type, "%s", sp + 1);
            if (n_seen < 256) snprintf(seen[n_seen++], sizeof seen[0], "%s", family);
            if (strcmp(type, "gauge") && strcmp(type, "counter")) { printf("# type %s\n", type); return -1; }
            described = false;
            continue;
        }
        if (!strncmp(line, "# UNIT ", 7) || !strncmp(line, "# HELP ", 7)) {
            size_t fl = strlen(family);
            if (described || strncmp(line + 7, family, fl) || line[7 + fl] != ' ') {
                printf("# %.6s not of the family %s, or after its samples: %s\n", line, family, line);
                return -1;
            }
            if (line[2] == 'U') {   /* the family's name ends in _UNIT */
                const char *unit = line + 8 + fl;
                size_t ul = strlen(unit);
                if (fl <= ul || strcmp(family + fl - ul, unit) || family[fl - ul - 1] != '_') {
                    printf("# unit %s is no suffix of %s\n", unit, family);
                    return -1;
                }
            }
            continue;
        }
        if (line[0] == '#') { printf("# unknown comment: %s\n", line); return -1; }
        /* NAME{LABELS} VALUE */
        described = true;
        char *brace = strchr(line, '{'), *close, *val;
        if (!brace) { printf("# a sample without labels: %s\n", line); return -1; }
        size_t nl_ = (size_t)(brace - line);
        char want[2100];
        snprintf(want, sizeof want, "%s%s", family, !strcmp(type, "counter") ? "_total" : "");
        if (strlen(want) != nl_ || strncmp(line, want, nl_)) { printf("# sample %s outside its family %s\n", line, family); return -1; }
        const char *q = brace + 1;
        for (;;) {   /* name="value" pairs */
            const char *eq = strchr(q, '=');
            if (!eq || !name_ok(q, (size_t)(eq - q)) || eq[1] != '"') { printf("# bad label in: %s\n", line); return -1; }
            q = eq + 2;
            while (*q && *q != '"') {
                if (*q == '\\') {
                    if (q[1] != '\\' && q[1] != '"' && q[1] != 'n') { printf("# bad escape in: %s\n", line); return -1; }
                    q++;
                }
                q++;
            }
            if (*q != '"') { printf("# unterminated label value: %s\n", line); return -1; }
            q++;
            if (*q == ',') { q++; continue; }
            break;
        }
        close = (char *)q;
        if (*close != '}' || close[1] != ' ') { printf("# bad sample: %s\n", line); return -1; }
        val = close + 2;
        if (!value_ok(val)) { printf("# bad value: %s\n", line); return -1; }
        samples++;
    }
    if (!eof) { printf("# no # EOF at the end\n"); return -1; }
    return samples;
}

/* The validator itself sees what it is there for. */
static void test_validator_sees_errors(void)
{
    const char *bad[] = {
        "# TYPE a gauge\n# HELP a x\na{l=\"1\"} 1\n",                          /* no # EOF */
        "# TYPE a gauge\nb{l=\"1\"} 1\n# EOF\n",                                /* outside its family */
        "# TYPE a counter\na{l=\"1\"} 1\n# EOF\n",                              /* a counter without _total */
        "# TYPE a gauge\na{l=\"x\\qy\"} 1\n# EOF\n",                           /* a bad escape */
        "# TYPE a gauge\na{l=\"1\"} one\n# EOF\n",                               /* a bad value */
        "# TYPE a_bytes gauge\n# UNIT a_bytes seconds\n# EOF\n",                 /* a unit not in the name */
        "# TYPE a gauge\na{l=\"1\"} 1\n# TYPE b gauge\n# TYPE a gauge\n# EOF\n", /* a family apart */
        "# TYPE a gauge\na{l=\"1\"} 1\n# EOF\n# TYPE b gauge\n",                 /* after # EOF */
    };
    printf("# the validator on made-up errors (each says why):\n");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_INT(validate(bad[i]), -1);
    CHECK_INT(validate("# TYPE a_bytes gauge\n# UNIT a_bytes bytes\n# HELP a_bytes b\na_bytes{l=\"\\\\\"} 1.5\n# EOF\n"), 1);
}

/* ---- a rendered job ---------------------------------------------------------------------- */

static struct gpu_info gpu(int index, double util, unsigned long long throttle, long pgid)
{
    struct gpu_info g = { .index = index, .util = util, .mem_util = NAN, .mem_used_mib = 1024,
                          .mem_total_mib = 81920, .power_w = 612, .power_limit_w = 700, .temp_c = 71,
                          .sm_mhz = 1980, .has_throttle = true, .throttle = throttle, .rank = -1 };
    if (pgid) {
        g.pids[0][0] = pgid;
        g.pids[0][1] = pgid;
        g.n_pids = 1;
    }
    return g;
}

static bool has(const char *text, const char *line)
{
    const char *p = strstr(text, line);
    if (!p) printf("#   missing: %s", line);
    return p != NULL;
}

static void test_render_job(void)
{
    const char *names[] = { "n0", "we\"ird\\no\nde" };
    int per_node[] = { 2, 1 };
    struct job *j = job_new("run-1", NULL, 3, names, NULL, per_node, 2, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) {
        printf("# %s\n", err);
        CHECK(0);
        return;
    }
    job_launching(j);
    job_running(j);
    for (int r = 0; r < 3; r++) job_rank_started(j, r, 500 + r);
    job_metric_add(j, 1, 7, 2.5, 120, NAN);
    job_metric_add(j, 2, 9, 3.125, 100, NAN);
    job_log_append(j, 1, LOG_STDOUT, 0, "hello", 5);
    int64_t seen_at = j->ranks[1].last_output_ms;
    struct gpu_info g[2] = { gpu(0, 95, 0, 500), gpu(1, 42, 0x40, 501) };
    int xids[1][2] = { { 0, 79 } };
    job_gpu_sample(j, 0, g, 2, (const int (*)[2])xids, 1);
    job_node_link(j, 1, LINK_SILENT);

    struct strbuf sb;
    strbuf_init(&sb);
    openmetrics_render(j, seen_at + 1500, &sb);
    const char *t = sb.buf;
    int samples = validate(t);
    CHECK(samples > 50);
    CHECK(has(t, "# TYPE ddptop_job_state gauge\n"));
    CHECK(has(t, "ddptop_job_state{run=\"run-1\",state=\"running\"} 1\n"));
    CHECK(has(t, "ddptop_job_state{run=\"run-1\",state=\"check_failed\"} 0\n"));
    CHECK(has(t, "# TYPE ddptop_job_restarts counter\n"));
    CHECK(has(t, "ddptop_job_restarts_total{run=\"run-1\"} 0\n"));
    CHECK(has(t, "ddptop_job_max_restarts{run=\"run-1\"} 3\n"));
    CHECK(has(t, "ddptop_job_ranks{run=\"run-1\",state=\"running\"} 3\n"));
    CHECK(has(t, "ddptop_job_root_cause{run=\"run-1\",class=\"cuda_oom\"} 0\n"));
    CHECK(!strstr(t, "ddptop_job_root_cause_rank{"));   /* nothing failed */
    CHECK(has(t, "ddptop_rank_loss{run=\"run-1\",rank=\"1\",node=\"n0\"} 2.5\n"));
    CHECK(has(t, "ddptop_rank_step{run=\"run-1\",rank=\"1\",node=\"n0\"} 7\n"));
    CHECK(has(t, "# UNIT ddptop_rank_step_seconds seconds\n"));
    CHECK(has(t, "ddptop_rank_step_seconds{run=\"run-1\",rank=\"1\",node=\"n0\"} 0.12\n"));
    CHECK(has(t, "ddptop_rank_last_output_age_seconds{run=\"run-1\",rank=\"1\",node=\"n0\"} 1.5\n"));
    /* the odd node name, escaped wherever it is a label */
    CHECK(has(t, "ddptop_rank_loss{run=\"run-1\",rank=\"2\",node=\"we\\\"ird\\\\no\\nde\"} 3.125\n"));
    CHECK(has(t, "ddptop_node_link{run=\"run-1\",node=\"we\\\"ird\\\\no\\nde\",link=\"silent\"} 1\n"));
    CHECK(has(t, "ddptop_node_link{run=\"run-1\",node=\"n0\",link=\"up\"} 1\n"));
    CHECK(has(t, "ddptop_rank_state{run=\"run-1\",rank=\"0\",node=\"n0\",state=\"running\"} 1\n"));
    /* what the model does not know is left out: rank 0 printed no loss */
    CHECK(!strstr(t, "ddptop_rank_loss{run=\"run-1\",rank=\"0\""));
    CHECK(!strstr(t, "ddptop_rank_last_output_age_seconds{run=\"run-1\",rank=\"0\""));
    /* GPUs: units in the names, bytes and ratios as Prometheus wants them */
    CHECK(has(t, "# UNIT ddptop_gpu_utilization_ratio ratio\n"));
    CHECK(has(t, "ddptop_gpu_utilization_ratio{run=\"run-1\",node=\"n0\",gpu=\"0\"} 0.95\n"));
    CHECK(has(t, "ddptop_gpu_memory_used_bytes{run=\"run-1\",node=\"n0\",gpu=\"1\"} 1073741824\n"));
    CHECK(has(t, "ddptop_gpu_memory_total_bytes{run=\"run-1\",node=\"n0\",gpu=\"1\"} 85899345920\n"));
    CHECK(has(t, "ddptop_gpu_power_watts{run=\"run-1\",node=\"n0\",gpu=\"0\"} 612\n"));
    CHECK(has(t, "ddptop_gpu_temperature_celsius{run=\"run-1\",node=\"n0\",gpu=\"0\"} 71\n"));
    CHECK(has(t, "ddptop_gpu_throttled{run=\"run-1\",node=\"n0\",gpu=\"1\"} 1\n"));
    CHECK(has(t, "ddptop_gpu_throttled{run=\"run-1\",node=\"n0\",gpu=\"0\"} 0\n"));
    CHECK(has(t, "ddptop_gpu_throttle_reason{run=\"run-1\",node=\"n0\",gpu=\"1\",reason=\"hw_thermal\"} 1\n"));
    CHECK(!strstr(t, "ddptop_gpu_throttle_reason{run=\"run-1\",node=\"n0\",gpu=\"0\""));
    CHECK(has(t, "# TYPE ddptop_gpu_xid_errors counter\n"));
    CHECK(has(t, "ddptop_gpu_xid_errors_total{run=\"run-1\",node=\"n0\",gpu=\"0\"} 1\n"));
    CHECK(has(t, "ddptop_gpu_xid_errors_total{run=\"run-1\",node=\"n0\",gpu=\"1\"} 0\n"));
    CHECK(has(t, "ddptop_gpu_last_xid{run=\"run-1\",node=\"n0\",gpu=\"0\"} 79\n"));
    /* the XID count goes on from sample to sample */
    job_gpu_sample(j, 0, g, 2, (const int (*)[2])xids, 1);
    job_gpu_sample(j, 0, g, 2, NULL, 0);
    strbuf_reset(&sb);
    openmetrics_render(j, seen_at, &sb);
    CHECK(has(sb.buf, "ddptop_gpu_xid_errors_total{run=\"run-1\",node=\"n0\",gpu=\"0\"} 2\n"));
    /* the end: the last line, once */
    CHECK(sb.len > 6 && !strcmp(sb.buf + sb.len - 6, "# EOF\n"));
    CHECK(strstr(sb.buf, "# EOF") == sb.buf + sb.len - 6);
    strbuf_done(&sb);
    job_free(j);
}

/* A failed rank: its root cause's class is the one at 1, and its rank is said. */
static void test_render_root_cause(void)
{
    const char *names[] = { "n0" };
    int per_node[] = { 2 };
    struct job *j = job_new("rc", NULL, 0, names, NULL, per_node, 1, err, sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) {
        CHECK(0);
        return;
    }
    job_launching(j);
    job_running(j);
    j->cause.set = true;   /* as root_cause.c leaves it once classified */
    j->cause.rank = 1;
    j->cause.failure = FAILURE_CUDA_OOM;
    struct strbuf sb;
    strbuf_init(&sb);
    openmetrics_render(j, 0, &sb);
    CHECK(validate(sb.buf) > 0);
    CHECK(has(sb.buf, "ddptop_job_root_cause{run=\"rc\",class=\"cuda_oom\"} 1\n"));
    CHECK(has(sb.buf, "ddptop_job_root_cause{run=\"rc\",class=\"segfault\"} 0\n"));
    CHECK(has(sb.buf, "ddptop_job_root_cause_rank{run=\"rc\"} 1\n"));
    strbuf_done(&sb);
    j->cause.set = false;
    job_free(j);
}

/* 8,192 ranks on 1,024 nodes of 8 GPUs: valid, one series per rank and family, and the time
 * it took (a diagnostic; the bench's figure is docs/performance.md's). */
static void test_render_8192_ranks(void)
{
    enum { NODES = 1024, PER = 8 };
    char **names = xcalloc(NODES, sizeof *names);
    int *per = xcalloc(NODES, sizeof *per);
    for (int n = 0; n < NODES; n++) {
        names[n] = xasprintf("gpu-node-%04d", n);
        per[n] = PER;
    }
    struct job *j = job_new("20261128-120000-bench", NULL, 0, (const char *const *)names, NULL, per, NODES, err,
                            sizeof err);
    if (!j || job_attempt_begin(j, err, sizeof err) != 0) {
        CHECK(0);
        return;
    }
    job_launching(j);
    job_running(j);
    for (int r = 0; r < NODES * PER; r++) {
        job_rank_started(j, r, 10000 + r);
        job_metric_add(j, r, 1234, 2.0 + r * 1e-4, 350.5, NAN);
    }
    for (int n = 0; n < NODES; n++) {
        struct gpu_info g[PER];
        for (int k = 0; k < PER; k++) g[k] = gpu(k, 90 + k, 0, 10000 + n * PER + k);
        job_gpu_sample(j, n, g, PER, NULL, 0);
    }
    struct strbuf sb;
    strbuf_init(&sb);
    int64_t t0 = mono_ns();
    openmetrics_render(j, mono_ms(), &sb);
    int64_t t1 = mono_ns();
    int samples = validate(sb.buf);
    printf("# 8,192 ranks: %.1f ms, %zu bytes, %d samples\n", (double)(t1 - t0) / 1e6, sb.len, samples);
    CHECK(samples > NODES * PER * 12);
    CHECK(has(sb.buf, "ddptop_rank_loss{run=\"20261128-120000-bench\",rank=\"8191\",node=\"gpu-node-1023\"} "));
    strbuf_done(&sb);
    job_free(j);
    for (int n = 0; n < NODES; n++) free(names[n]);
    free(names);
    free(per);
}

int main(void)
{
    RUN(test_label_values);
    RUN(test_numbers);
    RUN(test_family_lines);
    RUN(test_validator_sees_errors);
    RUN(test_render_job);
    RUN(test_render_root_cause);
    RUN(test_render_8192_ranks);
    return tap_done();
}
