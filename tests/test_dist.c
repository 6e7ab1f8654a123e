/* Tests for reading the rank environment (runtime/dist.c): torchrun's variables, defaults for
 * a world of one, and clear errors for a broken multi-rank environment. */
#include "tap.h"
#include "dist.h"

#include <stdlib.h>

static const char *vars[] = { "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                              "MASTER_ADDR", "MASTER_PORT", "DDPTOP_JOB_TOKEN" };

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_no_variables_is_a_world_of_one(void)
{
    struct dist_env e;
    char err[256] = "";
    clear_env();
    CHECK_INT(dist_env_read(&e, err, sizeof err), 0);
    CHECK_INT(e.rank, 0);
    CHECK_INT(e.world_size, 1);
    CHECK_INT(e.local_rank, 0);
    CHECK_INT(e.local_world_size, 1);
    CHECK_STR(e.master_addr, "127.0.0.1");
    CHECK_INT(e.master_port, 29500);
    CHECK_STR(e.token, "");
}

static void test_torchrun_variables_are_read(void)
{
    struct dist_env e;
    char err[256] = "";
    clear_env();
    setenv("RANK", "5", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "29501", 1);
    setenv("DDPTOP_JOB_TOKEN", "abc123", 1);
    CHECK_INT(dist_env_read(&e, err, sizeof err), 0);
    CHECK_INT(e.rank, 5);
    CHECK_INT(e.world_size, 8);
    CHECK_INT(e.local_rank, 1);
    CHECK_INT(e.local_world_size, 4);
    CHECK_STR(e.master_addr, "10.0.0.1");
    CHECK_INT(e.master_port, 29501);
    CHECK_STR(e.token, "abc123");
}

static void expect_error(const char *want)
{
    struct dist_env e;
    char err[256] = "";
    CHECK_INT(dist_env_read(&e, err, sizeof err), -1);
    CHECK_STR(err, want);
}

static void test_bad_environments_are_named(void)
{
    clear_env();
    setenv("RANK", "4", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    expect_error("RANK=4 is not below WORLD_SIZE=4; ranks run from 0 to WORLD_SIZE-1");
    setenv("RANK", "x1", 1);
    expect_error("RANK='x1' is not an integer in [0, 1048575]; fix the rank environment (the "
                 "launcher sets it)");
    setenv("RANK", "1", 1);
    setenv("MASTER_PORT", "70000", 1);
    expect_error("MASTER_PORT='70000' is not an integer in [1, 65535]; fix the rank environment "
                 "(the launcher sets it)");
    unsetenv("MASTER_PORT");
    expect_error("WORLD_SIZE=4 but MASTER_PORT is not set; a multi-rank job needs MASTER_ADDR "
                 "and MASTER_PORT (rank 0's address and a free port)");
    setenv("MASTER_PORT", "29500", 1);
    unsetenv("MASTER_ADDR");
    expect_error("WORLD_SIZE=4 but MASTER_ADDR is not set; a multi-rank job needs MASTER_ADDR "
                 "and MASTER_PORT (rank 0's address and a free port)");
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    unsetenv("RANK");
    expect_error("WORLD_SIZE=4 but RANK is not set; every rank of a multi-rank job needs RANK "
                 "(0..3)");
    setenv("RANK", "1", 1);
    setenv("LOCAL_RANK", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    expect_error("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
    clear_env();
    setenv("WORLD_SIZE", "0", 1);
    expect_error("WORLD_SIZE='0' is not an integer in [1, 1048576]; fix the rank environment "
                 "(the launcher sets it)");
}

static void test_world_of_one_may_name_its_store(void)
{
    struct dist_env e;
    char err[256] = "";
    clear_env();
    setenv("WORLD_SIZE", "1", 1);
    setenv("MASTER_PORT", "40000", 1);
    CHECK_INT(dist_env_read(&e, err, sizeof err), 0);
    CHECK_INT(e.master_port, 40000);
    CHECK_STR(e.master_addr, "127.0.0.1");
    clear_env();
}

int main(void)
{
    RUN(test_no_variables_is_a_world_of_one);
    RUN(test_torchrun_variables_are_read);
    RUN(test_bad_environments_are_named);
    RUN(test_world_of_one_may_name_its_store);
    return tap_done();
}
