/* Unit tests for the check report: the --json document's shape, the summary counts and exit
 * code, the table and details text without colour, that remote bytes are sanitised, and the
 * folding of issue 19 (1,024 identical hosts in 15 lines, the odd one out alone, --all). */
#include <stdio.h>
#include <stdlib.h>

#include "check/check_fold.h"
#include "check/check_report_text.h"
#include "tap.h"

/* Three hosts: a passing one, one with a clock warning, one unreachable. */
static void build(struct check_report *r)
{
    check_report_init(r, 3);
    check_row_set_host(&r->rows[0], "gpu1", "10.0.0.1", 22);
    check_row_set_host(&r->rows[1], "gpu2", "10.0.0.2", 2222);
    check_row_set_host(&r->rows[2], "gpu3", "::1", 22);
    for (int k = 0; k < CHECK_KINDS; k++) {
        check_result_set(&r->rows[0].checks[k], CHECK_PASS, "fine", NULL);
        check_result_set(&r->rows[1].checks[k], CHECK_PASS, "fine", NULL);
    }
    cJSON *f = check_result_fields(&r->rows[0].checks[CHECK_CLOCK]);
    check_fields_add_ms(f, "offset_ms", 0.41199999);
    check_fields_add_ms(f, "error_ms", 0.1);
    check_result_set(&r->rows[1].checks[CHECK_CLOCK], CHECK_WARN, "offset +80.000 ms", "sync with NTP");
    check_result_set(&r->rows[2].checks[CHECK_SSH], CHECK_FAIL, "cannot connect: connection refused",
                     "start sshd");
    for (int k = CHECK_CLOCK; k < CHECK_KINDS; k++)
        check_result_set(&r->rows[2].checks[k], CHECK_SKIP, "not run: ssh failed", NULL);
}

static void test_json_shape(void)
{
    struct check_report r;
    build(&r);
    cJSON *doc = check_report_json(&r);
    cJSON *hosts = cJSON_GetObjectItem(doc, "hosts");
    CHECK_INT(cJSON_GetObjectItem(doc, "ddptop_check")->valueint, 1);
    CHECK_INT(cJSON_GetArraySize(hosts), 3);
    cJSON *h0 = cJSON_GetArrayItem(hosts, 0), *h1 = cJSON_GetArrayItem(hosts, 1), *h2 = cJSON_GetArrayItem(hosts, 2);
    CHECK_STR(cJSON_GetObjectItem(h0, "host")->valuestring, "gpu1");
    CHECK_STR(cJSON_GetObjectItem(h0, "address")->valuestring, "10.0.0.1");
    CHECK_INT(cJSON_GetObjectItem(h1, "port")->valueint, 2222);
    CHECK_STR(cJSON_GetObjectItem(h0, "status")->valuestring, "pass");
    CHECK_STR(cJSON_GetObjectItem(h1, "status")->valuestring, "warn");
    CHECK_STR(cJSON_GetObjectItem(h2, "status")->valuestring, "fail");
    /* every check present, in order, with status and detail */
    const char *names[] = {"ssh", "clock", "gpu", "env", "tcp", "nccl"};
    cJSON *checks = cJSON_GetObjectItem(h2, "checks");
    int k = 0;
    for (cJSON *c = checks->child; c; c = c->next, k++) {
        CHECK(k < 6);
        if (k < 6) CHECK_STR(c->string, names[k]);
        CHECK(cJSON_IsString(cJSON_GetObjectItem(c, "status")));
        CHECK(cJSON_IsString(cJSON_GetObjectItem(c, "detail")));
        CHECK(cJSON_IsString(cJSON_GetObjectItem(c, "hint"))); /* none passes on gpu3 */
    }
    CHECK_INT(k, 6);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(checks, "tcp"), "status")->valuestring, "skip");
    /* extra fields, rounded; no hint on a pass */
    cJSON *clk = cJSON_GetObjectItem(cJSON_GetObjectItem(h0, "checks"), "clock");
    CHECK_NEAR(cJSON_GetObjectItem(clk, "offset_ms")->valuedouble, 0.412, 1e-12);
    CHECK_NEAR(cJSON_GetObjectItem(clk, "error_ms")->valuedouble, 0.1, 1e-12);
    CHECK(cJSON_GetObjectItem(clk, "hint") == NULL);
    clk = cJSON_GetObjectItem(cJSON_GetObjectItem(h1, "checks"), "clock");
    CHECK_STR(cJSON_GetObjectItem(clk, "hint")->valuestring, "sync with NTP");
    cJSON *sum = cJSON_GetObjectItem(doc, "summary");
    CHECK_INT(cJSON_GetObjectItem(sum, "pass")->valueint, 1);
    CHECK_INT(cJSON_GetObjectItem(sum, "warn")->valueint, 1);
    CHECK_INT(cJSON_GetObjectItem(sum, "fail")->valueint, 1);
    /* it prints and parses back */
    char *s = cJSON_PrintUnformatted(doc);
    cJSON *back = cJSON_Parse(s);
    CHECK(back != NULL);
    cJSON_Delete(back);
    free(s);
    cJSON_Delete(doc);
    check_report_done(&r);
}

static void test_pending_is_skip_in_json(void)
{
    struct check_report r;
    check_report_init(&r, 1);
    check_row_set_host(&r.rows[0], "n", "n", 22);
    cJSON *doc = check_report_json(&r);
    cJSON *ssh = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "hosts"), 0),
                                                         "checks"), "ssh");
    CHECK_STR(cJSON_GetObjectItem(ssh, "status")->valuestring, "skip");
    cJSON_Delete(doc);
    check_report_done(&r);
}

static void test_summary_and_exit(void)
{
    struct check_report r;
    size_t p, w, f;
    build(&r);
    check_report_summary(&r, &p, &w, &f);
    CHECK_INT(p, 1);
    CHECK_INT(w, 1);
    CHECK_INT(f, 1);
    CHECK_INT(check_report_exit_code(&r), 1);
    /* warnings alone do not fail the run */
    check_result_set(&r.rows[2].checks[CHECK_SSH], CHECK_WARN, "x", "y");
    CHECK_INT(check_report_exit_code(&r), 0);
    CHECK_INT(check_row_status(&r.rows[2]), CHECK_WARN);
    check_report_done(&r);
}

static void test_table_text(void)
{
    struct check_report r;
    struct strbuf sb;
    build(&r);
    strbuf_init(&sb);
    check_report_table(&r, &sb, 0);
    CHECK_STR(sb.buf,
              "HOST  ADDRESS        SSH    CLOCK  GPU    ENV    TCP    NCCL\n"
              "gpu1  10.0.0.1:22    pass   pass   pass   pass   pass   pass\n"
              "gpu2  10.0.0.2:2222  pass   warn   pass   pass   pass   pass\n"
              "gpu3  [::1]:22       fail   skip   skip   skip   skip   skip\n");
    CHECK(strchr(sb.buf, '\033') == NULL);
    strbuf_reset(&sb);
    check_report_table(&r, &sb, CHECK_TEXT_COLOUR);
    CHECK(strstr(sb.buf, "\033[") != NULL);
    strbuf_done(&sb);
    check_report_done(&r);
}

static void test_details_text(void)
{
    struct check_report r;
    struct strbuf sb;
    build(&r);
    strbuf_init(&sb);
    check_report_details(&r, &sb, 0);
    /* the warning and the failure with their hints; not the passes, not the skips that
     * only repeat gpu3's ssh failure */
    CHECK(strstr(sb.buf, "gpu2  clock  warn  offset +80.000 ms\n") != NULL);
    CHECK(strstr(sb.buf, "fix: sync with NTP\n") != NULL);
    CHECK(strstr(sb.buf, "gpu3  ssh    fail  cannot connect: connection refused\n") != NULL);
    CHECK(strstr(sb.buf, "fix: start sshd\n") != NULL);
    CHECK(strstr(sb.buf, "skip") == NULL);
    CHECK(strstr(sb.buf, "gpu1") == NULL);
    CHECK(strstr(sb.buf, "3 hosts: 1 pass, 1 warn, 1 fail\n") != NULL);
    strbuf_done(&sb);
    check_report_done(&r);
}

static void test_remote_bytes_sanitised(void)
{
    struct check_report r;
    struct strbuf sb;
    check_report_init(&r, 1);
    check_row_set_host(&r.rows[0], "n1", "n1", 22);
    check_result_set(&r.rows[0].checks[CHECK_SSH], CHECK_FAIL, "agent said \033]0;pwned\007 bye", "x\ry");
    strbuf_init(&sb);
    check_report_details(&r, &sb, 0);
    CHECK(strchr(sb.buf, '\033') == NULL);
    CHECK(strchr(sb.buf, '\007') == NULL);
    CHECK(strchr(sb.buf, '\r') == NULL);
    CHECK(strstr(sb.buf, "agent said ?]0;pwned? bye") != NULL);
    strbuf_done(&sb);
    check_report_done(&r);
}

/* n hosts n0001.. at 127.0.0.1, every check passing but the gpu, which warns with the same
 * words on every host ("no GPU found"), and env, which warns naming the host itself. */
static void build_many(struct check_report *r, size_t n)
{
    check_report_init(r, n);
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%04zu", i + 1);
        check_row_set_host(&r->rows[i], name, "127.0.0.1", 22);
        for (int k = 0; k < CHECK_KINDS; k++) check_result_set(&r->rows[i].checks[k], CHECK_PASS, "fine", NULL);
        check_result_set(&r->rows[i].checks[CHECK_GPU], CHECK_WARN, "no GPU found: will use the CPU backend",
                         "install the NVIDIA driver");
        check_result_setf(&r->rows[i].checks[CHECK_ENV], CHECK_WARN, "run ddptop check again",
                          "%s: torch could not be read (timeout)", name);
    }
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

static char *report_text(const struct check_report *r, unsigned flags)
{
    struct strbuf sb;
    strbuf_init(&sb);
    check_report_table(r, &sb, flags);
    check_report_details(r, &sb, flags);
    return sb.buf;
}

/* issue 19: 1,024 identical hosts fit in 15 lines; the table a line, each finding a line */
static void test_fold_identical(void)
{
    struct check_report r;
    build_many(&r, 1024);
    char *txt = report_text(&r, 0);
    CHECK(count_lines(txt) <= 15);
    CHECK(strstr(txt, "HOST          ADDRESS               SSH    CLOCK  GPU    ENV    TCP    NCCL\n"
                      "n[0001-1024]  127.0.0.1:22 (x1024)  pass   pass   warn   warn   pass   pass\n") == txt);
    CHECK(strstr(txt, "\nn[0001-1024]  gpu    warn  no GPU found: will use the CPU backend\n") != NULL);
    /* each host's own name is normalised out: one line for all */
    CHECK(strstr(txt, "\nn[0001-1024]  env    warn  <host>: torch could not be read (timeout)\n") != NULL);
    CHECK(strstr(txt, "fix: install the NVIDIA driver\n") != NULL);
    CHECK(strstr(txt, "1024 hosts: 0 pass, 1024 warn, 0 fail\n") != NULL);
    CHECK(strstr(txt, "ddptop check --all lists each") != NULL);
    if (getenv("SHOW")) printf("%s", txt);
    free(txt);
    check_report_done(&r);
}

/* One host unlike the others is named alone, in the table and in the details; the rest fold
 * around it (n[0001-0499,0501-1024]). */
static void test_fold_odd_one_out(void)
{
    struct check_report r;
    build_many(&r, 1024);
    check_result_set(&r.rows[499].checks[CHECK_CLOCK], CHECK_FAIL, "offset +900.000 ms", "sync with NTP");
    char *txt = report_text(&r, 0);
    if (getenv("SHOW")) printf("%s", txt);
    CHECK(count_lines(txt) <= 15);
    CHECK(strstr(txt, "\nn[0001-0499,0501-1024]  127.0.0.1:22 (x1023)  pass   pass   warn   warn   pass   pass\n") != NULL);
    CHECK(strstr(txt, "\nn0500                   127.0.0.1:22          pass   fail   warn   warn   pass   pass\n") != NULL);
    CHECK(strstr(txt, "\nn0500         clock  fail  offset +900.000 ms\n") != NULL);
    /* the findings n0500 shares with the others are still one line for all 1,024 */
    CHECK(strstr(txt, "\nn[0001-1024]  gpu    warn  no GPU found") != NULL);
    CHECK(strstr(txt, "1024 hosts: 0 pass, 1023 warn, 1 fail\n") != NULL);
    free(txt);
    check_report_done(&r);
}

/* --all: a line per host; the --json document is per host whatever the text does */
static void test_fold_all_and_json(void)
{
    struct check_report r;
    build_many(&r, 64);
    char *txt = report_text(&r, CHECK_TEXT_ALL);
    /* header, 64 rows, a blank, 64 x (finding + fix) x 2, a blank, the summary */
    CHECK_INT(count_lines(txt), 1 + 64 + 1 + 64 * 4 + 2);
    CHECK(strstr(txt, "\nn0064  127.0.0.1:22  pass   pass   warn   warn   pass   pass\n") != NULL);
    CHECK(strstr(txt, "\nn0064  env    warn  n0064: torch could not be read (timeout)\n") != NULL);
    CHECK(strstr(txt, "n[") == NULL);
    CHECK(strstr(txt, "--all") == NULL);
    free(txt);
    cJSON *doc = check_report_json(&r);
    cJSON *hosts = cJSON_GetObjectItem(doc, "hosts");
    CHECK_INT(cJSON_GetArraySize(hosts), 64);
    cJSON *env = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(hosts, 63), "checks"), "env");
    CHECK_STR(cJSON_GetObjectItem(env, "detail")->valuestring, "n0064: torch could not be read (timeout)");
    cJSON_Delete(doc);
    check_report_done(&r);
}

/* Up to 8 hosts every host keeps its line; addresses that differ fold as a hostlist */
static void test_fold_small_and_addresses(void)
{
    struct check_report r;
    build_many(&r, 8);
    char *txt = report_text(&r, 0);
    CHECK(strstr(txt, "n[") == NULL);
    CHECK(strstr(txt, "\nn0008  127.0.0.1:22  pass") != NULL);
    free(txt);
    check_report_done(&r);
    build_many(&r, 300);
    for (size_t i = 0; i < r.n; i++) {
        char a[32];
        snprintf(a, sizeof a, "10.0.%zu.%zu", i / 200, i % 200 + 1);
        check_row_set_host(&r.rows[i], r.rows[i].host, a, 22);
    }
    struct strbuf sb;
    strbuf_init(&sb);
    check_report_table(&r, &sb, 0);
    CHECK(strstr(sb.buf, "\nn[0001-0300]  10.0.0.[1-200],10.0.1.[1-100]:22  pass") != NULL);
    /* and when the hostlist is longer than the column: how many */
    for (size_t i = 0; i < r.n; i += 2) check_row_set_host(&r.rows[i], r.rows[i].host, "192.168.7.7", 22);
    strbuf_reset(&sb);
    check_report_table(&r, &sb, 0);
    CHECK(strstr(sb.buf, "  300 addresses  ") != NULL);
    strbuf_done(&sb);
    check_report_done(&r);
}

/* Findings that differ only in their numbers (a clock offset per host, on a loaded machine)
 * are one line with each number's range; words and addresses with digits stay as they are. */
static void test_fold_numbers(void)
{
    struct check_report r;
    build_many(&r, 100);
    for (size_t i = 0; i < r.n; i++)
        check_result_setf(&r.rows[i].checks[CHECK_CLOCK], CHECK_WARN, "run ddptop check again",
                          "offset -%zu.5 ms (+/- %zu.25 ms) to login1 at 10.0.0.1, torch 2.4.0: above 500",
                          600 + i, 700 + (i % 7));
    char *txt = report_text(&r, 0);
    if (getenv("SHOW")) printf("%s", txt);
    CHECK(count_lines(txt) <= 15);
    CHECK(strstr(txt, "\nn[0001-0100]  clock  warn  offset -699.5..-600.5 ms (+/- 700.25..706.25 ms) to login1 at "
                      "10.0.0.1, torch 2.4.0: above 500\n") != NULL);
    free(txt);
    /* --all: each host's own numbers */
    txt = report_text(&r, CHECK_TEXT_ALL);
    CHECK(strstr(txt, "\nn0100  clock  warn  offset -699.5 ms (+/- 701.25 ms) to login1") != NULL);
    free(txt);
    check_report_done(&r);
}

static void test_fold_normalise(void)
{
    char *s = check_fold_normalise("n1: n1 -> n10:29500 via n1.ib0, n1. and 10.0.0.1:22 (n1)", "n1", "10.0.0.1");
    CHECK_STR(s, "<host>: <host> -> n10:29500 via n1.ib0, <host>. and <address>:22 (<host>)");
    free(s);
    s = check_fold_normalise("no name here", "n1", "n1");
    CHECK_STR(s, "no name here");
    free(s);
}

int main(void)
{
    RUN(test_json_shape);
    RUN(test_pending_is_skip_in_json);
    RUN(test_summary_and_exit);
    RUN(test_table_text);
    RUN(test_details_text);
    RUN(test_remote_bytes_sanitised);
    RUN(test_fold_identical);
    RUN(test_fold_odd_one_out);
    RUN(test_fold_all_and_json);
    RUN(test_fold_small_and_addresses);
    RUN(test_fold_numbers);
    RUN(test_fold_normalise);
    return tap_done();
}
