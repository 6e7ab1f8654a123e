/* Unit tests for launcher/util.c: string buffer and shell quoting. */
#include <stdlib.h>

#include "tap.h"
#include "util.h"

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

int main(void)
{
    RUN(test_strbuf_grows_and_consumes);
    RUN(test_shell_quote_is_one_word);
    return tap_done();
}
