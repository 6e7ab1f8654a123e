/* The dashboard front end of `ddptop` (a terminal, no --headless): ncursesw panes for the
 * header, ranks, loss chart, log, events and the preflight, plugged into the controller as a
 * struct frontend. It reads the job model, draws at most 10 frames a second and only when
 * something changed, turns keys into UI changes or controller actions (keymap.h), and puts
 * the terminal back on every way out: the end of the run, Ctrl-C / SIGTERM / SIGHUP (through
 * the controller), a crash (SIGSEGV, SIGABRT, ... restore then re-raise) and util_fatal. */
#ifndef DDPTOP_DASHBOARD_H
#define DDPTOP_DASHBOARD_H

#include <stddef.h>

#include "run/controller.h"

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

/* `ddptop [HOSTFILE] ...` with the dashboard: controller_new, controller_run, restore, a
 * one-line summary. Returns the process exit code (0, 1, 2 or 3). */
int dashboard_run(const struct run_opts *o, const struct hostlist *hl, const char *theme);

#endif
