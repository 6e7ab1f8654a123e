/* The agent's interface facts: InfiniBand ports read from a fake sysfs tree (this machine has
 * no HCA), and the real interface list's loopback entry. */
#include "agent/agent_ifaces.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_ib_ports(void)
{
    char root[] = "/tmp/ddptop-test-ib-XXXXXX", p[300];
    CHECK(mkdtemp(root) != NULL);
    cJSON *ib = agent_ifaces_ib(root);
    CHECK_INT(cJSON_GetArraySize(ib), 0); /* no /class/infiniband: an empty list, not an error */
    cJSON_Delete(ib);
    const char *dirs[] = { "class", "class/infiniband", "class/infiniband/mlx5_1",
                           "class/infiniband/mlx5_1/ports", "class/infiniband/mlx5_1/ports/1",
                           "class/infiniband/mlx5_0", "class/infiniband/mlx5_0/ports",
                           "class/infiniband/mlx5_0/ports/1" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        mkdir(p, 0755);
    }
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_0/ports/1/state", root);
    write_file(p, "4: ACTIVE\n");
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_0/ports/1/rate", root);
    write_file(p, "200 Gb/sec (4X HDR)\n");
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_0/ports/1/link_layer", root);
    write_file(p, "InfiniBand\n");
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_1/ports/1/state", root);
    write_file(p, "1: DOWN\n");
    ib = agent_ifaces_ib(root);
    CHECK_INT(cJSON_GetArraySize(ib), 2);
    cJSON *a = cJSON_GetArrayItem(ib, 0), *b = cJSON_GetArrayItem(ib, 1);
    CHECK_STR(str(a, "name"), "mlx5_0"); /* sorted, whatever readdir's order */
    CHECK_INT(cJSON_GetObjectItemCaseSensitive(a, "port")->valueint, 1);
    CHECK_STR(str(a, "state"), "ACTIVE");
    CHECK_STR(str(a, "rate"), "200 Gb/sec");
    CHECK_STR(str(a, "link_layer"), "InfiniBand");
    CHECK_STR(str(b, "name"), "mlx5_1");
    CHECK_STR(str(b, "state"), "DOWN");
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(b, "rate"))); /* unknown is null */
    cJSON_Delete(ib);
    snprintf(p, sizeof p, "rm -rf '%s'", root);
    CHECK_INT(system(p), 0);
}

static void test_loopback_listed(void)
{
    cJSON *list = agent_ifaces_list(), *e, *lo = NULL;
    cJSON_ArrayForEach(e, list)
        if (str(e, "name") && strcmp(str(e, "name"), "lo") == 0) lo = e;
    CHECK(lo != NULL);
    if (lo) {
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lo, "loopback")));
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lo, "up")));
        cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(lo, "ipv4"), 0);
        CHECK_STR(cJSON_IsString(a) ? a->valuestring : NULL, "127.0.0.1/8");
        /* lo has no link speed: null, never 0 */
        CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(lo, "speed_mbps")));
        FILE *f = fopen("/sys/class/net/lo/mtu", "r");
        int mtu = -1;
        if (f && fscanf(f, "%d", &mtu) != 1) mtu = -1;
        if (f) fclose(f);
        CHECK_INT(cJSON_GetObjectItemCaseSensitive(lo, "mtu")->valueint, mtu);
    }
    cJSON_Delete(list);
}

int main(void)
{
    RUN(test_ib_ports);
    RUN(test_loopback_listed);
    return tap_done();
}
