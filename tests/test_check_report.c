/* Unit tests for the check report: the --json document's shape, the summary counts and exit
 * code, the table and details text without colour, and that remote bytes are sanitised. */
#include <stdlib.h>

#include "check/check_report.h"
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
    check_report_table(&r, &sb, false);
    CHECK_STR(sb.buf,
              "HOST  ADDRESS        SSH    CLOCK  GPU    ENV    TCP    NCCL\n"
              "gpu1  10.0.0.1:22    pass   pass   pass   pass   pass   pass\n"
              "gpu2  10.0.0.2:2222  pass   warn   pass   pass   pass   pass\n"
              "gpu3  [::1]:22       fail   skip   skip   skip   skip   skip\n");
    CHECK(strchr(sb.buf, '\033') == NULL);
    strbuf_reset(&sb);
    check_report_table(&r, &sb, true);
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
    check_report_details(&r, &sb, false);
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
    check_report_details(&r, &sb, false);
    CHECK(strchr(sb.buf, '\033') == NULL);
    CHECK(strchr(sb.buf, '\007') == NULL);
    CHECK(strchr(sb.buf, '\r') == NULL);
    CHECK(strstr(sb.buf, "agent said ?]0;pwned? bye") != NULL);
    strbuf_done(&sb);
    check_report_done(&r);
}

int main(void)
{
    RUN(test_json_shape);
    RUN(test_pending_is_skip_in_json);
    RUN(test_summary_and_exit);
    RUN(test_table_text);
    RUN(test_details_text);
    RUN(test_remote_bytes_sanitised);
    return tap_done();
}
