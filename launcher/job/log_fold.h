/* One line for N ranks (issue 30): lines with the same text that several ranks print within a
 * short window, grouped in arrival order, so that the headless printer and the dashboard's
 * all-ranks log show them once, at the first rank's position, as "[r0-63 n[01-08]] text".
 * Pure memory, no clock of its own (the caller says what time it is): tests drive it line by
 * line. The rank logs and the per-rank rings never see it (docs/logs.md, "One line for N
 * ranks").
 *
 * The rules, and why:
 * - A line joins an open group of the same bytes (and stream, attempt, truncation) that began
 *   less than the window ago and that its rank is not in yet; else it begins a new group.
 * - Order per rank: a line may join only a group that began after the group of its rank's line
 *   before. Groups are told in the order they began, so no rank's lines are ever told out of
 *   order, and a rank's second line never waits for its first (a two-line Python warning
 *   printed by 64 ranks is two folded lines, in order).
 * - A group closes when its window is over, when every rank of the job is in it, or when the
 *   open groups pass their bounds (then the oldest closes early); groups close oldest first.
 *   So a printer that tells each group as it closes holds a line at most the window.
 * - Pieces of a line (LOG_LINE_PARTIAL, LOG_LINE_SPLIT) never fold: each is a group of its own,
 *   in order with its rank's other lines, and closes as soon as it is the oldest (nothing can
 *   join it, so waiting would only delay it).
 * Cost per line: one hash of its text and a look at one bucket; memory: the open groups, at most
 * max_groups of them and max_bytes of their text. */
#ifndef DDPTOP_LOG_FOLD_H
#define DDPTOP_LOG_FOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "util/util.h"

/* How long a group takes lines after its first: ranks that print the same warning at the same
 * point of the program are read within milliseconds of each other, ranks of different nodes
 * within a few hundred. The headless printer holds a line at most this long (docs/logs.md). */
#define LOG_FOLD_WINDOW_MS 500
/* The dashboard's: it shows a group at once and adds ranks as they come, so nothing waits on
 * the window and it can be longer, for the ranks of a loaded or distant node. */
#define LOG_FOLD_VIEW_WINDOW_MS 5000
#define LOG_FOLD_MAX_GROUPS 4096
#define LOG_FOLD_MAX_BYTES (4u << 20)

/* A flag of log_fold_add beside the LOG_LINE_* ones: this entry takes no other rank (the
 * headless printer's events, held in line behind the lines before them). Such an entry, like
 * a piece of a line, closes as soon as it is the oldest: nothing can join it. */
#define LOG_FOLD_ALONE 0x100u

struct log_fold_group {
    uint64_t id;              /* 1, 2, ... in the order the groups began */
    int64_t t0_ms;            /* its first line's arrival */
    int stream, attempt;
    unsigned flags;           /* its first line's LOG_LINE_* */
    bool solo;                /* a piece of a line, or LOG_FOLD_ALONE: takes no other rank */
    const char *text;         /* its first line's bytes (not NUL-safe: use len) */
    size_t len;
    const int *ranks;         /* in arrival order: ranks[0] printed it first */
    size_t n;
    uint64_t user;            /* the caller's: where it put the group (the dashboard's list) */
};

struct log_fold;

/* window_ms: see LOG_FOLD_WINDOW_MS; max_groups, max_bytes: the bounds of the open groups. */
struct log_fold *log_fold_new(int64_t window_ms, size_t max_groups, size_t max_bytes);
void log_fold_free(struct log_fold *f);
/* The job's ranks: a group of all of them closes at once (nobody else can join it). */
void log_fold_set_world(struct log_fold *f, size_t n_ranks);
/* One line of rank, in arrival order, at now_ms: the group it joined or began (valid until the
 * next call that changes f). The caller takes the groups that closed after each call
 * (log_fold_due); one that does not loses the oldest when the bounds are full. */
struct log_fold_group *log_fold_add(struct log_fold *f, int64_t now_ms, int rank, int stream,
                                    int attempt, unsigned flags, const char *text, size_t len);
/* The oldest open group if it has closed at now_ms (all: whether or not), else NULL. It stays
 * the oldest until log_fold_pop. */
const struct log_fold_group *log_fold_due(const struct log_fold *f, int64_t now_ms, bool all);
void log_fold_pop(struct log_fold *f);
/* Milliseconds from now_ms until the oldest open group closes by its window (0: it has), -1
 * when none is open. */
int64_t log_fold_wait_ms(const struct log_fold *f, int64_t now_ms);
/* Whether rank has a line in an open group. */
bool log_fold_holds(const struct log_fold *f, int rank);
/* Open groups, and the bytes of their text. */
size_t log_fold_open(const struct log_fold *f, size_t *bytes);

/* Ranks as ranges, "0-63" or "0-3,8,12-15" (sorted in place; a rank twice counts once). */
void log_fold_ranks_format(struct strbuf *out, int *ranks, size_t n);
/* A folded line's prefix without its brackets: "r0-63 n[01-08]", the ranks and their nodes as a
 * hostlist (hosts/hostlist.h), raw host names (sanitize before drawing). ranks sorted in place. */
void log_fold_where(struct strbuf *out, const struct job *j, int *ranks, size_t n);

#endif
