/* memcpy_bw.c: memcpy bandwidth into a mapped remote segment, next to the same memory written
 * by its own host. */
/*
 * Usage: memcpy_bw -rn NODE_ID [-server] [-size BYTES] [-rounds N] [-a ADAPTER] [-cpu N] [-json]
 *
 * The server offers a segment; the client maps it and copies a buffer into it with plain
 * memcpy (stores through the mapping: no library call on the way). The baseline is the same
 * copy into the same segment by the server, on the host whose memory it is. The two take
 * turns piece by piece, passing a token through small control segments (each side polls its
 * own and stores into the other's), and run the very same code, so both write the same
 * pages at the same moments of the machine's life: the client prints both bandwidths (the
 * medians of the rounds) and the median of the rounds' ratios. With NTBs the mapping is a
 * window onto the remote memory: the ratio is what the interconnect costs for CPU stores,
 * and nothing else. (Where the pages of two different buffers lie in memory moves a copy's
 * speed by several percent on a virtual machine: a baseline in other memory, or in another
 * role, would measure that too.)
 *
 * -cpu N runs the process on CPU N only. When both sides run on one machine (a simulated
 * fabric), giving both the same CPU takes the CPUs' own differences out of the ratio: only
 * one side copies at a time, and the other sleeps while it waits.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sisci_api.h"

#define NO_FLAGS    0
#define NO_CALLBACK NULL
#define NO_ARG      NULL

#define DATA_SEGMENT   0x700 /* the server's: what both copy into */
#define SERVER_CONTROL 0x701 /* the server's control segment: the client stores into it */
#define CLIENT_CONTROL 0x702 /* the client's: the server stores into it */
#define MAX_ROUNDS     64
#define WAIT_S         60.0 /* how long either side waits for the other before giving up */

/* A control segment: what the other side stores, what its owner polls. */
struct control {
        uint64_t token;  /* turns done: the owner may take turn t once token > t - 1 */
        uint64_t rounds; /* client to server: timed rounds (round 0 is not timed) */
        uint64_t ready;  /* server to client: its mapping is touched; client to server: go */
        uint64_t done;   /* server to client: mbps holds the server's figures */
        double mbps[MAX_ROUNDS + 1];
};

static sci_error_t error;

static void check(const char *what)
{
        if (error != SCI_ERR_OK) {
                fprintf(stderr, "memcpy_bw: %s failed: %s (0x%x)\n", what, SCIGetErrorString(error),
                        error);
                exit(1);
        }
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* Wait until *word (in this side's own control segment) is at least want. */
static void wait_for(const volatile uint64_t *word, uint64_t want, const char *what)
{
        double give_up = now_s() + WAIT_S;
        for (unsigned spins = 0; __atomic_load_n(word, __ATOMIC_ACQUIRE) < want; spins++) {
                if (spins < 2000)
                        continue;
                if (now_s() > give_up) {
                        fprintf(stderr, "memcpy_bw: the other side did not %s within %.0f s\n",
                                what, WAIT_S);
                        exit(1);
                }
                nanosleep(&(struct timespec){0, 100000}, NULL);
        }
}

/*
 * The source: 512 KiB that stay in the CPU's caches, copied again and again. What is measured
 * is the stores into the destination; a source as large as the segment would be read from
 * pages that lie differently in memory for the two sides (the page allocator hands a process
 * the same pages again round after round), which moves a side's speed by several percent
 * for a whole run.
 */
#define SOURCE (512u << 10)

static uint8_t source[SOURCE];

/* The segment is cut in pieces of this size (8 MiB, or half of a smaller segment). */
static size_t piece_of(size_t size)
{
        size_t piece = size / 2 < (8u << 20) ? size / 2 : (8u << 20);
        return piece & ~(size_t)4095;
}

/* Copy the source over [off, off + n) of dst, again and again (compare: check that it is
 * there instead; returns whether it was). */
static int copy_piece(uint8_t *dst, size_t off, size_t n, int compare)
{
        for (size_t o = 0; o < n; o += SOURCE) {
                size_t len = n - o < SOURCE ? n - o : SOURCE;
                if (compare && memcmp(dst + off + o, source, len))
                        return 0;
                if (!compare)
                        memcpy(dst + off + o, source, len);
        }
        return 1;
}

/* Whether dst holds what the turns wrote into it. */
static int holds_copies(uint8_t *dst, size_t size)
{
        size_t piece = piece_of(size);
        for (size_t off = 0; off < size; off += piece)
                if (!copy_piece(dst, off, size - off < piece ? size - off : piece, 1))
                        return 0;
        return 1;
}

/*
 * The turns, the same code on both sides: round r copies the whole buffer once, piece p
 * taken by side (r + p) % 2 (the client is side 0), so a piece one side copies in one round
 * the other copies in the next, and no side writes a piece the other has just written (it
 * would find it in the caches). Each side waits for its turn in its own control segment and
 * hands on by storing into the other's. mbps[r]: this side's bandwidth in round r.
 */
static void take_turns(int side, uint8_t *dst, size_t size, unsigned rounds,
                       volatile struct control *mine, volatile struct control *theirs,
                       double mbps[])
{
        size_t piece = piece_of(size);
        uint64_t pieces = (size + piece - 1) / piece;
        for (size_t k = 0; k < SOURCE; k++)
                source[k] = (uint8_t)(k * 7 + 1);
        double secs[MAX_ROUNDS + 1] = {0}, bytes[MAX_ROUNDS + 1] = {0};
        for (uint64_t t = 0; t < (rounds + 1) * pieces; t++) {
                unsigned r = (unsigned)(t / pieces);
                uint64_t p = t % pieces;
                if ((r + p) % 2 != (uint64_t)side)
                        continue;
                wait_for(&mine->token, t, "take its turn");
                size_t off = p * piece, n = size - off < piece ? size - off : piece;
                double t0 = now_s();
                copy_piece(dst, off, n, 0);
                secs[r] += now_s() - t0;
                bytes[r] += (double)n;
                __atomic_store_n(&mine->token, t + 1, __ATOMIC_RELAXED);
                __atomic_store_n(&theirs->token, t + 1, __ATOMIC_RELEASE);
        }
        for (unsigned r = 0; r <= rounds; r++)
                mbps[r] = secs[r] > 0 ? bytes[r] / secs[r] / 1e6 : 0;
}

/* Make a control segment of this side, mapped and available. */
static volatile struct control *control_segment(sci_desc_t sd, sci_local_segment_t *seg,
                                                sci_map_t *map, unsigned id, unsigned adapter)
{
        SCICreateSegment(sd, seg, id, sizeof(struct control), NO_CALLBACK, NO_ARG, NO_FLAGS,
                         &error);
        check("SCICreateSegment");
        volatile struct control *c =
            SCIMapLocalSegment(*seg, map, 0, sizeof(struct control), NULL, NO_FLAGS, &error);
        check("SCIMapLocalSegment");
        SCIPrepareSegment(*seg, adapter, NO_FLAGS, &error);
        check("SCIPrepareSegment");
        SCISetSegmentAvailable(*seg, adapter, NO_FLAGS, &error);
        check("SCISetSegmentAvailable");
        return c;
}

/* Connect to segment id of node (waiting for it to be offered) and map size bytes of it. */
static volatile void *connect_map(sci_desc_t sd, sci_remote_segment_t *rs, sci_map_t *map,
                                  unsigned node, unsigned id, unsigned adapter, size_t size)
{
        double give_up = now_s() + WAIT_S;
        do {
                SCIConnectSegment(sd, rs, node, id, adapter, NO_CALLBACK, NO_ARG, 1000, NO_FLAGS,
                                  &error);
                if (error == SCI_ERR_OK)
                        break;
                nanosleep(&(struct timespec){0, 10000000}, NULL);
        } while (now_s() < give_up);
        check("SCIConnectSegment");
        volatile void *p = SCIMapRemoteSegment(*rs, map, 0, size, NULL, NO_FLAGS, &error);
        check("SCIMapRemoteSegment");
        return p;
}

static void disconnect(sci_remote_segment_t rs, sci_map_t map)
{
        SCIUnmapSegment(map, NO_FLAGS, &error);
        check("SCIUnmapSegment");
        SCIDisconnectSegment(rs, NO_FLAGS, &error);
        check("SCIDisconnectSegment");
}

/* Wait until a remote node connected to seg has gone again, then remove it. */
static void remove_when_left(sci_local_segment_t seg, sci_map_t map)
{
        for (int connected = 0;;) {
                unsigned node, ad;
                sci_segment_cb_reason_t r = SCIWaitForLocalSegmentEvent(
                    seg, &node, &ad, (unsigned)(WAIT_S * 1000), NO_FLAGS, &error);
                check("SCIWaitForLocalSegmentEvent");
                if (r == SCI_CB_CONNECT)
                        connected = 1;
                if (r == SCI_CB_DISCONNECT && connected)
                        break;
        }
        SCIUnmapSegment(map, NO_FLAGS, &error);
        check("SCIUnmapSegment");
        SCIRemoveSegment(seg, NO_FLAGS, &error);
        check("SCIRemoveSegment");
}

static void serve(sci_desc_t sd, unsigned client, unsigned adapter, size_t size)
{
        sci_local_segment_t data, ctl;
        sci_map_t dmap, cmap, tmap;
        SCICreateSegment(sd, &data, DATA_SEGMENT, size, NO_CALLBACK, NO_ARG, NO_FLAGS, &error);
        check("SCICreateSegment");
        uint8_t *dst = SCIMapLocalSegment(data, &dmap, 0, size, NULL, NO_FLAGS, &error);
        check("SCIMapLocalSegment");
        memset(dst, 0, size); /* every page present in this mapping before anything is timed */
        SCIPrepareSegment(data, adapter, NO_FLAGS, &error);
        check("SCIPrepareSegment");
        SCISetSegmentAvailable(data, adapter, NO_FLAGS, &error);
        check("SCISetSegmentAvailable");
        volatile struct control *mine = control_segment(sd, &ctl, &cmap, SERVER_CONTROL, adapter);
        sci_remote_segment_t rs;
        volatile struct control *theirs =
            connect_map(sd, &rs, &tmap, client, CLIENT_CONTROL, adapter, sizeof(struct control));
        __atomic_store_n(&theirs->ready, 1, __ATOMIC_RELEASE);
        wait_for(&mine->ready, 1, "start");
        unsigned rounds = (unsigned)mine->rounds;
        if (!rounds || rounds > MAX_ROUNDS) {
                fprintf(stderr, "memcpy_bw: the client asked for %u rounds\n", rounds);
                exit(1);
        }
        double mbps[MAX_ROUNDS + 1];
        take_turns(1, dst, size, rounds, mine, theirs, mbps);
        for (unsigned r = 0; r <= rounds; r++)
                theirs->mbps[r] = mbps[r];
        __atomic_store_n(&theirs->done, 1, __ATOMIC_RELEASE);
        disconnect(rs, tmap);
        remove_when_left(ctl, cmap);
        remove_when_left(data, dmap);
}

int main(int argc, char **argv)
{
        unsigned remote_node = 0, adapter = 0, rounds = 9;
        size_t size = 16u << 20;
        int server = 0, json = 0, cpu = -1;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "-rn") && i + 1 < argc)
                        remote_node = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-a") && i + 1 < argc)
                        adapter = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-size") && i + 1 < argc)
                        size = strtoull(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-rounds") && i + 1 < argc)
                        rounds = (unsigned)strtoul(argv[++i], NULL, 0);
                else if (!strcmp(argv[i], "-cpu") && i + 1 < argc)
                        cpu = atoi(argv[++i]);
                else if (!strcmp(argv[i], "-server"))
                        server = 1;
                else if (!strcmp(argv[i], "-json"))
                        json = 1;
                else {
                        fprintf(stderr, "usage: memcpy_bw -rn NODE_ID [-server] [-size BYTES] "
                                        "[-rounds N] [-a ADAPTER] [-cpu N] [-json]\n");
                        return 2;
                }
        }
        if (!rounds || rounds > MAX_ROUNDS || size < 8192) {
                fprintf(stderr, "memcpy_bw: -rounds must be 1 to %d and -size at least 8192\n",
                        MAX_ROUNDS);
                return 2;
        }
        if (cpu >= 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                if (cpu >= CPU_SETSIZE || sched_setaffinity(0, sizeof(set), &set)) {
                        fprintf(stderr, "memcpy_bw: cannot run on CPU %d\n", cpu);
                        return 2;
                }
        }
        sci_desc_t sd;
        SCIInitialize(NO_FLAGS, &error);
        check("SCIInitialize");
        SCIOpen(&sd, NO_FLAGS, &error);
        check("SCIOpen");
        if (server) {
                serve(sd, remote_node, adapter, size);
                SCIClose(sd, NO_FLAGS, &error);
                SCITerminate();
                return 0;
        }
        sci_local_segment_t ctl;
        sci_map_t cmap, rmap, tmap;
        volatile struct control *mine = control_segment(sd, &ctl, &cmap, CLIENT_CONTROL, adapter);
        sci_remote_segment_t remote, rctl;
        uint8_t *rp = (uint8_t *)(uintptr_t)connect_map(sd, &remote, &rmap, remote_node,
                                                        DATA_SEGMENT, adapter, size);
        volatile struct control *theirs =
            connect_map(sd, &rctl, &tmap, remote_node, SERVER_CONTROL, adapter, sizeof(*theirs));
        memset(rp, 0, size); /* every page present in this mapping before anything is timed */
        wait_for(&mine->ready, 1, "get ready");
        theirs->rounds = rounds;
        __atomic_store_n(&theirs->ready, 1, __ATOMIC_RELEASE);
        double rbw[MAX_ROUNDS + 1], lbw[MAX_ROUNDS], ratio[MAX_ROUNDS];
        take_turns(0, rp, size, rounds, mine, theirs, rbw);
        wait_for(&mine->done, 1, "report");
        if (!holds_copies(rp, size)) {
                fprintf(stderr, "memcpy_bw: the remote segment does not hold what was copied\n");
                return 1;
        }
        /* Round 0 is not counted (the first writes of each side to each piece). The ratio of
         * each round (both sides saw the same moments), then the medians. */
        for (unsigned r = 0; r < rounds; r++) {
                rbw[r] = rbw[r + 1];
                lbw[r] = mine->mbps[r + 1];
                ratio[r] = rbw[r] / lbw[r];
        }
        qsort(ratio, rounds, sizeof(*ratio), cmp);
        qsort(rbw, rounds, sizeof(*rbw), cmp);
        qsort(lbw, rounds, sizeof(*lbw), cmp);
        double rmed = rbw[rounds / 2], lmed = lbw[rounds / 2], med = ratio[rounds / 2];
        if (json)
                printf("{\"bytes\": %zu, \"rounds\": %u, \"remote_MBps\": %.1f, \"local_MBps\": "
                       "%.1f, \"ratio\": %.3f}\n",
                       size, rounds, rmed, lmed, med);
        else
                printf("memcpy of %zu bytes (median of %u): remote segment %.0f MB/s, the same "
                       "memory from its own host %.0f MB/s, ratio %.3f\n",
                       size, rounds, rmed, lmed, med);
        disconnect(rctl, tmap);
        disconnect(remote, rmap);
        remove_when_left(ctl, cmap);
        SCIClose(sd, NO_FLAGS, &error);
        check("SCIClose");
        SCITerminate();
        return 0;
}
