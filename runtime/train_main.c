/* ddptop-train: entry point (placeholder until the runtime lands). */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "ddptop-train: not built yet\n");
    return 1;
}
