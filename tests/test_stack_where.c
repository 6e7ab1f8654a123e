/* Unit tests for launcher/job/stack_where.c: the phrase for where a rank is, read from dumps as
 * py-spy (with and without --native), gdb and the agent's /proc fallback write them (a table of
 * texts and the phrase each must give), and the grouping of a job's ranks for the root cause of
 * a hang. */
#include <stdlib.h>
#include <string.h>

#include "job/stack_where.h"
#include "tap.h"

struct where_case {
    const char *name, *tool, *text;
    int pid;
    const char *want;   /* NULL: no phrase */
};

/* gdb on a gloo rank waiting for its all_reduce: the main thread waits on the work object,
 * the collective itself runs on one of gloo's threads (gdb lists the highest thread first). */
static const char gdb_gloo[] =
    "[Thread debugging using libthread_db enabled]\n"
    "0x00007f3c5a8a2e96 in __futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x0, op=393, expected=0, futex_word=0x55d1) at ./nptl/futex-internal.c:57\n"
    "\n"
    "Thread 3 (Thread 0x7f3c3bfff6c0 (LWP 4244) \"python3\"):\n"
    "#0  0x00007f3c5a8a2e96 in __futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x0, op=393, expected=0, futex_word=0x55d1) at ./nptl/futex-internal.c:57\n"
    "#1  __futex_abstimed_wait_common (cancel=true, private=0, abstime=0x0, clockid=0, expected=0, futex_word=0x55d1) at ./nptl/futex-internal.c:87\n"
    "#2  0x00007f3c5a8a55d8 in __pthread_cond_wait_common (abstime=0x0, clockid=0, mutex=0x55d2, cond=0x55d1) at ./nptl/pthread_cond_wait.c:503\n"
    "#3  ___pthread_cond_wait (cond=0x55d1, mutex=0x55d2) at ./nptl/pthread_cond_wait.c:618\n"
    "#4  0x00007f3c4a6d8d00 in std::condition_variable::wait(std::unique_lock<std::mutex>&) () from /lib/x86_64-linux-gnu/libstdc++.so.6\n"
    "#5  0x00007f3c4c1a2b11 in gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /usr/lib/x86_64-linux-gnu/libgloo.so.0\n"
    "#6  0x00007f3c4c17e0e2 in gloo::allreduce(gloo::AllreduceOptions&) () from /usr/lib/x86_64-linux-gnu/libgloo.so.0\n"
    "#7  0x00007f3c4f3a1c55 in c10d::(anonymous namespace)::AsyncAllreduceWork::run() () from /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "#8  0x00007f3c4f38e1f1 in c10d::ProcessGroupGloo::runLoop(int) () from /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "#9  0x00007f3c4a6df4a3 in ?? () from /lib/x86_64-linux-gnu/libstdc++.so.6\n"
    "#10 0x00007f3c5a8a6044 in start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442\n"
    "\n"
    "Thread 2 (Thread 0x7f3c3c7ff6c0 (LWP 4243) \"python3\"):\n"
    "#0  0x00007f3c5a8a2e96 in __futex_abstimed_wait_common64 (...) at ./nptl/futex-internal.c:57\n"
    "#1  0x00007f3c4f38e0a0 in c10d::ProcessGroupGloo::runLoop(int) () from /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "\n"
    "Thread 1 (Thread 0x7f3c5a7f3040 (LWP 4242) \"python3\"):\n"
    "#0  0x00007f3c5a8a2e96 in __futex_abstimed_wait_common64 (private=0, cancel=true) at ./nptl/futex-internal.c:57\n"
    "#1  0x00007f3c5a8a55d8 in __pthread_cond_wait_common (abstime=0x0) at ./nptl/pthread_cond_wait.c:503\n"
    "#2  0x00007f3c4f3821aa in c10d::ProcessGroupGloo::AsyncWork::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "#3  0x00007f3c4e2b4c0e in ?? () from /usr/lib/python3/dist-packages/torch/lib/libtorch_python.so\n"
    "#4  0x000055d0c5a1b2c3 in ?? ()\n"
    "#5  0x000055d0c59f0cda in _PyEval_EvalFrameDefault ()\n"
    "[Inferior 1 (process 4242) detached]\n";

/* The same on Debian's torch 1.13 and gloo, as this machine's gdb wrote it: gloo's collective
 * code has no symbols, so only the wait and a receive are named. */
static const char gdb_gloo_debian[] =
    "[New LWP 26699]\n"
    "[Thread debugging using libthread_db enabled]\n"
    "__futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x0, op=393, expected=0, futex_word=0x3ab14d68) at ./nptl/futex-internal.c:57\n"
    "57\t./nptl/futex-internal.c: No such file or directory.\n"
    "\n"
    "Thread 6 (Thread 0x7f9ce59b76c0 (LWP 26706) \"python3\"):\n"
    "#0  __futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x7f9ce59b6840, op=137, expected=0, futex_word=0x7f9cd4000db8) at ./nptl/futex-internal.c:57\n"
    "#4  ___pthread_cond_clockwait64 (abstime=<optimized out>, clockid=1, mutex=0x7f9cd4000d68, cond=0x7f9cd4000d90) at ./nptl/pthread_cond_wait.c:682\n"
    "#6  0x00007f9d0192bd6b in gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /lib/libgloo.so.0\n"
    "#7  0x00007f9d018fb8f7 in ?? () from /lib/libgloo.so.0\n"
    "#8  0x00007f9d07c6ceb5 in ?? () from /lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "#9  0x00007f9d07c6c8ad in c10d::ProcessGroupGloo::AsyncWork::execute(c10::intrusive_ptr<c10d::ProcessGroupGloo::AsyncWork, c10::detail::intrusive_target_default_null_type<c10d::ProcessGroupGloo::AsyncWork> >) () from /lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "#10 0x00007f9d07c6c9d4 in c10d::ProcessGroupGloo::runLoop(int) () from /lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "#11 0x00007f9d030d44a3 in ?? () from /lib/x86_64-linux-gnu/libstdc++.so.6\n"
    "#12 0x00007f9d0c0641f5 in start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442\n"
    "\n"
    "Thread 1 (Thread 0x7f4296d4a040 (LWP 32213) \"python3\"):\n"
    "#0  __futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x0, op=393, expected=0, futex_word=0x37711bb8) at ./nptl/futex-internal.c:57\n"
    "#2  0x00007f4296dd0f7b in __GI___futex_abstimed_wait_cancelable64 (futex_word=futex_word@entry=0x37711bb8, expected=expected@entry=0) at ./nptl/futex-internal.c:139\n"
    "#4  ___pthread_cond_wait (cond=0x37711b90, mutex=0x37711b68) at ./nptl/pthread_cond_wait.c:618\n"
    "#5  0x00007f42928c2843 in c10d::Work::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
    "#6  0x00007f42961a9b4e in ?? () from /lib/x86_64-linux-gnu/libtorch_python.so.1.13\n"
    "#8  0x0000000000547b96 in ?? ()\n"
    "#9  0x0000000000517fc3 in _PyObject_MakeTpCall ()\n"
    "#10 0x000000000052b9e0 in _PyEval_EvalFrameDefault ()\n"
    "#11 0x00000000005236bb in PyEval_EvalCode ()\n";

/* gdb on a Python rank frozen by os.kill(os.getpid(), SIGSTOP) (no Python debug symbols). */
static const char gdb_stopped[] =
    "Thread 2 (Thread 0x7f1 (LWP 5001) \"python3\"):\n"
    "#0  0x00007f in __futex_abstimed_wait_common64 () at ./nptl/futex-internal.c:57\n"
    "#1  0x00007f in c10d::ProcessGroupGloo::runLoop(int) () from /usr/lib/libtorch_cpu.so\n"
    "\n"
    "Thread 1 (Thread 0x7f0 (LWP 5000) \"python3\"):\n"
    "#0  0x00007f5b1e0ee0e7 in kill () at ../sysdeps/unix/syscall-template.S:120\n"
    "#1  0x000055f4a2b6c4a1 in ?? ()\n"
    "#2  0x000000000053acbc in PyObject_Vectorcall ()\n"
    "#3  0x000055f4a2a9a1c8 in _PyEval_EvalFrameDefault ()\n"
    "#4  0x000055f4a2b7d3a0 in ?? ()\n";

/* gdb on Debian's python3.11 sleeping in time.sleep, as this machine's gdb wrote it. */
static const char gdb_sleep[] =
    "Thread 2 (Thread 0x7f645edff6c0 (LWP 20698) \"python3\"):\n"
    "#0  __futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x0, op=393, expected=0, futex_word=0x7f64713f6c60) at ./nptl/futex-internal.c:57\n"
    "#5  0x00007f646f48c8ab in ?? () from /lib/x86_64-linux-gnu/libopenblas.so.0\n"
    "#6  0x00007f6480f8a1f5 in start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442\n"
    "\n"
    "Thread 1 (Thread 0x7f6480f00040 (LWP 20618) \"python3\"):\n"
    "#0  0x00007f6480fd0545 in __GI___clock_nanosleep (clock_id=1, flags=1, req=0x7fff32069e60, rem=0x0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48\n"
    "#1  0x00000000005d64b4 in ?? ()\n"
    "#2  0x0000000000545963 in ?? ()\n"
    "#3  0x000000000053acbc in PyObject_Vectorcall ()\n"
    "#4  0x000000000052b9e0 in _PyEval_EvalFrameDefault ()\n"
    "#5  0x00000000005236bb in PyEval_EvalCode ()\n"
    "#10 0x00000000006502c4 in Py_RunMain ()\n"
    "#11 0x0000000000627d37 in Py_BytesMain ()\n"
    "#12 0x00007f6480f2824a in __libc_start_call_main (main=main@entry=0x627ca0, argc=argc@entry=3, argv=argv@entry=0x7fff3206a3b8) at ../sysdeps/nptl/libc_start_call_main.h:58\n"
    "#14 0x0000000000627bd1 in _start ()\n";

/* A plain C program under gdb: its own function under libc's sleep. */
static const char gdb_c[] =
    "#0  0x00007f in clock_nanosleep@GLIBC_2.2.5 () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "#1  0x00007f in nanosleep () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "#2  0x00007f in sleep () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "#3  0x000055 in wait_for_peer (peer=3) at worker.c:41\n"
    "#4  0x000055 in main (argc=1, argv=0x7ffd) at worker.c:90\n";

/* A tool that failed leaves its note above the next one's text. */
static const char gdb_after_note[] =
    "py-spy: exit status 1, no stacks in its output\n"
    "  Error: Failed to find python version from target process\n"
    "#0  0x00007f in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "#1  0x000055 in event_loop () at loop.c:12\n";

static const char pyspy_allreduce[] =
    "Process 4242: /usr/bin/python3 train.py\n"
    "Python v3.11.2 (/usr/bin/python3.11)\n"
    "\n"
    "Thread 4242 (idle): \"MainThread\"\n"
    "    all_reduce (torch/distributed/distributed_c10d.py:1536)\n"
    "    wrapper (torch/distributed/c10d_logger.py:72)\n"
    "    train_step (/home/u/proj/train.py:40)\n"
    "    main (/home/u/proj/train.py:77)\n"
    "    <module> (/home/u/proj/train.py:81)\n";

static const char pyspy_user[] =
    "Process 4243: /usr/bin/python3 train.py\n"
    "Python v3.11.2 (/usr/bin/python3.11)\n"
    "\n"
    "Thread 0x7F3C5A7F3040 (idle): \"MainThread\"\n"
    "    freeze_here (/tmp/t/on_hang.py:14)\n"
    "        Arguments:\n"
    "            step (int): 5\n"
    "    main (/tmp/t/on_hang.py:30)\n"
    "    <module> (/tmp/t/on_hang.py:35)\n"
    "Thread 0x7F3C3C7FF6C0 (idle): \"Thread-1\"\n"
    "    wait (/usr/lib/python3.11/threading.py:320)\n";

static const char pyspy_loader[] =
    "Thread 77 (idle): \"MainThread\"\n"
    "    poll (/usr/lib/python3.11/selectors.py:415)\n"
    "    wait (/usr/lib/python3.11/multiprocessing/connection.py:930)\n"
    "    _try_get_data (/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:1131)\n"
    "    _next_data (/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:1327)\n"
    "    __next__ (/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:628)\n"
    "    train (/home/u/train.py:50)\n";

/* --native: C++ frames between the Python ones. */
static const char pyspy_native[] =
    "Thread 9001 (idle): \"MainThread\"\n"
    "    __futex_abstimed_wait_common (libc.so.6)\n"
    "    c10d::ProcessGroupNCCL::WorkNCCL::synchronizeInternal (libtorch_cuda.so)\n"
    "    barrier (torch/distributed/distributed_c10d.py:3696)\n"
    "    main (/work/train.py:12)\n";

static const char pyspy_rdzv[] =
    "Thread 31 (active): \"MainThread\"\n"
    "    _create_c10d_store (torch/distributed/rendezvous.py:176)\n"
    "    _env_rendezvous_handler (torch/distributed/rendezvous.py:246)\n"
    "    init_process_group (torch/distributed/distributed_c10d.py:900)\n"
    "    main (/work/train.py:8)\n";

static const char pyspy_recv[] =
    "Thread 31 (idle): \"MainThread\"\n"
    "    recv (torch/distributed/distributed_c10d.py:1640)\n"
    "    pipeline_step (/work/pipe.py:20)\n";

static const char proc_stopped[] =
    "process 6000: python3, state T (stopped)\n"
    "(the kernel's view from /proc: user-space stacks need gdb, or py-spy for Python)\n"
    "thread 6000 (python3): state T (stopped)\n"
    "  wchan: do_signal_stop\n"
    "  kernel stack: (unreadable: Permission denied)\n"
    "thread 6001 (python3): state S (sleeping)\n"
    "  wchan: futex_wait_queue\n"
    "  kernel stack: (unreadable: Permission denied)\n";

static const char proc_running[] =
    "process 6100: spin, state R (running)\n"
    "thread 6100 (spin): state R (running)\n"
    "  wchan: 0\n"
    "  kernel stack: (unreadable: Permission denied)\n";

static const struct where_case cases[] = {
    { "gdb: gloo all_reduce on its thread", "gdb", gdb_gloo, 4242, "all_reduce" },
    { "gdb: main thread found by gdb's number without a pid", "gdb", gdb_gloo, 0, "all_reduce" },
    { "gdb: Debian's gloo: the main thread's wait", "gdb", gdb_gloo_debian, 32213, "c10d::Work::wait (a collective)" },
    { "gdb: SIGSTOPped Python: the call it is in", "gdb", gdb_stopped, 5000, "kill (python)" },
    { "gdb: Python in time.sleep: the call it waits in", "gdb", gdb_sleep, 20618, "clock_nanosleep (python)" },
    { "gdb: C program: its own function", "gdb", gdb_c, 0, "wait_for_peer" },
    { "gdb: a failed tool's note above is ignored", "gdb", gdb_after_note, 0, "event_loop" },
    { "py-spy: all_reduce under the user's code", "py-spy", pyspy_allreduce, 4242, "all_reduce" },
    { "py-spy: the user's function, file without line", "py-spy", pyspy_user, 4243, "freeze_here (on_hang.py)" },
    { "py-spy: the data loader", "py-spy", pyspy_loader, 77, "the data loader" },
    { "py-spy --native: barrier above C++ frames", "py-spy", pyspy_native, 9001, "barrier" },
    { "py-spy: rendezvous", "py-spy", pyspy_rdzv, 31, "init_process_group" },
    { "py-spy: recv when nothing bigger", "py-spy", pyspy_recv, 31, "recv" },
    { "proc: the main thread's wait channel", "proc", proc_stopped, 6000, "do_signal_stop (kernel)" },
    { "proc: running, no wait channel: its state", "proc", proc_running, 6100, "state R (running)" },
    { "guessed: gdb", NULL, gdb_stopped, 5000, "kill (python)" },
    { "guessed: proc", NULL, proc_stopped, 6000, "do_signal_stop (kernel)" },
    { "guessed: py-spy", NULL, pyspy_user, 0, "freeze_here (on_hang.py)" },
    { "empty text", "gdb", "", 1, NULL },
    { "nothing usable", "gdb", "warning: could not attach\n", 1, NULL },
};

static void test_where_table(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct where_case *w = &cases[i];
        char *got = stack_where(w->tool, w->text, w->pid);
        if (!w->want ? got != NULL : !got || strcmp(got, w->want) != 0) {
            tap_cur_failed++;
            printf("#   %s: got \"%s\", want \"%s\"\n", w->name, got ? got : "(null)", w->want ? w->want : "(null)");
        }
        free(got);
    }
}

static void test_long_names_cut(void)
{
    char text[1024];
    snprintf(text, sizeof text, "#0  0x1 in %s (x=1) at a.cc:1\n",
             "very::long::name_space::with_a_class<and_template_args>::and_a_function_name_that_goes_on_and_on");
    char *got = stack_where("gdb", text, 0);
    CHECK(got != NULL);
    CHECK(got && strlen(got) < STACK_WHERE_MAX);
    CHECK(got && strncmp(got, "very::long::name_space", 22) == 0);
    CHECK(got && strcmp(got + strlen(got) - 3, "...") == 0);
    free(got);
}

static void test_summary(void)
{
    int ranks[16];
    char *where[16];
    for (int r = 0; r < 16; r++) {
        ranks[r] = r;
        where[r] = "all_reduce";
    }
    where[7] = "the data loader";
    char *s = stack_where_summary(ranks, where, 16);
    CHECK_STR(s, "15 ranks in all_reduce (0-6,8-15), rank 7 in the data loader");
    free(s);

    int two[] = { 1, 0 };
    char *w2[] = { "freeze_here (on_hang.py)", "all_reduce" };
    s = stack_where_summary(two, w2, 2);   /* equal sizes: the lowest rank first */
    CHECK_STR(s, "rank 0 in all_reduce, rank 1 in freeze_here (on_hang.py)");
    free(s);

    char *same[] = { "barrier", "barrier", "barrier", "barrier" };
    int four[] = { 3, 2, 1, 0 };
    s = stack_where_summary(four, same, 4);
    CHECK_STR(s, "all 4 ranks in barrier");
    free(s);

    char *unknown[] = { NULL, "barrier", NULL, "barrier", "x (y.py)" };
    int five[] = { 0, 1, 2, 3, 4 };
    s = stack_where_summary(five, unknown, 5);
    CHECK_STR(s, "2 ranks where unknown (0,2), 2 ranks in barrier (1,3), rank 4 in x (y.py)");
    free(s);

    s = stack_where_summary(five, unknown, 1);
    CHECK_STR(s, "rank 0 where unknown");
    free(s);
}

int main(void)
{
    RUN(test_where_table);
    RUN(test_long_names_cut);
    RUN(test_summary);
    return tap_done();
}
