/* Unit tests for launcher/wire/signals.c: the one table of signal names that ddptop-agent and
 * the controller share. Names agree with the C library's abbreviations (sigabbrev_np) for every
 * signal in the table; numbers without a name read "signal N" for people and NULL on the wire; a signal
 * request accepts "TERM" and "SIGTERM" but only for the signals a request may send. */
#include <signal.h>
#include <string.h>

#include "tap.h"
#include "wire/signals.h"

static void test_names_match_libc(void)
{
    int named = 0;
    for (int s = 1; s < 32; s++) {
        const char *n = signals_name(s);
        const char *abbrev = sigabbrev_np(s);
        if (!n) continue;
        named++;
        CHECK(strncmp(n, "SIG", 3) == 0);
        /* glibc calls 29 by its System V name, POLL; IO is the same signal */
        CHECK_STR(n + 3, s == SIGIO ? "IO" : abbrev);
    }
    CHECK(named >= 30);
    CHECK_STR(signals_name(SIGSEGV), "SIGSEGV");
    CHECK_STR(signals_name(SIGKILL), "SIGKILL");
}

static void test_unknown(void)
{
    CHECK(signals_name(0) == NULL);
    CHECK(signals_name(64) == NULL);
    CHECK(signals_name(-1) == NULL);
    CHECK_STR(signals_label(64), "signal 64");
    CHECK_STR(signals_label(0), "signal 0");
    CHECK_STR(signals_label(SIGBUS), "SIGBUS");
}

static void test_request_parse(void)
{
    CHECK_INT(signals_parse_request("TERM"), SIGTERM);
    CHECK_INT(signals_parse_request("SIGTERM"), SIGTERM);
    CHECK_INT(signals_parse_request("KILL"), SIGKILL);
    CHECK_INT(signals_parse_request("CONT"), SIGCONT);
    CHECK_INT(signals_parse_request("STOP"), SIGSTOP);
    CHECK_INT(signals_parse_request("USR1"), SIGUSR1);
    CHECK_INT(signals_parse_request("HUP"), SIGHUP);
    /* faults are named in exit messages but never sent on request */
    CHECK_INT(signals_parse_request("SEGV"), 0);
    CHECK_INT(signals_parse_request("SIGBUS"), 0);
    CHECK_INT(signals_parse_request("term"), 0);
    CHECK_INT(signals_parse_request(""), 0);
    CHECK_INT(signals_parse_request("SIG"), 0);
    CHECK_INT(signals_parse_request("9"), 0);
}

static void test_request_round_trip(void)
{
    /* every requestable signal parses back from its own name */
    const int req[] = { SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2, SIGTERM, SIGCONT, SIGSTOP };
    for (size_t i = 0; i < sizeof req / sizeof *req; i++)
        CHECK_INT(signals_parse_request(signals_name(req[i])), req[i]);
}

int main(void)
{
    RUN(test_names_match_libc);
    RUN(test_unknown);
    RUN(test_request_parse);
    RUN(test_request_round_trip);
    return tap_done();
}
