/* The words of a health incident's root cause and its followers (health_cause.h). */
#include "health_cause.h"

#include <stdio.h>

#include "util/util.h"

const char *health_kind_name(enum health_kind k)
{
    return k == HEALTH_NAN ? "nan" : k == HEALTH_SPIKE ? "spike" : "none";
}

/* 1204 -> "1,204": steps are read by people, and big ones are common. */
const char *health_step_words(long v, char *buf, size_t n)
{
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%ld", v < 0 ? -v : v);
    size_t o = 0;
    if (v < 0 && o + 1 < n) buf[o++] = '-';
    for (int i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *health_loss_word(int bad)
{
    switch (bad) {
    case LOSS_NAN: return "NaN";
    case LOSS_INF: return "inf";
    case LOSS_NEG_INF: return "-inf";
    case LOSS_NULL: return "not finite (null)";
    }
    return "not finite";
}

int health_spike_window(const struct job *j)
{
    return j->health.spike_window > 0 ? j->health.spike_window : HEALTH_SPIKE_WINDOW;
}

static long episode_step(const struct rank_info *r, enum health_kind kind)
{
    return kind == HEALTH_NAN ? r->nan_step : r->spike_step;
}

int health_followers(const struct job *j, enum health_kind kind, int rank, long step, int *first,
                     long *first_step)
{
    *first = rank;
    *first_step = step;
    /* a rank whose line came later may have gone bad a step earlier: it is the first */
    for (size_t i = 0; i < j->n_ranks; i++) {
        long s = episode_step(&j->ranks[i], kind);
        if (s >= 0 && s >= step - HEALTH_FOLLOW_STEPS && s < *first_step) {
            *first = (int)i;
            *first_step = s;
        }
    }
    int n = 0;
    for (size_t i = 0; i < j->n_ranks; i++) {
        long s = episode_step(&j->ranks[i], kind);
        if ((int)i != *first && s >= *first_step && s <= *first_step + HEALTH_FOLLOW_STEPS) n++;
    }
    return n;
}

char *health_summary(const struct job *j, enum health_kind kind, int rank, long step, int followers)
{
    char st[40], tail[96] = "";
    health_step_words(step, st, sizeof st);
    if (followers >= 0 && j->world_size > 1) {
        if (followers)
            snprintf(tail, sizeof tail, " (first rank; %d followed within %d steps)", followers,
                     HEALTH_FOLLOW_STEPS);
        else
            snprintf(tail, sizeof tail, " (first rank; no other rank followed within %d steps)",
                     HEALTH_FOLLOW_STEPS);
    }
    if (kind == HEALTH_NAN) {
        int bad = rank >= 0 && (size_t)rank < j->n_ranks ? j->ranks[rank].nan_bad : LOSS_NAN;
        return xasprintf("loss became %s on rank %d at step %s%s", health_loss_word(bad), rank, st, tail);
    }
    return xasprintf("loss spiked above %gx the median of its last %d on rank %d at step %s%s",
                     j->health.spike_factor, health_spike_window(j), rank, st, tail);
}
