/* The preflight's options (check.h): defaults and their release. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

void check_opts_init(struct check_opts *o)
{
    memset(o, 0, sizeof *o);
    o->fanout = 64;
    o->ssh.timeout_s = 10;
    o->ssh.login_timeout_s = 60;
    o->max_skew_ms = 500;
    o->master_port = 29500;
}

void check_opts_done(struct check_opts *o)
{
    for (size_t i = 0; i < o->n_env; i++) {
        free(o->env[i].key);
        free(o->env[i].value);
    }
    free(o->env);
    free((char *)o->ssh.agent_local);
    memset(o, 0, sizeof *o);
}
