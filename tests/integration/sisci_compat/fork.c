/* fork: a process that uses SISCI forks while the library's own threads (events, interrupt
 * callbacks) are busy, as servers that fork workers do. Each child starts with a library of
 * its own: nothing is initialized until it calls SCIInitialize, it then has a session of its
 * own (its segment ids are checked against the parent's), and whatever it does leaves the
 * parent's segment and interrupt working. A child that hangs (a lock inherited held) is killed
 * by its alarm, and the program says so. Usage: fork NCHILDREN */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sxc.h"

#define SEG_ID   0x5f00
#define CHILD_ID 0x5f10

static volatile unsigned fired;

static sci_callback_action_t on_interrupt(void *arg, sci_local_interrupt_t li, sci_error_t status)
{
        (void)arg;
        (void)li;
        if (status == SCI_ERR_OK)
                __atomic_add_fetch(&fired, 1, __ATOMIC_SEQ_CST);
        return SCI_CALLBACK_CONTINUE;
}

/* What a child does; its exit status is 0 when all of it held (the reason is on stderr). */
/* How many sockets this process holds (the library's connections to the daemon). */
static unsigned sockets(void)
{
        unsigned n = 0;
        char p[64], t[64];
        for (int fd = 0; fd < 1024; fd++) {
                snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
                ssize_t l = readlink(p, t, sizeof(t) - 1);
                if (l > 0 && (t[l] = 0, !strncmp(t, "socket:", 7)))
                        n++;
        }
        return n;
}

static int child(unsigned i, sci_desc_t parent_sd)
{
        alarm(20);
        sci_error_t err;
        sci_desc_t sd;
        /* None of the parent's connections is kept: its session ends with the parent. */
        unsigned held = sockets();
        CHECK(held == 0, "child %u: holds %u of the parent's sockets", i, held);
        /* A fresh library: not initialized, and the parent's descriptor is not ours. */
        SCIOpen(&sd, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_NOT_INITIALIZED,
              "child %u: SCIOpen before SCIInitialize returned %s, not SCI_ERR_NOT_INITIALIZED "
              "(the child uses the parent's library state)",
              i, SCIGetErrorString(err));
        sci_local_segment_t seg;
        SCICreateSegment(parent_sd, &seg, CHILD_ID + i, 4096, NO_CALLBACK, NO_ARG, NO_FLAGS, &err);
        CHECK(err != SCI_ERR_OK, "child %u: the parent's descriptor worked in the child", i);
        TRY(SCIInitialize, NO_FLAGS);
        SCICreateSegment(parent_sd, &seg, CHILD_ID + i, 4096, NO_CALLBACK, NO_ARG, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_ILLEGAL_PARAMETER,
              "child %u: the parent's descriptor after SCIInitialize gave %s, not "
              "SCI_ERR_ILLEGAL_PARAMETER",
              i, SCIGetErrorString(err));
        TRY(SCIOpen, &sd, NO_FLAGS);
        /* Its own session at the daemon: the parent's segment id is taken. */
        SCICreateSegment(sd, &seg, SEG_ID, 4096, NO_CALLBACK, NO_ARG, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_SEGMENTID_USED,
              "child %u: creating the parent's segment id returned %s, not "
              "SCI_ERR_SEGMENTID_USED",
              i, SCIGetErrorString(err));
        TRY(SCICreateSegment, sd, &seg, CHILD_ID + i, 4096, NO_CALLBACK, NO_ARG, NO_FLAGS);
        TRY(SCIPrepareSegment, seg, ADAPTER_NO, NO_FLAGS);
        TRY(SCISetSegmentAvailable, seg, ADAPTER_NO, NO_FLAGS);
        sci_map_t map;
        volatile unsigned *p = SCIMapLocalSegment(seg, &map, 0, 4096, NULL, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK, "child %u: SCIMapLocalSegment: %s", i, SCIGetErrorString(err));
        p[0] = i;
        TRY(SCIUnmapSegment, map, NO_FLAGS);
        TRY(SCISetSegmentUnavailable, seg, ADAPTER_NO, NO_FLAGS);
        TRY(SCIRemoveSegment, seg, NO_FLAGS);
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        return 0;
}

int main(int argc, char **argv)
{
        CHECK(argc == 2, "usage: fork NCHILDREN");
        unsigned n = (unsigned)strtoul(argv[1], NULL, 0);
        sci_error_t err;
        sci_desc_t sd;
        TRY(SCIInitialize, NO_FLAGS);
        TRY(SCIOpen, &sd, NO_FLAGS);
        unsigned me;
        TRY(SCIGetLocalNodeId, ADAPTER_NO, &me, NO_FLAGS);
        sci_local_segment_t seg;
        TRY(SCICreateSegment, sd, &seg, SEG_ID, 4096, NO_CALLBACK, NO_ARG, NO_FLAGS);
        TRY(SCIPrepareSegment, seg, ADAPTER_NO, NO_FLAGS);
        TRY(SCISetSegmentAvailable, seg, ADAPTER_NO, NO_FLAGS);
        sci_local_interrupt_t li;
        unsigned intno = 0;
        TRY(SCICreateInterrupt, sd, &li, ADAPTER_NO, &intno, on_interrupt, NO_ARG,
            SCI_FLAG_USE_CALLBACK);
        sci_remote_interrupt_t ri;
        TRY(SCIConnectInterrupt, sd, &ri, me, ADAPTER_NO, intno, 5000, NO_FLAGS);
        unsigned sent = 0;
        for (unsigned i = 0; i < n; i++) {
                /* The callback thread and the event thread take the library's lock now. */
                for (unsigned k = 0; k < 4; k++, sent++)
                        TRY(SCITriggerInterrupt, ri, NO_FLAGS);
                fflush(NULL);
                pid_t pid = fork();
                CHECK(pid >= 0, "fork failed");
                if (pid == 0)
                        _exit(child(i, sd));
                int st = 0;
                CHECK(waitpid(pid, &st, 0) == pid, "waitpid failed");
                CHECK(!WIFSIGNALED(st) || WTERMSIG(st) != SIGALRM,
                      "child %u hung in the library (killed by its alarm after 20 s)", i);
                CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %u failed (status %#x)", i,
                      (unsigned)st);
        }
        /* The parent's interrupt still arrives (triggers the callback has not run for yet may
         * be merged into one, as an interrupt's are). */
        struct timespec ts = {0, 10 * 1000 * 1000};
        for (unsigned w = 0; w < 100; w++)
                nanosleep(&ts, NULL);
        unsigned before = __atomic_load_n(&fired, __ATOMIC_SEQ_CST);
        CHECK(before > 0, "none of %u interrupts reached the callback", sent);
        TRY(SCITriggerInterrupt, ri, NO_FLAGS);
        for (unsigned w = 0; w < 500 && __atomic_load_n(&fired, __ATOMIC_SEQ_CST) == before; w++)
                nanosleep(&ts, NULL);
        CHECK(fired > before, "the parent's interrupt no longer reaches its callback");
        /* Its segment is still its own, whole. */
        sci_map_t map;
        volatile unsigned *p = SCIMapLocalSegment(seg, &map, 0, 4096, NULL, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK, "SCIMapLocalSegment: %s", SCIGetErrorString(err));
        p[0] = 7;
        TRY(SCIUnmapSegment, map, NO_FLAGS);
        TRY(SCIDisconnectInterrupt, ri, NO_FLAGS);
        TRY(SCIRemoveInterrupt, li, NO_FLAGS);
        TRY(SCISetSegmentUnavailable, seg, ADAPTER_NO, NO_FLAGS);
        TRY(SCIRemoveSegment, seg, NO_FLAGS);
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        printf("fork: %u children, each with a library of its own; the parent's interrupt and "
               "segment still work\n",
               n);
        return 0;
}
