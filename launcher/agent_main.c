/* ddptop-agent: entry point (placeholder until the agent lands). */
#include <stdio.h>

#include "version.h"

int main(void)
{
    printf("ddptop-agent %s\n", DDPTOP_VERSION);
    return 0;
}
