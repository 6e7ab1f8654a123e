/* Folding the check report's text (issue 19): hosts whose table rows are the same, or whose
 * findings are the same, share one line that names them as a hostlist ("n[001-255]"); the
 * odd ones out keep their own lines. Used by check_report.c's table and details; the --json
 * document never folds. Internal to launcher/check/. */
#ifndef DDPTOP_CHECK_FOLD_H
#define DDPTOP_CHECK_FOLD_H

#include <stdbool.h>
#include <stddef.h>

#include "check_report.h"

/* Up to this many hosts every host has its own lines: the report fits a screen anyway, and
 * a line per host reads best there. */
#define CHECK_FOLD_MAX_SPELLED 8

/* A number in a shared finding: the least and the greatest of the hosts' (as they wrote them). */
struct check_fold_num {
    double lo, hi;
    char *lo_s, *hi_s;
};

/* Hosts that share one line, in the order of the report's rows. */
struct check_fold {
    size_t *rows;
    size_t n, cap;
    int kind;                  /* findings: the check (enum check_kind); rows: -1 */
    enum check_status status;  /* findings: the verdict */
    char *detail, *hint;       /* findings: the text with the host's own name and address as
                                * "<host>" and "<address>" (hint NULL: none); in detail each
                                * number is a '\1', its values in nums */
    struct check_fold_num *nums;
    size_t n_nums;
    unsigned long hash;
};

struct check_folds {
    struct check_fold *v;
    size_t n;
};

/* Whether a report of these rows folds: not with all (--all), not up to 8 hosts. */
bool check_fold_wanted(const struct check_report *r, bool all);
/* The rows grouped by their verdict columns; fold false: one group per row. In the order of
 * each group's first row. */
void check_fold_rows(const struct check_report *r, bool fold, struct check_folds *out);
/* The findings the details list (not the passes, not the skips of a failed host), grouped by
 * (check, verdict, text, fix) with each host's own name and address normalised out and the
 * numbers of the text let vary (a clock offset of -612 ms and one of -618 ms are one finding,
 * "-618..-612"); fold false: one group per finding. In the order of each group's first
 * finding (host, check). */
void check_fold_findings(const struct check_report *r, bool fold, struct check_folds *out);
void check_folds_done(struct check_folds *f);

/* The group's detail with each number as its value or "least..greatest", malloc'd. */
char *check_fold_detail(const struct check_fold *g);
/* The group's hosts as one hostlist ("n[001-255,257]"), malloc'd. */
char *check_fold_hosts(const struct check_report *r, const struct check_fold *g);
/* The text with whole-word occurrences of host replaced by "<host>" and of address (when it
 * is not the host) by "<address>": the same finding of two nodes reads the same. Malloc'd. */
char *check_fold_normalise(const char *text, const char *host, const char *address);

#endif
