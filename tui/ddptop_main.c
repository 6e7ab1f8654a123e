/* ddptop: entry point (placeholder until the check command lands). */
#include <stdio.h>
#include <string.h>

#include "version.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("ddptop %s\n", DDPTOP_VERSION);
        return 0;
    }
    fprintf(stderr, "usage: ddptop check HOSTFILE\n");
    return 2;
}
