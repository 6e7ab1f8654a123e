/* The protocol's signal table (signals.h), shared by ddptop-agent and the controller. */
#include "signals.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int no;
    const char *name;
    int requestable;   /* a signal request may send it (signals_parse_request) */
} sig_table[] = {
    { SIGHUP, "SIGHUP", 1 },   { SIGINT, "SIGINT", 1 },   { SIGQUIT, "SIGQUIT", 1 },
    { SIGILL, "SIGILL", 0 },   { SIGTRAP, "SIGTRAP", 0 }, { SIGABRT, "SIGABRT", 0 },
    { SIGBUS, "SIGBUS", 0 },   { SIGFPE, "SIGFPE", 0 },   { SIGKILL, "SIGKILL", 1 },
    { SIGUSR1, "SIGUSR1", 1 }, { SIGSEGV, "SIGSEGV", 0 }, { SIGUSR2, "SIGUSR2", 1 },
    { SIGPIPE, "SIGPIPE", 0 }, { SIGALRM, "SIGALRM", 0 }, { SIGTERM, "SIGTERM", 1 },
#ifdef SIGSTKFLT
    { SIGSTKFLT, "SIGSTKFLT", 0 },
#endif
    { SIGCHLD, "SIGCHLD", 0 }, { SIGCONT, "SIGCONT", 1 }, { SIGSTOP, "SIGSTOP", 1 },
    { SIGTSTP, "SIGTSTP", 0 }, { SIGTTIN, "SIGTTIN", 0 }, { SIGTTOU, "SIGTTOU", 0 },
    { SIGURG, "SIGURG", 0 },   { SIGXCPU, "SIGXCPU", 0 }, { SIGXFSZ, "SIGXFSZ", 0 },
    { SIGVTALRM, "SIGVTALRM", 0 }, { SIGPROF, "SIGPROF", 0 }, { SIGWINCH, "SIGWINCH", 0 },
    { SIGIO, "SIGIO", 0 },     { SIGPWR, "SIGPWR", 0 },   { SIGSYS, "SIGSYS", 0 },
};

#define N_SIGS (sizeof sig_table / sizeof sig_table[0])

const char *signals_name(int signo)
{
    for (size_t i = 0; i < N_SIGS; i++)
        if (sig_table[i].no == signo) return sig_table[i].name;
    return NULL;
}

const char *signals_label(int signo)
{
    static _Thread_local char buf[32];
    const char *name = signals_name(signo);
    if (name) return name;
    snprintf(buf, sizeof buf, "signal %d", signo);
    return buf;
}

int signals_parse_request(const char *name)
{
    if (strncmp(name, "SIG", 3) == 0) name += 3;
    for (size_t i = 0; i < N_SIGS; i++)
        if (sig_table[i].requestable && strcmp(sig_table[i].name + 3, name) == 0) return sig_table[i].no;
    return 0;
}
