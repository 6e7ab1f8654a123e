/* The command line of --notify (notify.h): the commands, which kinds of event they hear of,
 * their timeout. Kinds are events.jsonl's names (docs/logs.md), read from the model's own table
 * (job_event_kind_name), so that a kind the model gains is a --notify-on value at once. */
#include "notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "util/cli.h"
#include "util/util.h"

void notify_opts_init(struct notify_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_s = NOTIFY_TIMEOUT_DEFAULT_S;
}

void notify_opts_done(struct notify_opts *o)
{
    free(o->cmds);
    free(o->kinds);
    memset(o, 0, sizeof *o);
}

static bool kind_known(const char *name, size_t len)
{
    for (int k = 0; k < EV_KINDS; k++) {
        const char *s = job_event_kind_name((enum job_event_kind)k);
        if (strlen(s) == len && strncmp(s, name, len) == 0) return true;
    }
    return len == 3 && strncmp(name, "all", 3) == 0;
}

/* "launch, exit, ..." without repeats, for the message of a wrong name. */
static char *kinds_list(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "default, all");
    for (int k = 0; k < EV_KINDS; k++) {
        const char *s = job_event_kind_name((enum job_event_kind)k);
        bool seen = false;
        for (int m = 0; m < k && !seen; m++) seen = strcmp(job_event_kind_name((enum job_event_kind)m), s) == 0;
        if (!seen) strbuf_addf(&sb, ", %s", s);
    }
    return sb.buf;
}

/* Every comma-separated name of val is a kind, "all" or "default" ("default" becomes the
 * default's names, so that --notify-on default,straggler adds one). */
static int add_kinds(struct notify_opts *o, const char *val, char *err, size_t errlen)
{
    struct strbuf sb;
    strbuf_init(&sb);
    if (o->kinds) strbuf_adds(&sb, o->kinds);
    for (const char *p = val;;) {
        size_t len = strcspn(p, ",");
        bool dflt = len == 7 && strncmp(p, "default", 7) == 0;
        if (!len || (!dflt && !kind_known(p, len))) {
            char *all = kinds_list();
            cli_fail(err, errlen, "--notify-on: '%.*s' is no kind of event; give some of %s, separated by commas",
                     (int)len, p, all);
            free(all);
            strbuf_done(&sb);
            return -1;
        }
        if (sb.len) strbuf_adds(&sb, ",");
        if (dflt) strbuf_adds(&sb, NOTIFY_KINDS_DEFAULT);
        else strbuf_add(&sb, p, len);
        if (!p[len]) break;
        p += len + 1;
    }
    free(o->kinds);
    o->kinds = sb.buf;
    return 0;
}

int notify_opts_option(struct notify_opts *o, int argc, char **argv, int *i, char *err, size_t errlen)
{
    const char *val;
    int k = *i, rc;
    if ((rc = cli_opt_value(argc, argv, &k, "--notify", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--notify needs a command (see ddptop run --help)");
        if (!*val) return cli_fail(err, errlen, "--notify wants a command for sh -c, not an empty one");
        o->cmds = xrealloc(o->cmds, (o->n_cmds + 1) * sizeof *o->cmds);
        o->cmds[o->n_cmds++] = val;
    } else if ((rc = cli_opt_value(argc, argv, &k, "--notify-on", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--notify-on needs kinds of event (see ddptop run --help)");
        if (add_kinds(o, val, err, errlen) < 0) return -1;
    } else if ((rc = cli_opt_value(argc, argv, &k, "--notify-timeout", NULL, &val)) != 0) {
        if (rc < 0) return cli_fail(err, errlen, "--notify-timeout needs a value (see ddptop run --help)");
        if (cli_parse_int("--notify-timeout", val, 1, 3600, &o->timeout_s, err, errlen) < 0) return -1;
    } else {
        return 0;
    }
    *i = k;
    return 1;
}

bool notify_opts_wants(const struct notify_opts *o, const char *kind)
{
    const char *p = o->kinds ? o->kinds : NOTIFY_KINDS_DEFAULT;
    size_t n = strlen(kind);
    for (;;) {
        size_t len = strcspn(p, ",");
        if ((len == n && strncmp(p, kind, n) == 0) || (len == 3 && strncmp(p, "all", 3) == 0)) return true;
        if (!p[len]) return false;
        p += len + 1;
    }
}
