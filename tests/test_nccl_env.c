/* Unit tests for wire/nccl_env.c and --env's use of it (check/node_opts.c): an NCCL_* variable
 * the agent's bench_nccl would refuse is refused when the options are read, naming the key and
 * the rule (a typo is the user's, not node 0's NCCL failure), by the same rule the agent uses. */
#include <stdio.h>
#include <string.h>

#include "check/node_opts.h"
#include "wire/nccl_env.h"
#include "tap.h"

static void test_rule(void)
{
    char big[WIRE_NCCL_ENV_VALUE_MAX + 2];
    CHECK(wire_nccl_env_is_nccl("NCCL_DEBUG"));
    CHECK(!wire_nccl_env_is_nccl("nccl_debug") && !wire_nccl_env_is_nccl("OMP_NUM_THREADS"));
    CHECK(wire_nccl_env_bad("NCCL_DEBUG", "INFO") == NULL);
    CHECK(wire_nccl_env_bad("NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1") == NULL);
    CHECK(wire_nccl_env_bad("NCCL_debug", "INFO") != NULL);         /* a lower-case letter */
    CHECK(wire_nccl_env_bad("NCCL_", "x") != NULL);                 /* nothing after NCCL_ */
    CHECK(wire_nccl_env_bad("NCCL_DEBUG", "INFO\nX=1") != NULL);    /* a control byte */
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(wire_nccl_env_bad("NCCL_DEBUG", big) != NULL);            /* 257 bytes */
    big[WIRE_NCCL_ENV_VALUE_MAX] = '\0';
    CHECK(wire_nccl_env_bad("NCCL_DEBUG", big) == NULL);            /* 256 bytes */
}

static void test_env_option(void)
{
    struct node_opts o;
    char err[300], kv[64];
    node_opts_init(&o);
    CHECK_INT(node_opts_add_env(&o, "NCCL_DEBUG=INFO", err, sizeof err), 0);
    CHECK_INT(node_opts_add_env(&o, "nccl_whatever=1", err, sizeof err), 0);   /* not NCCL's: not sent */
    CHECK_INT(node_opts_add_env(&o, "Foo_bar=1", err, sizeof err), 0);
    err[0] = '\0';
    CHECK_INT(node_opts_add_env(&o, "NCCL_Socket_Ifname=eth0", err, sizeof err), -1);
    CHECK(strstr(err, "NCCL_Socket_Ifname") && strstr(err, "capital letters"));
    CHECK_INT(node_opts_add_env(&o, "NCCL_DEBUG_SUBSYS=a\tb", err, sizeof err), -1);
    CHECK(strstr(err, "NCCL_DEBUG_SUBSYS") && strstr(err, "control"));
    CHECK_INT((int)o.n_env, 3);
    /* 32 of them are sent; a 33rd is refused, the same key again is not another */
    for (int k = 1; k < WIRE_NCCL_ENV_MAX; k++) {
        snprintf(kv, sizeof kv, "NCCL_X%d=1", k);
        CHECK_INT(node_opts_add_env(&o, kv, err, sizeof err), 0);
    }
    CHECK_INT(node_opts_add_env(&o, "NCCL_DEBUG=WARN", err, sizeof err), 0);
    CHECK_INT(node_opts_add_env(&o, "NCCL_ONE_TOO_MANY=1", err, sizeof err), -1);
    CHECK(strstr(err, "NCCL_ONE_TOO_MANY") && strstr(err, "at most 32"));
    node_opts_done(&o);
}

int main(void)
{
    RUN(test_rule);
    RUN(test_env_option);
    return tap_done();
}
