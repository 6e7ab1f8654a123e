/* Unit tests for tui/cmd/cmd.c, the command table: every entry is reachable by its word and
 * answers --help, `ddptop --help` lists exactly the table, --commands too, a typo gets the
 * nearest command ("did you mean"), --version names the protocol. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "tap.h"
#include "util/version.h"
#include "wire/protocol.h"

/* What cmd_dispatch(argv) writes on stdout and stderr, and its exit status. */
struct captured {
    int rc;
    char out[16384], err[16384];
};

static void slurp(int fd, char *buf, size_t n)
{
    ssize_t k = pread(fd, buf, n - 1, 0);
    buf[k > 0 ? k : 0] = '\0';
}

static void run_dispatch(struct captured *c, int argc, char **argv)
{
    char po[] = "/tmp/test_cmd.out.XXXXXX", pe[] = "/tmp/test_cmd.err.XXXXXX";
    int fo = mkstemp(po), fe = mkstemp(pe);
    int so = dup(1), se = dup(2);
    fflush(stdout);
    fflush(stderr);
    dup2(fo, 1);
    dup2(fe, 2);
    c->rc = cmd_dispatch(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    slurp(fo, c->out, sizeof c->out);
    slurp(fe, c->err, sizeof c->err);
    close(fo);
    close(fe);
    unlink(po);
    unlink(pe);
}

static size_t table_len(void)
{
    size_t n = 0;
    while (cmd_table[n]) n++;
    return n;
}

static void test_entries_are_complete_and_found(void)
{
    size_t n = table_len(), bare = 0;
    CHECK(n >= 6);
    for (size_t i = 0; i < n; i++) {
        const struct cmd_entry *e = cmd_table[i];
        CHECK(e->name && *e->name && e->args && e->summary && *e->summary && e->main && e->usage);
        CHECK(cmd_find(e->name) == e);
        if (e->alias) CHECK(cmd_find(e->alias) == e);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(cmd_table[j]->name, e->name) != 0);
        bare += e->bare != NULL;
    }
    CHECK_INT(bare, 1);   /* plain `ddptop ARGS` is one command's */
    CHECK(cmd_find("nosuch") == NULL);
    CHECK(cmd_find("") == NULL);
}

/* Every entry is reachable through the dispatch: `ddptop NAME --help` exits 0 and prints that
 * command's own usage. */
static void test_every_entry_reachable(void)
{
    static struct captured c;
    for (size_t i = 0; cmd_table[i]; i++) {
        const char *name = cmd_table[i]->name;
        char *argv[] = {"ddptop", (char *)name, "--help", NULL};
        char want[64];
        run_dispatch(&c, 3, argv);
        snprintf(want, sizeof want, "usage: ddptop %s", name);
        CHECK_INT(c.rc, 0);
        if (!strstr(c.out, want)) {
            printf("#   ddptop %s --help printed: %.200s\n", name, c.out);
            CHECK(strstr(c.out, want) != NULL);
        }
    }
}

/* The words after "ddptop " at the start of --help's synopsis lines, in order. */
static size_t help_words(const char *text, char words[][32], size_t max)
{
    size_t n = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *p = l;
        if (strncmp(p, "usage:", 6) == 0) p += 6;
        while (*p == ' ') p++;
        if (strncmp(p, "ddptop ", 7) != 0) continue;
        p += 7;
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz-");
        if (!len || *p == '-') continue;   /* [HOSTFILE], --version, --help */
        if (n > 0 && strlen(words[n - 1]) == len && strncmp(words[n - 1], p, len) == 0) continue;
        if (n < max) snprintf(words[n++], 32, "%.*s", (int)len, p);
    }
    return n;
}

static void test_help_lists_exactly_the_table(void)
{
    static struct captured c;
    char words[32][32];
    char *argv[] = {"ddptop", "--help", NULL};
    run_dispatch(&c, 2, argv);
    CHECK_INT(c.rc, 0);
    size_t n = help_words(c.out, words, 32);
    CHECK_INT(n, table_len());
    for (size_t i = 0; i < n && cmd_table[i]; i++) CHECK_STR(words[i], cmd_table[i]->name);
    for (size_t i = 0; cmd_table[i]; i++) CHECK(strstr(c.out, cmd_table[i]->summary) != NULL);

    /* the checker itself sees a command missing from a help text */
    CHECK_INT(help_words("usage: ddptop [HOSTFILE]\n       ddptop run X\n       ddptop --version\n", words, 32), 1);

    char *argv2[] = {"ddptop", "--commands", NULL};
    run_dispatch(&c, 2, argv2);
    CHECK_INT(c.rc, 0);
    char want[512] = "";
    for (size_t i = 0; cmd_table[i]; i++) {
        strcat(want, cmd_table[i]->name);
        strcat(want, "\n");
        if (cmd_table[i]->alias) {
            strcat(want, cmd_table[i]->alias);
            strcat(want, "\n");
        }
    }
    CHECK_STR(c.out, want);
}

static const char *suggested(const char *word)
{
    const struct cmd_entry *e = cmd_suggest(word);
    return e ? e->name : "(none)";
}

static void test_did_you_mean(void)
{
    static struct captured c;
    CHECK_STR(suggested("chek"), "check");
    CHECK_STR(suggested("chcek"), "check");   /* two letters swapped */
    CHECK_STR(suggested("lgos"), "logs");
    CHECK_STR(suggested("attahc"), "attach");
    CHECK_STR(suggested("vew"), "view");
    CHECK_STR(suggested("att"), "attach");     /* a unique prefix */
    CHECK_STR(suggested("rnu"), "run");
    CHECK(cmd_suggest("xyzzy") == NULL);
    CHECK(cmd_suggest("hostfile.txt") == NULL);
    CHECK(cmd_suggest("") == NULL);

    /* through the dispatch: exit 2 and the nearest command named; a word close to none lists
     * them all. A file of that name would be a hostfile: run where there is none. */
    char dir[] = "/tmp/test_cmd.XXXXXX", old[4096];
    CHECK(mkdtemp(dir) != NULL);
    CHECK(getcwd(old, sizeof old) != NULL);
    CHECK_INT(chdir(dir), 0);
    char *argv[] = {"ddptop", "chek", NULL};
    run_dispatch(&c, 2, argv);
    CHECK_INT(c.rc, 2);
    CHECK(strstr(c.err, "'chek' is not a command; did you mean 'ddptop check'?") != NULL);
    CHECK_STR(c.out, "");
    char *argv2[] = {"ddptop", "xyzzy", NULL};
    run_dispatch(&c, 2, argv2);
    CHECK_INT(c.rc, 2);
    CHECK(strstr(c.err, "'xyzzy' is neither a command (run, check, ls, logs, attach, view) nor a hostfile") != NULL);
    CHECK(strstr(c.err, "usage: ddptop") != NULL);
    CHECK_INT(chdir(old), 0);
    rmdir(dir);
}

static void test_version_names_the_protocol(void)
{
    static struct captured c;
    char want[128];
    char *argv[] = {"ddptop", "--version", NULL};
    run_dispatch(&c, 2, argv);
    snprintf(want, sizeof want, "ddptop %s (agent protocol %d)\n", DDPTOP_VERSION, PROTOCOL_VERSION);
    CHECK_INT(c.rc, 0);
    CHECK_STR(c.out, want);
}

int main(void)
{
    RUN(test_entries_are_complete_and_found);
    RUN(test_every_entry_reachable);
    RUN(test_help_lists_exactly_the_table);
    RUN(test_did_you_mean);
    RUN(test_version_names_the_protocol);
    return tap_done();
}
