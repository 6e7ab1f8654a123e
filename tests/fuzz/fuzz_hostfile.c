/* libFuzzer harness for the hostfile parser and the hostlist expander (launcher/hosts/:
 * hostfile.c, hostfile_build.c, hostlist.c). Built and run by `make fuzz-programs`, `make fuzz` and
 * `make test` (docs/testing.md, "Fuzzing"). With -DFUZZ_SMOKE_MAIN, a main() without libFuzzer
 * feeds mutations of the seeds below instead (any C compiler).
 *
 * Besides "no crash, no leak", it checks what callers rely on: success means at least one host,
 * each with a valid name and the source set; failure means an empty list and a message that
 * starts with the file name. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts/hostfile.h"
#include "hosts/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_hostfile: invariant failed: %s\n", #cond); abort(); } } while (0)

static void check_hostfile(const char *text)
{
    struct hostlist hl;
    char err[512];
    err[0] = '\0';
    int rc = hostfile_parse_text("fuzz.txt", text, &hl, err, sizeof err);
    if (rc == 0) {
        EXPECT(hl.n > 0 && hl.hosts);
        for (size_t i = 0; i < hl.n; i++) {
            const struct host *h = &hl.hosts[i];
            EXPECT(h->name && h->name[0] && h->name[0] != '-');
            EXPECT(h->source && strcmp(h->source, "fuzz.txt") == 0);
            EXPECT(h->line >= 1);
            EXPECT(h->port >= 0 && h->port <= 65535 && h->slots >= 0);
            for (const char *p = h->name; *p; p++) EXPECT((unsigned char)*p > 0x20);
            for (size_t k = 0; k < h->n_env; k++)
                EXPECT(host_env_get(h, h->env[k].key) != NULL);
        }
        hostlist_free(&hl);
    } else {
        EXPECT(rc == -1 && hl.n == 0 && hl.hosts == NULL);
        EXPECT(strncmp(err, "fuzz.txt", 8) == 0);
    }
}

static void check_expand(const char *expr)
{
    char **names = NULL, err[512];
    int n = hostlist_expand(expr, &names, err, sizeof err);
    if (n < 0) {
        EXPECT(names == NULL && err[0]);
        return;
    }
    EXPECT(n > 0 && n <= 100000);
    for (int i = 0; i < n; i++) {
        EXPECT(names[i] != NULL);
        free(names[i]);
    }
    free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';                 /* the parser takes C strings; a NUL just ends it */
    check_hostfile(text);
    text[strcspn(text, "\n")] = '\0';  /* the first line, as a hostlist expression */
    check_expand(text);
    free(text);
    return 0;
}

#ifdef FUZZ_SMOKE_MAIN
static const char *const seeds[] = {
    "gpu[01-04,07] slots=8\n",
    "alice@gpu02:2222 slots=4 NCCL_SOCKET_IFNAME=eth1 # comment\n",
    "[::1]:2222\n::1\n[fe80::1%eth0]:22 user=bob identity=~/.ssh/id\n",
    "worker-1 slots=4\nworker-2 slots=4\n",
    "rack[1-2]-n[001-003]:2200 port=2200\n",
    "a[1-3]b[4-6]c[7-9]\n# x\n\n  n1\tslots=1\r\n",
    "gpu[04-01]\n", "gpu[01-100]\n", "gpu[1,,2]\n", "x slots=0\n", "x slot=1\n",
};

#include "smoke_main.h"

int main(int argc, char **argv)
{
    static const char alphabet[] = "[]-,:@=#%. \t\n\r0123456789abgpuSLOTslots^_\x01\x7f\xff";
    int rc = fuzz_smoke_run(argc, argv, "fuzz_hostfile", seeds, sizeof seeds / sizeof seeds[0], alphabet,
                            sizeof alphabet - 1);
    return rc;
}
#endif
