/* The command table (cmd.h) and what reads it: the dispatch, --help, "did you mean". */
#include "cmd.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/version.h"
#include "wire/protocol.h"

const struct cmd_entry *const cmd_table[] = {
    &cmd_run_entry, &cmd_check_entry, &cmd_ls_entry, &cmd_logs_entry, &cmd_attach_entry, &cmd_view_entry,
    NULL,
};

const struct cmd_entry *cmd_find(const char *word)
{
    for (size_t i = 0; cmd_table[i]; i++) {
        const struct cmd_entry *e = cmd_table[i];
        if (strcmp(word, e->name) == 0 || (e->alias && strcmp(word, e->alias) == 0)) return e;
    }
    return NULL;
}

/* Optimal string alignment distance (a swap of two neighbours is one edit: "chcek"), capped:
 * the words compared are a command name and what was typed for it. */
static size_t edit_distance(const char *a, const char *b)
{
    enum { MAX = 32 };
    size_t la = strlen(a), lb = strlen(b);
    size_t d[MAX + 1][MAX + 1];
    if (la > MAX || lb > MAX) return MAX;
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            size_t best = sub < del ? sub : del;
            if (ins < best) best = ins;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const struct cmd_entry *cmd_suggest(const char *word)
{
    const struct cmd_entry *best = NULL, *prefix = NULL;
    size_t best_d = 3, n_prefix = 0, len = strlen(word);
    if (!len) return NULL;
    for (size_t i = 0; cmd_table[i]; i++) {
        const struct cmd_entry *e = cmd_table[i];
        const char *names[2] = {e->name, e->alias};
        for (int k = 0; k < 2 && names[k]; k++) {
            size_t d = edit_distance(word, names[k]);
            /* within two edits, but not a whole different short word ("at" is not "ls") */
            if (d < best_d && d < strlen(names[k])) best_d = d, best = e;
            if (strncmp(names[k], word, len) == 0 && prefix != e) prefix = e, n_prefix++;
        }
    }
    if (n_prefix == 1) return prefix;
    return best;
}

/* The summary beside a synopsis, at column SIDE, or under it at column UNDER when the
 * synopsis reaches that far. */
enum { SIDE = 60, UNDER = 33 };

/* "       ddptop NAME ARGS" for each synopsis line, the summary beside or under the first. */
static void usage_entry(FILE *f, const char *lead, const char *name, const char *args, const char *summary)
{
    const char *p = args;
    bool first = true;
    do {
        size_t len = strcspn(p, "\n");
        int w = fprintf(f, "%s%s%s%.*s", first ? lead : "       ddptop ", name, len ? " " : "", (int)len, p);
        if (first) {
            if (w >= 0 && w + 2 <= SIDE) fprintf(f, "%*s%s\n", SIDE - w, "", summary);
            else fprintf(f, "\n%*s%s\n", UNDER, "", summary);
        } else {
            fputc('\n', f);
        }
        first = false;
        p += len + (p[len] == '\n');
    } while (*p);
}

void cmd_usage(FILE *f)
{
    const struct cmd_entry *def = cmd_table[0];
    fputs("usage: ddptop [HOSTFILE] [options] [--theme NAME] [-- CMD ARGS...]\n", f);
    fprintf(f, "%*srun a job (options as ddptop %s) in the dashboard\n", UNDER, "", def->name);
    for (size_t i = 0; cmd_table[i]; i++) {
        const struct cmd_entry *e = cmd_table[i];
        usage_entry(f, "       ddptop ", e->name, e->args, e->summary);
        if (e->alias) fprintf(f, "%*s(also: ddptop %s)\n", UNDER, "", e->alias);
    }
    fputs("       ddptop --version\n"
          "       ddptop --help | ddptop COMMAND --help    (COMMAND:", f);
    for (size_t i = 0; cmd_table[i]; i++) fprintf(f, "%s %s", i ? "," : "", cmd_table[i]->name);
    fputs(")\n", f);
}

/* The names, comma-separated, for messages. */
static void list_names(FILE *f)
{
    for (size_t i = 0; cmd_table[i]; i++) fprintf(f, "%s%s", i ? ", " : "", cmd_table[i]->name);
}

int cmd_dispatch(int argc, char **argv)
{
    const struct cmd_entry *e;
    const char *a = argc >= 2 ? argv[1] : NULL;
    if (a && (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0)) {
        printf("ddptop %s (agent protocol %d)\n", DDPTOP_VERSION, PROTOCOL_VERSION);
        return 0;
    }
    if (a && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
        cmd_usage(stdout);
        return 0;
    }
    if (a && strcmp(a, "--commands") == 0) {   /* for the bash completion and scripts */
        for (size_t i = 0; cmd_table[i]; i++) {
            printf("%s\n", cmd_table[i]->name);
            if (cmd_table[i]->alias) printf("%s\n", cmd_table[i]->alias);
        }
        return 0;
    }
    if (a && (e = cmd_find(a)) != NULL) {
        if (e->flags & CMD_QUIET_PIPE) signal(SIGPIPE, SIG_DFL);
        return e->main(argc - 1, argv + 1);
    }
    /* a word that is neither a subcommand nor an existing file is a typo, not a hostfile */
    if (a && a[0] != '-' && !strchr(a, '/') && access(a, F_OK) != 0) {
        const struct cmd_entry *near = cmd_suggest(a);
        if (near) {
            fprintf(stderr, "ddptop: '%s' is not a command; did you mean 'ddptop %s'? (no file of that "
                    "name either, so it is not a hostfile)\n", a, near->name);
        } else {
            fprintf(stderr, "ddptop: '%s' is neither a command (", a);
            list_names(stderr);
            fputs(") nor a hostfile\n", stderr);
            cmd_usage(stderr);
        }
        return 2;
    }
    for (size_t i = 0; cmd_table[i]; i++)
        if (cmd_table[i]->bare) return cmd_table[i]->bare(argc, argv);
    return 2; /* not reached: the table has a default */
}
