/* Unit tests for a bridge's fresh SYN after "no route to host" (ssh_conn.c, UNREACH_AGAIN_MS):
 * after a partition the node's neighbour entry fails every 3 s (three ARP requests a second
 * apart) and a fresh SYN at once makes the kernel ask again, so a link that comes back is
 * found within a second; an answer in the try's first second ends the try as before, and a
 * node that answers every SYN at once with "no route" gets no more than one a second. */
#include <errno.h>
#include <stdio.h>

#include "ssh/ssh_conn_int.h"
#include "tap.h"

static void test_failed_neighbour_is_asked_again_at_once(void)
{
    /* the try began at 10 s; the kernel gave up on ARP 3 s later, then every 3 s */
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 13000, 10000, 0) == 13000);
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 16000, 10000, 13000) == 16000);
    CHECK(ssh_conn_unreach_next(ENETUNREACH, 19000, 10000, 16000) == 19000);
    CHECK(ssh_conn_unreach_next(EHOSTDOWN, 22000, 10000, 19000) == 22000);
}

static void test_other_answers_end_the_try(void)
{
    CHECK(ssh_conn_unreach_next(ECONNREFUSED, 13000, 10000, 0) == -1);
    CHECK(ssh_conn_unreach_next(ETIMEDOUT, 13000, 10000, 0) == -1);
    /* "no route" in the try's first second (a route, a router's ICMP): as before */
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 10000, 10000, 0) == -1);
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 10999, 10000, 0) == -1);
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 11000, 10000, 0) == 11000);
}

static void test_instant_no_route_is_paced(void)
{
    /* A node that answers every SYN at once with "no route", from a second into the try on,
     * for a minute: the SYNs the schedule sends, the way ssh_conn.c follows it (a later one
     * sets the time of the last, as one sent now does). */
    int64_t start = 0, now = 1000, last = 0;
    int syns = 0;
    while (now < 61000) {
        int64_t at = ssh_conn_unreach_next(EHOSTUNREACH, now, start, last);
        CHECK(at >= now);
        if (at < now) break;
        now = at;
        last = now;
        syns++; /* sent, answered at once */
    }
    CHECK(syns >= 59 && syns <= 61);
    if (syns < 59 || syns > 61) printf("# %d SYNs in a minute\n", syns);
    /* the one after a SYN a moment ago waits out the second */
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 5001, 0, 5000) == 6000);
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 5999, 0, 5000) == 6000);
    CHECK(ssh_conn_unreach_next(EHOSTUNREACH, 6000, 0, 5000) == 6000);
}

int main(void)
{
    RUN(test_failed_neighbour_is_asked_again_at_once);
    RUN(test_other_answers_end_the_try);
    RUN(test_instant_no_route_is_paced);
    return tap_done();
}
