/* What a person or a signal asks of the controller (controller.h's controller_act): restart,
 * stop, quit, launch despite the preflight, a rank's stacks. These are a person's decisions, taken
 * where they are asked (the progress step, controller.c, decides everything that follows from
 * what the nodes say), so this file sits at the top with the loop (controller_int.h).
 *
 * Signals: SIGINT, SIGTERM and SIGHUP stop every rank (SIGCONT, SIGTERM, SIGKILL after
 * --term-timeout), flush the logs and leave with exit code 1; a second one kills at once.
 * SIGUSR1 and SIGUSR2 (a scheduler's warning) go on to every rank. SIGHUP with a session's
 * dashboard (hup_detaches) leaves the run to its agents. They are caught only once the
 * preflight is over: before that no rank runs and the default action (ddptop ends, its agents
 * see end of file and exit) is what a user wants. */
#include "controller_int.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "wire/protocol.h"
#include "util/evloop.h"

/* ---- signals ------------------------------------------------------------------------------ */

static const int caught[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGUSR1, SIGUSR2 };

static void on_signal(struct evloop *el, int signo, void *ctx);

int ctl_signals_install(struct controller *c)
{
    for (size_t i = 0; i < sizeof caught / sizeof *caught; i++)
        if (evloop_signal(c->el, caught[i], on_signal, c) != 0) return -1;
    return 0;
}

void ctl_signals_restore(struct controller *c)
{
    for (size_t i = 0; c->el && i < sizeof caught / sizeof *caught; i++) evloop_signal(c->el, caught[i], NULL, NULL);
}

static void send_kill_all(struct controller *c)
{
    for (size_t i = 0; i < c->n; i++) {
        int id;
        cJSON *m;
        if (!ctl_node_usable(&c->nodes[i])) continue;
        m = ctl_request(c, i, WIRE_OP_SIGNAL, WIRE_TAG_NONE, &id);
        cJSON_AddStringToObject(m, "sig", "KILL");
        ctl_send(c, i, m);
    }
}

/* SIGUSR1/SIGUSR2 to ddptop itself (sbatch --signal=B:USR1@60 when the script execs ddptop, or
 * kill -USR1): a warning for the ranks, passed to every one of them; the job goes on. */
static void pass_warning(struct controller *c, int sig)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        int id;
        cJSON *m;
        if (!ctl_node_usable(&c->nodes[i])) continue;
        m = ctl_request(c, i, WIRE_OP_SIGNAL, WIRE_TAG_NONE, &id);
        cJSON_AddStringToObject(m, "sig", sig == SIGUSR1 ? "USR1" : "USR2");
        ctl_send(c, i, m);
        n++;
    }
    job_event_add(c->job, EV_SIGNAL, -1, -1, "SIG%s to ddptop: passed on to every rank (%zu node%s)",
                  sig == SIGUSR1 ? "USR1" : "USR2", n, n == 1 ? "" : "s");
}

/* From the loop, in the order the signals came (the handler only wrote their numbers). */
static void on_signal(struct evloop *el, int sig, void *ctx)
{
    struct controller *c = ctx;
    (void)el;
    if (sig == SIGWINCH) {
        if (c->fe.on_resize) c->fe.on_resize(c->fe.ctx);
        return;
    }
    if (sig == SIGUSR1 || sig == SIGUSR2) {
        pass_warning(c, sig);
        return;
    }
    if (sig == SIGHUP && c->o.hup_detaches && c->o.agent_grace_s > 0 &&
        (job_is_running(c->job) || job_is_stopping(c->job))) {
        /* the dashboard's session is gone (its server killed or crashed): nobody can
         * see or steer the run from here, but it need not die: the agents keep it
         * and ddptop attach takes it over */
        job_event_add(c->job, EV_INFO, -1, -1, "the dashboard's session hung up: leaving the run to its "
                      "agents (they wait %d s); ddptop attach %s takes it over", c->o.agent_grace_s,
                      c->job->run_id);
        c->abandon = c->quit = true;
        return;
    }
    c->signals++;
    if (c->signals == 1) {
        job_event_add(c->job, EV_STOP, -1, -1, "%s received: stopping every rank, then exiting",
                      strsignal(sig));
        controller_act(c, ACT_QUIT, -1);
    } else if (c->signals == 2) {
        /* a second Ctrl-C: no more grace */
        job_event_add(c->job, EV_STOP, -1, -1, "%s again: killing every rank now", strsignal(sig));
        send_kill_all(c);
        c->quit = true;
        if (!job_is_ended(c->job)) {
            job_ended(c->job, JOB_STOPPED);
            ctl_record_end(c);
        }
    }
}

/* ---- actions ------------------------------------------------------------------------------ */

void controller_act(struct controller *c, enum action a, int rank)
{
    switch (a) {
    case ACT_NONE: break;
    case ACT_STACKS: ctl_stacks_user(c, rank); break;
    case ACT_LAUNCH_ANYWAY:
        if (c->job->state != JOB_CHECK_FAILED) break;
        job_event_add(c->job, EV_INFO, -1, -1, "launching despite the preflight");
        ctl_launch_begin(c);
        break;
    case ACT_RESTART:
        if (job_is_running(c->job)) {
            job_event_add(c->job, EV_STOP, -1, -1, "restart asked for: stopping every rank");
            ctl_begin_stop(c, JOB_RESTARTING, JOB_STOPPED, AFTER_RESTART, false);
        } else if (job_is_stopping(c->job) && c->after != AFTER_QUIT) {
            c->after = AFTER_RESTART;
            job_restart_asked(c->job);
        } else if (job_is_ended(c->job) && !c->quit && c->allocation_released) {
            job_event_add(c->job, EV_INFO, -1, -1, "no restart: the Slurm allocation (--salloc) was given back "
                          "when the job ended; start a new run");
        } else if (job_is_ended(c->job) && !c->quit) {
            ctl_restart(c, "asked for");
        } else if (c->job->state == JOB_CHECK_FAILED) {
            controller_act(c, ACT_LAUNCH_ANYWAY, -1);
        }
        break;
    case ACT_STOP:
        if (job_is_running(c->job)) {
            job_event_add(c->job, EV_STOP, -1, -1, "stop asked for: stopping every rank");
            ctl_begin_stop(c, JOB_STOPPING, JOB_STOPPED, AFTER_END, false);
        } else if (job_is_stopping(c->job) && c->after != AFTER_QUIT) {
            c->after = AFTER_END;
            c->auto_restart = false;
        } else if (c->job->state == JOB_LAUNCHING || c->job->state == JOB_CHECKING) {
            ctl_finish(c, JOB_STOPPED);
        }
        break;
    case ACT_QUIT:
        if (job_is_running(c->job)) {
            ctl_begin_stop(c, JOB_STOPPING, JOB_STOPPED, AFTER_QUIT, false);
        } else if (job_is_stopping(c->job)) {
            c->after = AFTER_QUIT;
            c->auto_restart = false;
            job_stop_asked(c->job);
        } else if (c->job->state == JOB_LAUNCHING || c->job->state == JOB_CHECKING) {
            c->quit = true;
            ctl_finish(c, JOB_STOPPED);
        } else {
            c->quit = true;
        }
        break;
    }
}
