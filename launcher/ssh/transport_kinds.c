/* The one table of transport kinds (transport_kind.h) and what reads it: --transport and the
 * kinds' own options, the choice of a kind for the hosts, the help text, opening nodes. A kind
 * is a file of its own (kind_*.c) and one line of `kinds` below; nothing here knows any of
 * them by name. */
#include "transport_kind.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/cli.h"
#include "util/util.h"

/* The table: one line a kind, X(NAME) for the `kind_NAME` of kind_NAME.c. The order is the one
 * --help and the messages list them in; a tie between kinds the hosts call for equally goes to
 * the earlier. */
#define TRANSPORT_KINDS(X) \
    X(ssh)                 \
    X(srun)                \
    X(tm)                  \
    X(local)               \
    X(fork)                \
    /* the table's end */

#define KIND_DECLARE(name) extern const struct transport_kind kind_##name;
TRANSPORT_KINDS(KIND_DECLARE)
#define KIND_ENTRY(name) &kind_##name,
static const struct transport_kind *const kinds[] = {TRANSPORT_KINDS(KIND_ENTRY)};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* A test kind is there only for the tests (DDPTOP_TEST_TRANSPORTS=1): a user never meets it,
 * in the help, in a message or by a typo. */
static bool visible(const struct transport_kind *k)
{
    const char *t = getenv("DDPTOP_TEST_TRANSPORTS");
    return !k->test_only || (t && strcmp(t, "1") == 0);
}

const struct transport_kind *transport_kind_find(const char *name)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (visible(kinds[i]) && strcmp(kinds[i]->name, name) == 0) return kinds[i];
    return NULL;
}

bool transport_kind_shares_step(const struct transport_kind *k)
{
    return k->open_step != NULL;
}

/* "ssh, srun or tm": the kinds --transport takes. */
static void add_names(struct strbuf *sb)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < N_KINDS; i++) n += visible(kinds[i]) && kinds[i]->help;
    for (size_t i = 0; i < N_KINDS; i++) {
        if (!visible(kinds[i]) || !kinds[i]->help) continue;
        strbuf_addf(sb, "%s%s", k == 0 ? "" : k + 1 == n ? " or " : ", ", kinds[i]->name);
        k++;
    }
}

/* A kind's own option at argv[*i]: 1 taken, 0 none of theirs, -1 with a message. */
static int kind_option(struct transport_opts *o, int argc, char **argv, int *i, const char *cmd, char *err,
                       size_t errlen)
{
    const char *val = NULL;
    for (size_t k = 0; k < N_KINDS; k++) {
        const struct transport_kind *kd = kinds[k];
        for (size_t j = 0; visible(kd) && kd->options && kd->options[j]; j++) {
            int rc = cli_opt_value(argc, argv, i, kd->options[j], NULL, &val);
            if (rc == 0) continue;
            if (kd->option(kd->options[j], rc < 0 ? NULL : val, cmd, err, errlen) < 0) return -1;
            if (o->n_given == TRANSPORT_OPTS_MAX)
                return cli_fail(err, errlen, "too many transport options (%s)", kd->options[j]);
            o->given[o->n_given].name = kd->options[j];
            o->given[o->n_given++].value = val;
            return 1;
        }
    }
    return 0;
}

int transport_opts_option(struct transport_opts *o, int argc, char **argv, int *i, const char *cmd, char *err,
                          size_t errlen)
{
    const char *val = NULL;
    int rc = cli_opt_value(argc, argv, i, "--transport", NULL, &val);
    if (rc == 0) return kind_option(o, argc, argv, i, cmd, err, errlen);
    const struct transport_kind *k = rc > 0 ? transport_kind_find(val) : NULL;
    if (!k || !k->help) {
        struct strbuf names;
        strbuf_init(&names);
        add_names(&names);
        if (rc < 0) cli_fail(err, errlen, "--transport needs %s (see ddptop %s --help)", names.buf, cmd);
        else cli_fail(err, errlen, "--transport wants %s, not '%s'", names.buf, val);
        strbuf_done(&names);
        return -1;
    }
    o->named = val;
    return 1;
}

const char *transport_opts_get(const struct transport_opts *o, const char *name)
{
    for (size_t i = o->n_given; i-- > 0;)
        if (strcmp(o->given[i].name, name) == 0) return o->given[i].value;
    return NULL;
}

int transport_opts_choose(struct transport_opts *o, const struct hosts_source *src, char *err, size_t errlen)
{
    int best = 0;
    const struct transport_kind *named = o->named ? transport_kind_find(o->named) : NULL;
    if (named) {
        if (named->fits && named->fits(src, err, errlen) < 0) return -1;
        o->kind = named;
        return 0;
    }
    o->kind = NULL;
    for (size_t i = 0; i < N_KINDS; i++) {
        int want = visible(kinds[i]) && kinds[i]->natural ? kinds[i]->natural(src) : 0;
        if (want > best) {
            best = want;
            o->kind = kinds[i];
        }
    }
    assert(o->kind); /* some kind takes any hosts, and no hosts */
    return 0;
}

void transport_kind_open(const struct transport_env *env, const bool *need, bool bridge, struct transport **t)
{
    const struct transport_kind *k = env->o->kind;
    if (k->open_step) {
        k->open_step(env, need, bridge, t);
        return;
    }
    for (size_t i = 0; i < env->n; i++)
        if (need[i]) t[i] = k->open(env, i, bridge);
}

char *transport_kind_announce(const struct transport_env *env)
{
    return env->o->kind->announce ? env->o->kind->announce(env) : NULL;
}

const char *const *transport_kind_rank_vars(const struct transport_env *env)
{
    return env->o->kind->rank_vars ? env->o->kind->rank_vars(env) : NULL;
}

int64_t transport_kind_hello_ms(const struct transport_kind *k)
{
    return k->hello_ms;
}

int transport_kind_idle_ms(const struct transport_kind *k)
{
    return k->idle_ms > 0 ? k->idle_ms : 100;
}

/* Help lines: the option's column is 23 wide, the text wraps before this column. */
#define USAGE_INDENT 23
#define USAGE_WIDTH 95

/* text after the option's column, wrapped at word boundaries. */
static void add_wrapped(struct strbuf *out, const char *first, const char *text)
{
    size_t col = strlen(first);
    strbuf_adds(out, first);
    while (*text) {
        size_t w = strcspn(text, " ");
        if (col > USAGE_INDENT && col + 1 + w > USAGE_WIDTH) {
            strbuf_addf(out, "\n%*s", USAGE_INDENT, "");
            col = USAGE_INDENT;
        } else if (col > USAGE_INDENT) {
            strbuf_adds(out, " ");
            col++;
        }
        strbuf_add(out, text, w);
        col += w;
        text += w;
        while (*text == ' ') text++;
    }
    strbuf_adds(out, "\n");
}

void transport_kinds_usage(FILE *f)
{
    struct strbuf text, out;
    size_t n = 0, k = 0;
    strbuf_init(&text);
    strbuf_init(&out);
    for (size_t i = 0; i < N_KINDS; i++) n += visible(kinds[i]) && kinds[i]->help;
    strbuf_adds(&text, "how agents start: ");
    for (size_t i = 0; i < N_KINDS; i++) {
        if (!visible(kinds[i]) || !kinds[i]->help) continue;
        strbuf_addf(&text, "%s%s", k == 0 ? "" : k + 1 == n ? " or " : ", ", kinds[i]->help);
        k++;
    }
    strbuf_adds(&text, ". docs/slurm.md");
    add_wrapped(&out, "  --transport T        ", text.buf);
    for (size_t i = 0; i < N_KINDS; i++)
        if (visible(kinds[i]) && kinds[i]->usage) strbuf_adds(&out, kinds[i]->usage);
    fputs(out.buf, f);
    strbuf_done(&text);
    strbuf_done(&out);
}
