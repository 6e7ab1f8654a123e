/* Forced into every file compiled against the Debian 11 sysroot (the Makefile's -include): the
 * few symbols whose default version in glibc 2.31 is newer than the 2.28 floor, bound to the
 * older version that every glibc since the architecture's first has. glibc 2.29 gave exp,
 * exp2, log, log2 and pow new versions (faster, and without the SVID error handling nobody
 * here asks for); the old ones compute the same results. tests/it_agent_glibc.sh and
 * it_nodes_other's tarball check fail when something else above 2.28 comes in: add it here,
 * or call the system call instead (util/close_range.c). */
#ifndef DDPTOP_GLIBC_FLOOR_H
#define DDPTOP_GLIBC_FLOOR_H

#if defined(__x86_64__)
#define DDPTOP_GLIBC_OLD "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define DDPTOP_GLIBC_OLD "GLIBC_2.17"
#endif

#ifdef DDPTOP_GLIBC_OLD
__asm__(".symver exp,exp@" DDPTOP_GLIBC_OLD);
__asm__(".symver exp2,exp2@" DDPTOP_GLIBC_OLD);
__asm__(".symver log,log@" DDPTOP_GLIBC_OLD);
__asm__(".symver log2,log2@" DDPTOP_GLIBC_OLD);
__asm__(".symver pow,pow@" DDPTOP_GLIBC_OLD);
#endif

#endif
