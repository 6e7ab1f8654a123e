/* Interfaces from getifaddrs plus /sys/class/net/<if>/{operstate,mtu,speed}, and InfiniBand
 * ports from /sys/class/infiniband: see agent_ifaces.h. Values the kernel does not give (a
 * virtual interface's speed) are null, never 0. */
#include "agent_ifaces.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/util.h"

/* First line of a small sysfs file, trimmed; NULL when absent or unreadable (reading "speed"
 * of a virtual interface fails with EINVAL). */
static char *sysfs_line(const char *fmt, const char *a, const char *b)
{
    char *path = xasprintf(fmt, a, b);
    FILE *f = fopen(path, "re");
    free(path);
    if (!f) return NULL;
    char buf[256];
    char *r = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!r) return NULL;
    buf[strcspn(buf, "\n")] = '\0';
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) *p = '?';
    return buf[0] ? xstrdup(buf) : NULL;
}

static void add_sysfs_int(cJSON *o, const char *key, const char *ifname, const char *file)
{
    char *s = sysfs_line("/sys/class/net/%s/%s", ifname, file);
    char *end = NULL;
    long v = s ? strtol(s, &end, 10) : -1;
    if (s && end != s && *end == '\0' && v > 0) cJSON_AddNumberToObject(o, key, (double)v);
    else cJSON_AddNullToObject(o, key);
    free(s);
}

static int prefix_len(const struct sockaddr *mask)
{
    const unsigned char *b;
    size_t n;
    int bits = 0;
    if (!mask) return 0;
    if (mask->sa_family == AF_INET) {
        b = (const unsigned char *)&((const struct sockaddr_in *)(const void *)mask)->sin_addr;
        n = 4;
    } else {
        b = (const unsigned char *)&((const struct sockaddr_in6 *)(const void *)mask)->sin6_addr;
        n = 16;
    }
    for (size_t i = 0; i < n; i++)
        for (int k = 7; k >= 0; k--)
            bits += (b[i] >> k) & 1;
    return bits;
}

static cJSON *iface_entry(cJSON *list, const char *name, unsigned flags)
{
    cJSON *e;
    cJSON_ArrayForEach(e, list) {
        cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return e;
    }
    e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name);
    /* Up means administratively up with carrier (IFF_RUNNING), as a user means it; operstate
     * alone says "unknown" for lo and many virtual interfaces. */
    cJSON_AddBoolToObject(e, "up", (flags & IFF_UP) && (flags & IFF_RUNNING));
    char *op = sysfs_line("/sys/class/net/%s/%s", name, "operstate");
    if (op) cJSON_AddStringToObject(e, "operstate", op);
    else cJSON_AddNullToObject(e, "operstate");
    free(op);
    cJSON_AddBoolToObject(e, "loopback", (flags & IFF_LOOPBACK) != 0);
    cJSON_AddItemToObject(e, "ipv4", cJSON_CreateArray());
    cJSON_AddItemToObject(e, "ipv6", cJSON_CreateArray());
    add_sysfs_int(e, "mtu", name, "mtu");
    add_sysfs_int(e, "speed_mbps", name, "speed");
    cJSON_AddItemToArray(list, e);
    return e;
}

cJSON *agent_ifaces_list(void)
{
    struct ifaddrs *ifa = NULL;
    cJSON *list = cJSON_CreateArray();
    if (getifaddrs(&ifa) < 0) return list;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_name) continue;
        cJSON *e = iface_entry(list, i->ifa_name, i->ifa_flags);
        if (!i->ifa_addr) continue;
        int fam = i->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6) continue;
        char addr[INET6_ADDRSTRLEN];
        const void *src = fam == AF_INET
            ? (const void *)&((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr
            : (const void *)&((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr;
        if (!inet_ntop(fam, src, addr, sizeof addr)) continue;
        char *s = xasprintf("%s/%d", addr, prefix_len(i->ifa_netmask));
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(e, fam == AF_INET ? "ipv4" : "ipv6"),
                             cJSON_CreateString(s));
        free(s);
    }
    freeifaddrs(ifa);
    return list;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entry names of a directory (skipping dot files); returns the count. */
static int list_dir(const char *path, char ***out)
{
    DIR *d = opendir(path);
    int n = 0, cap = 0;
    *out = NULL;
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            *out = xrealloc(*out, (size_t)cap * sizeof **out);
        }
        (*out)[n++] = xstrdup(de->d_name);
    }
    closedir(d);
    if (n) qsort(*out, (size_t)n, sizeof **out, name_cmp);
    return n;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

cJSON *agent_ifaces_ib(const char *sysfs_root)
{
    cJSON *list = cJSON_CreateArray();
    char *base = xasprintf("%s/class/infiniband", sysfs_root ? sysfs_root : "/sys");
    char **devs;
    int ndev = list_dir(base, &devs);
    for (int d = 0; d < ndev; d++) {
        char *pdir = xasprintf("%s/%s/ports", base, devs[d]);
        char **ports;
        int nport = list_dir(pdir, &ports);
        for (int p = 0; p < nport; p++) {
            char *dir = xasprintf("%s/%s", pdir, ports[p]);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", devs[d]);
            cJSON_AddNumberToObject(e, "port", atoi(ports[p]));
            /* state reads "4: ACTIVE"; rate "200 Gb/sec (4X HDR)": keep the words a user knows. */
            char *state = sysfs_line("%s/%s", dir, "state");
            char *s = state ? strchr(state, ':') : NULL;
            s = s ? s + 1 + strspn(s + 1, " ") : state;
            if (s && *s) cJSON_AddStringToObject(e, "state", s);
            else cJSON_AddNullToObject(e, "state");
            free(state);
            char *rate = sysfs_line("%s/%s", dir, "rate");
            if (rate) {
                char *paren = strstr(rate, " (");
                if (paren) *paren = '\0';
                cJSON_AddStringToObject(e, "rate", rate);
            } else {
                cJSON_AddNullToObject(e, "rate");
            }
            free(rate);
            char *ll = sysfs_line("%s/%s", dir, "link_layer");
            if (ll) cJSON_AddStringToObject(e, "link_layer", ll);
            else cJSON_AddNullToObject(e, "link_layer");
            free(ll);
            cJSON_AddItemToArray(list, e);
            free(dir);
        }
        free_list(ports, nport);
        free(pdir);
    }
    free_list(devs, ndev);
    free(base);
    return list;
}
