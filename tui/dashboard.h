/* The dashboard front end of `ddptop` (a terminal, no --headless): ncursesw panes for the
 * header, ranks, loss chart, log, events and the preflight, plugged into the controller as a
 * struct frontend. It reads the job model, draws at most 10 frames a second and only when
 * something changed, turns keys into UI changes or controller actions (keymap.h), and puts
 * the terminal back on every way out: the end of the run, Ctrl-C / SIGTERM / SIGHUP (through
 * the controller), a crash (SIGSEGV, SIGABRT, ... restore then re-raise) and util_fatal. */
#ifndef DDPTOP_DASHBOARD_H
#define DDPTOP_DASHBOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend_session.h"
#include "controller/controller.h"

struct dashboard;

/* theme: --theme NAME or a path (NULL: "default"). Loads the theme; the terminal is taken
 * over only at the first frame, so errors before it (a bad hostfile, a controller that does
 * not start) print on a normal terminal. NULL with err filled when the theme cannot load. */
struct dashboard *dashboard_new(const char *theme, char *err, size_t errlen);
/* Restores the terminal (if it was taken) and prints what ranks/ddptop wrote to stderr
 * meanwhile. */
void dashboard_free(struct dashboard *d);
/* Fills fe with the dashboard's hooks; c is the controller they act on (set it with
 * dashboard_set_controller once controller_new returned). */
void dashboard_frontend(struct dashboard *d, struct frontend *fe);
void dashboard_set_controller(struct dashboard *d, struct controller *c);

/* Without a controller (`ddptop view`, tui/cmd/cmd_view.c, which runs its own loop): the job is a
 * finished run read back from disk. Keys that would act on processes (restart, stop, stacks,
 * detach) only say so; q asks nothing and sets the quit flag. */
void dashboard_view_only(struct dashboard *d, const struct job *j);
bool dashboard_quit_asked(const struct dashboard *d);
/* The hooks' bodies, for such a loop: every key waiting on stdin; a frame when one is due
 * (returns the ms until the next is wanted, -1 when the terminal cannot be taken); the
 * terminal's new size; one line of the merged all-ranks log, in the order shown. */
void dashboard_read_keys(struct dashboard *d);
int dashboard_tick(struct dashboard *d, const struct job *j);
void dashboard_resized(struct dashboard *d);
void dashboard_merged_add(struct dashboard *d, const struct job *j, int rank, const struct log_line *l);

/* Sets the status-line notice for a few seconds. */
void dashboard_notice(struct dashboard *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* `ddptop [HOSTFILE] ...` with the dashboard: controller_new, controller_run, restore, a
 * one-line summary. s: what the session it runs in does for it (NULL: nothing; kept for the
 * run, so it must outlive the call). Returns the process exit code (0, 1, 2 or 3). */
int dashboard_run(const struct run_opts *o, const struct hostlist *hl, const char *theme,
                  const struct frontend_session *s);

#endif
