/* The agent's "env_default" (agent_envdefault.h): NCCL's configuration file format as NCCL's
 * setEnvFile reads it, and the defaults left out where the rank's environment sets a name. */
#include <stdlib.h>
#include <string.h>

#include "agent/agent_envdefault.h"
#include "tap.h"

static void test_conf_sets(void)
{
    const char *t = "NCCL_SOCKET_IFNAME=eth0\nNCCL_DEBUG=WARN\n";
    CHECK(envdefault_conf_sets(t, strlen(t), "NCCL_DEBUG"));
    CHECK(envdefault_conf_sets(t, strlen(t), "NCCL_SOCKET_IFNAME"));
    CHECK(!envdefault_conf_sets(t, strlen(t), "NCCL_DEBUG_SUBSYS"));
    CHECK(!envdefault_conf_sets(t, strlen(t), "NCCL"));
    const char *c = "#NCCL_DEBUG=WARN\n NCCL_DEBUG=INFO\nNCCL_DEBUG\n";   /* NCCL trims nothing */
    CHECK(!envdefault_conf_sets(c, strlen(c), "NCCL_DEBUG"));
    CHECK(envdefault_conf_sets("NCCL_DEBUG=", 11, "NCCL_DEBUG"));
}

static void test_apply(void)
{
    cJSON *d = cJSON_Parse("{\"DDPT_TEST_A\":\"INFO\",\"DDPT_TEST_B\":\"INIT\"}");
    cJSON *env = cJSON_Parse("{\"X\":\"1\",\"NCCL_CONF_FILE\":\"/nonexistent/ddptop.conf\"}");
    unsetenv("DDPT_TEST_A");
    unsetenv("DDPT_TEST_B");
    cJSON *out = envdefault_apply(env, d);
    CHECK(out != NULL);
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(out, "DDPT_TEST_A")->valuestring, "INFO");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(out, "X")->valuestring, "1");
    cJSON_Delete(out);
    setenv("DDPT_TEST_B", "x", 1);                 /* the agent's environment sets one */
    CHECK(envdefault_apply(env, d) == NULL);
    unsetenv("DDPT_TEST_B");
    cJSON_AddStringToObject(env, "DDPT_TEST_A", "WARN");   /* so does the request */
    CHECK(envdefault_apply(env, d) == NULL);
    CHECK(envdefault_apply(env, NULL) == NULL);
    cJSON_Delete(env);
    cJSON_Delete(d);
}

int main(void)
{
    RUN(test_conf_sets);
    RUN(test_apply);
    return tap_done();
}
