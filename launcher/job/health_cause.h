/* The words of a training health incident (health.h) as the root cause tells them, and the
 * count of the ranks that followed the first: a leaf that both the rules (health.c) and the
 * root cause (root_cause.c, which settles the incident's cause) read, so that neither needs
 * the other's header. Pure over the model. */
#ifndef DDPTOP_HEALTH_CAUSE_H
#define DDPTOP_HEALTH_CAUSE_H

#include <stddef.h>

#include "job.h"

#define HEALTH_SPIKE_WINDOW     20   /* --loss-spike X: the median of the last 20 losses */
#define HEALTH_FOLLOW_STEPS     2    /* ranks within this many steps of the first follow it */

enum health_kind { HEALTH_KIND_NONE = 0, HEALTH_NAN, HEALTH_SPIKE };

/* "nan", "spike": the event's kind and the root cause's "health" in events.jsonl. */
const char *health_kind_name(enum health_kind k);
/* 1204 -> "1,204" into buf. */
const char *health_step_words(long step, char *buf, size_t n);
/* What a loss that is not a number was (enum loss_bad): "NaN", "inf", "-inf", ... */
const char *health_loss_word(int bad);
/* The spike rule's window: --loss-spike's N, HEALTH_SPIKE_WINDOW when the job has none set. */
int health_spike_window(const struct job *j);

/* The incident of kind that rank opened at step, as the ranks' lines now tell it: the first
 * rank (the lowest step within HEALTH_FOLLOW_STEPS before it; the same step: rank itself) in
 * *first and *first_step, and how many other ranks' episodes began within
 * HEALTH_FOLLOW_STEPS steps after it. */
int health_followers(const struct job *j, enum health_kind kind, int rank, long step, int *first,
                     long *first_step);
/* The root cause's words for the incident (caller frees): "loss became NaN on rank 5 at step
 * 1,204 (first rank; 7 followed within 2 steps)"; followers < 0: not counted yet (no
 * parenthesis), and none for a job of one rank. */
char *health_summary(const struct job *j, enum health_kind kind, int rank, long step, int followers);

#endif
