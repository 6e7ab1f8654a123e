/* The headless front end of `ddptop run` (--headless, or stdout not a terminal): a line
 * printer that plugs into the controller as a struct frontend. Every rank line is printed as
 * "[r3 gpu2] text" (stderr lines "[r3 gpu2 err] text"), every event as "[ddptop] text", the
 * root cause of a failure in full, and a summary at the end; all of it made safe for a
 * terminal (util/sanitize.h).
 *
 * The printer never blocks the controller's loop: output is queued and written only as fast
 * as stdout takes it. When the queue passes its bound (a slow terminal or pipe), lines are
 * dropped from the screen (never from the log files) and a note says how many.
 *
 * Folding (headless_set_fold, on unless --no-fold): a line that several ranks print within
 * LOG_FOLD_WINDOW_MS is printed once, "[r0-63 n[01-08]] text", where the first rank's was;
 * a line of one rank looks as it always did. Lines wait at most that window, and each rank's
 * lines (and the events about it) stay in order (job/log_fold.h, docs/logs.md). */
#ifndef DDPTOP_HEADLESS_H
#define DDPTOP_HEADLESS_H

#include <stdbool.h>
#include <stddef.h>

#include "frontend_session.h"
#include "controller/controller.h"

#define HEADLESS_QUEUE_MAX (8u * 1024 * 1024)   /* bytes waiting for stdout */

struct headless;

/* Prints to fd (usually 1). */
struct headless *headless_new(int fd);
void headless_free(struct headless *h);
/* Folding on or off (headless_new: off; headless_run: on unless --no-fold). */
void headless_set_fold(struct headless *h, bool on);
/* Fills fe with the printer's hooks (no input fd: the controller ends with the job). */
void headless_frontend(struct headless *h, struct frontend *fe);
/* The closing summary (state, attempts, ranks by state, steps, loss, logs, exit code), then
 * everything queued, waiting for stdout as long as it takes. */
void headless_finish(struct headless *h, const struct job *j, int exit_code);

/* `ddptop run` with this printer: controller_new, controller_run, summary. s: as for
 * dashboard_run (only its note_run is used: a printer has no session). Returns the process
 * exit code (0, 1, 2 or 3). */
int headless_run(const struct run_opts *o, const struct hostlist *hl, const struct frontend_session *s);

#endif
