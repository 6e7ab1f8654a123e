/* The subcommands of ddptop, as one table (tmux's cmd_entry): each cmd_*.c exports its entry,
 * cmd.c lists them, and main, `ddptop --help`, the "did you mean" of a typo and the bash
 * completion (`ddptop --commands`) all read that list, so a new subcommand is added in one
 * place. tests/it_rooms.sh fails on a subcommand dispatched anywhere else. */
#ifndef DDPTOP_CMD_H
#define DDPTOP_CMD_H

#include <stdbool.h>
#include <stdio.h>

enum {
    /* the command writes to a pipe and makes no connection: `ddptop logs RUN | head` ends
     * quietly on SIGPIPE, as cat does (the others ignore it: a node closing its connection
     * must give an error, not kill us) */
    CMD_QUIET_PIPE = 1 << 0,
};

struct cmd_entry {
    const char *name;
    const char *alias;     /* another name, or NULL */
    /* the arguments after the name, one synopsis per line ('\n' between alternatives) */
    const char *args;
    const char *summary;   /* one line: what it does */
    /* argv[0] is the command's own word ("check"); returns the process exit status */
    int (*main)(int argc, char **argv);
    void (*usage)(FILE *f); /* the long `ddptop NAME --help` text */
    /* the default command only: plain `ddptop ARGS` without a command word (argv as main
     * got it); NULL for the others */
    int (*bare)(int argc, char **argv);
    unsigned flags;
};

/* The entries, in the order --help lists them; the first one (run) is also what plain
 * `ddptop [HOSTFILE] [-- CMD]` does. NULL-terminated. */
extern const struct cmd_entry *const cmd_table[];

extern const struct cmd_entry cmd_run_entry;
extern const struct cmd_entry cmd_check_entry;
extern const struct cmd_entry cmd_ls_entry;
extern const struct cmd_entry cmd_logs_entry;
extern const struct cmd_entry cmd_attach_entry;
extern const struct cmd_entry cmd_view_entry;

/* The entry named (or aliased) word, or NULL. */
const struct cmd_entry *cmd_find(const char *word);
/* The entry whose name a mistyped word most likely meant (a unique prefix, or within two
 * edits), or NULL when none is close. */
const struct cmd_entry *cmd_suggest(const char *word);
/* `ddptop --help`: one synopsis per entry, from the table. */
void cmd_usage(FILE *f);
/* The whole command line as main got it: a subcommand by its word, the options of ddptop
 * itself (--help, --version, --commands), else the default entry's bare form (a run).
 * Returns the exit status. */
int cmd_dispatch(int argc, char **argv);

#endif
