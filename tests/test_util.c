/* Unit tests for launcher/util.c: string buffer and shell quoting. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* strbuf_next_line (the controller's loop takes every agent line so, into one buffer): the same
 * lines as strbuf_take_line, across reads, empty ones too, the output buffer reused; a line of
 * 1 MiB whole. */
static void test_next_line_into_one_buffer(void)
{
    struct strbuf sb, out;
    size_t off = 0;
    strbuf_init(&sb);
    strbuf_init(&out);
    strbuf_adds(&sb, "one\ntw");
    CHECK(strbuf_next_line(&sb, &off, &out));
    CHECK_STR(out.buf, "one");
    CHECK(!strbuf_next_line(&sb, &off, &out));          /* a partial line waits */
    strbuf_adds(&sb, "o\n\nthree\n");
    CHECK(strbuf_next_line(&sb, &off, &out));
    CHECK_STR(out.buf, "two");
    CHECK(strbuf_next_line(&sb, &off, &out));
    CHECK_INT(out.len, 0);                              /* an empty line is a line */
    CHECK_STR(out.buf, "");
    CHECK(strbuf_next_line(&sb, &off, &out));
    CHECK_STR(out.buf, "three");
    CHECK(!strbuf_next_line(&sb, &off, &out));
    CHECK_INT(sb.len, 0);
    char *big = xmalloc(1 << 20);
    memset(big, 'y', 1 << 20);
    strbuf_add(&sb, big, 1 << 20);
    strbuf_adds(&sb, "\nafter\n");
    CHECK(strbuf_next_line(&sb, &off, &out));
    CHECK_INT(out.len, 1 << 20);
    CHECK(memcmp(out.buf, big, 1 << 20) == 0 && out.buf[1 << 20] == '\0');
    char *before = out.buf;
    CHECK(strbuf_next_line(&sb, &off, &out));
    CHECK_STR(out.buf, "after");
    CHECK(out.buf == before);                           /* no new allocation for a shorter line */
    free(big);
    strbuf_done(&sb);
    strbuf_done(&out);
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

/* util_open_private / util_open_read: what another user could plant at a name (a FIFO, a
 * link, a file of theirs) is refused at once, never waited on or followed. */
static void test_open_private_and_read(void)
{
    char dir[] = "/tmp/ddptop-test-util.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char *fifo = xasprintf("%s/fifo", dir), *link = xasprintf("%s/link", dir);
    char *theirs = xasprintf("%s/theirs", dir), *mine = xasprintf("%s/mine", dir);
    CHECK(mkfifo(fifo, 0666) == 0);
    CHECK(symlink(mine, link) == 0);
    int fd = open(theirs, O_WRONLY | O_CREAT, 0666);
    CHECK(fd >= 0 && fchown(fd, 65534, 65534) == 0); /* the tests run as root: another user's file */
    close(fd);

    errno = 0;
    CHECK(util_open_private(fifo, O_WRONLY | O_APPEND, 0600) < 0 && errno == EINVAL);
    CHECK(util_open_private(link, O_WRONLY | O_APPEND, 0600) < 0 && errno == ELOOP);
    CHECK(access(mine, F_OK) != 0);                       /* not made through the link */
    CHECK(util_open_private(theirs, O_WRONLY | O_TRUNC, 0600) < 0 && errno == EPERM);
    CHECK(util_open_read(fifo) < 0 && errno == EINVAL);  /* no hang on a FIFO without writer */
    CHECK_STR(util_open_read_error(EINVAL), "not a regular file (a FIFO, a device or a directory)");

    /* exactly the mode (the umask does not take the group's bits), emptied with O_TRUNC */
    mode_t old = umask(077);
    fd = util_open_private(mine, O_WRONLY | O_APPEND, 0640);
    umask(old);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0640);
    CHECK(fd >= 0 && write(fd, "abc", 3) == 3);
    if (fd >= 0) close(fd);
    fd = util_open_private(mine, O_WRONLY | O_TRUNC, 0600);
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0 && (st.st_mode & 07777) == 0600);
    if (fd >= 0) close(fd);
    fd = util_open_read(mine);
    CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
    if (fd >= 0) close(fd);

    unlink(fifo);
    unlink(link);
    unlink(theirs);
    unlink(mine);
    rmdir(dir);
    free(fifo);
    free(link);
    free(theirs);
    free(mine);
}

/* util_memmem_rare answers as memmem does: 200,000 haystacks of near misses ('"step' without
 * its closing quote, "step\"" without the opening one, quotes everywhere, a hit at either end,
 * a needle longer than the haystack). */
static void test_memmem_rare_as_memmem(void)
{
    static const char alpha[] = "\"step\"x ";
    char hay[64];
    unsigned seed = 1;
    int differ = 0;
    for (int i = 0; i < 200000; i++) {
        size_t n = (size_t)(i % 40);
        for (size_t k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            hay[k] = alpha[(seed >> 16) % (sizeof alpha - 1)];
        }
        const char *needle = i % 3 ? "\"step\"" : "\"s";
        size_t m = strlen(needle);
        if (util_memmem_rare(hay, n, needle, m) != memmem(hay, n, needle, m)) differ++;
    }
    CHECK_INT(differ, 0);
    CHECK(util_memmem_rare("\"step\"", 6, "\"step\"", 6) != NULL);
    CHECK(util_memmem_rare("\"step", 5, "\"step\"", 6) == NULL);
    CHECK(util_memmem_rare("", 0, "\"", 1) == NULL);
}

int main(void)
{
    RUN(test_memmem_rare_as_memmem);
    RUN(test_strbuf_grows_and_consumes);
    RUN(test_shell_quote_is_one_word);
    RUN(test_take_line_reassembles_across_reads);
    RUN(test_next_line_into_one_buffer);
    RUN(test_exe_sibling);
    RUN(test_open_private_and_read);
    return tap_done();
}
