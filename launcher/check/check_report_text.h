/* The text of `ddptop check`'s results (and of the preflight inside `ddptop run`): the table
 * and the details of everything not passing, folded above 8 hosts (check_fold.h, issue 19).
 * Drawing the table live on a terminal is the front end's (tui/cmd/cmd_check.c): here only
 * the lines are made. */
#ifndef DDPTOP_CHECK_REPORT_TEXT_H
#define DDPTOP_CHECK_REPORT_TEXT_H

#include "check_report.h"

/* How the text is written (check_report_table, check_report_details). */
enum {
    CHECK_TEXT_COLOUR = 1u << 0,   /* statuses in ANSI colours */
    CHECK_TEXT_ALL    = 1u << 1,   /* one line per host: no folding (`ddptop check --all`) */
};

/* The table: a header line, then one line per group of hosts with the same verdicts, named
 * as a hostlist ("n[001-255]"; check_fold.h: above 8 hosts, unless CHECK_TEXT_ALL), each line
 * ending in '\n'. The address column of a group: the one address with a count
 * ("127.0.0.1 (x256)"), or the addresses as a hostlist, or "N addresses" when too long. */
void check_report_table(const struct check_report *r, struct strbuf *out, unsigned flags);
/* Everything not passing: "HOST  CHECK  STATUS  detail" then an indented "fix: hint" line,
 * and a closing summary line. Hosts with the same finding share its line (HOST a hostlist,
 * their own name and address in the text as <host> and <address>), folded as the table. */
void check_report_details(const struct check_report *r, struct strbuf *out, unsigned flags);

#endif
