/* Unit tests for launcher/util.c: string buffer and shell quoting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "util/util.h"

static void test_strbuf_grows_and_consumes(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < 1000; i++) strbuf_addf(&sb, "%d,", i);
    CHECK(sb.len > 3000);
    CHECK(strncmp(sb.buf, "0,1,2,", 6) == 0);
    strbuf_consume(&sb, 2);
    CHECK(strncmp(sb.buf, "1,2,", 4) == 0);
    strbuf_done(&sb);
}

static void test_shell_quote_is_one_word(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_add_shell_quoted(&sb, "it's $(rm -rf /); `x`\n-n");
    CHECK_STR(sb.buf, "'it'\\''s $(rm -rf /); `x`\n-n'");
    strbuf_done(&sb);
}

static void test_take_line_reassembles_across_reads(void)
{
    struct strbuf sb;
    size_t off = 0;
    strbuf_init(&sb);
    strbuf_adds(&sb, "one\ntw");
    char *l = strbuf_take_line(&sb, &off);
    CHECK_STR(l, "one");
    free(l);
    CHECK(strbuf_take_line(&sb, &off) == NULL);        /* a partial line waits */
    strbuf_adds(&sb, "o\n\nthree\n");
    l = strbuf_take_line(&sb, &off);
    CHECK_STR(l, "two");
    free(l);
    l = strbuf_take_line(&sb, &off);
    CHECK_STR(l, "");                                   /* an empty line is a line */
    free(l);
    l = strbuf_take_line(&sb, &off);
    CHECK_STR(l, "three");
    free(l);
    CHECK(strbuf_take_line(&sb, &off) == NULL);
    CHECK_INT(off, 0);                                  /* all taken: the buffer was compacted */
    CHECK_INT(sb.len, 0);
    /* many lines in one buffer: every one comes back, in order */
    for (int i = 0; i < 10000; i++) strbuf_addf(&sb, "line %d\n", i);
    int n = 0, in_order = 1;
    while ((l = strbuf_take_line(&sb, &off))) {
        char want[32];
        snprintf(want, sizeof want, "line %d", n++);
        in_order &= strcmp(l, want) == 0;
        free(l);
    }
    CHECK_INT(n, 10000);
    CHECK(in_order);
    strbuf_done(&sb);
}

/* The agent and the trainer are found beside ddptop; here, beside this test program. */
static void test_exe_sibling(void)
{
    char *self = util_exe_sibling("test_util");
    char *up = util_exe_sibling("../tests");
    CHECK(self && self[0] == '/');
    CHECK(self && strstr(self, "/tests/test_util") != NULL);
    CHECK(self && access(self, X_OK) == 0);
    CHECK(up && access(up, X_OK) == 0);   /* a name may climb: themes live in ../themes */
    free(self);
    free(up);
}

int main(void)
{
    RUN(test_strbuf_grows_and_consumes);
    RUN(test_shell_quote_is_one_word);
    RUN(test_take_line_reassembles_across_reads);
    RUN(test_exe_sibling);
    return tap_done();
}
