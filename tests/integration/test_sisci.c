/* tests/integration/test_sisci.c: libsisci on a real simulated cluster: every call, success and
 * errors. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "accel_drv.h"
#include "sisci_fx.h"

/*
 * The test process is node a of tests/integration/sisci-cluster.yaml; peers (sisci_peer) act
 * as nodes b and c. Each test cleans up what it created; peers are killed after each test.
 */

static sci_error_t err;

#define EXPECT(code, call)                                                                         \
        do {                                                                                       \
                err = (sci_error_t)0x12345;                                                        \
                call;                                                                              \
                if (err != (code))                                                                 \
                        fail_msg("%s: expected %s (0x%x), got %s (0x%x)", #call,                   \
                                 SCIGetErrorString(code), (unsigned)(code),                        \
                                 SCIGetErrorString(err), (unsigned)err);                           \
        } while (0)
#define OK(call) EXPECT(SCI_ERR_OK, call)

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait (5 s at most) until *p reads v. */
static bool eventually32(volatile uint32_t *p, uint32_t v)
{
        for (uint64_t end = now_ms() + 5000; now_ms() < end; sfx_nap(2))
                if (*p == v)
                        return true;
        return *p == v;
}

/* A local segment made available on adapter 0, mapped. */
static volatile uint8_t *make_segment(sci_desc_t sd, unsigned id, size_t size,
                                      sci_local_segment_t *seg, sci_map_t *map)
{
        OK(SCICreateSegment(sd, seg, id, size, NULL, NULL, 0, &err));
        OK(SCIPrepareSegment(*seg, 0, 0, &err));
        volatile uint8_t *p;
        OK(p = SCIMapLocalSegment(*seg, map, 0, size, NULL, 0, &err));
        OK(SCISetSegmentAvailable(*seg, 0, 0, &err));
        return p;
}

static void drop_segment(sci_local_segment_t seg, sci_map_t map)
{
        OK(SCIUnmapSegment(map, 0, &err));
        OK(SCIRemoveSegment(seg, SCI_FLAG_FORCE_REMOVE, &err));
}

/* ---- the library, descriptors, identity --------------------------------------------------------
 */

static void test_init_open_close(void **state)
{
        (void)state;
        /* Nested initialization is counted. */
        OK(SCIInitialize(0, &err));
        SCITerminate();
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIInitialize(0x80000000u, &err));
        sci_desc_t sd, sd2;
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIOpen(NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIOpen(&sd, 1, &err));
        OK(SCIOpen(&sd, 0, &err));
        OK(SCIOpen(&sd2, 0, &err));
        assert_ptr_not_equal(sd, sd2);
        /* A descriptor with a segment is busy. */
        sci_local_segment_t seg;
        OK(SCICreateSegment(sd, &seg, 0x1001, 4096, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_BUSY, SCIClose(sd, 0, &err));
        OK(SCIRemoveSegment(seg, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIClose(sd, 1, &err));
        OK(SCIClose(sd, 0, &err));
        /* A closed descriptor is gone for good, as is anything forged. */
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIClose(sd, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCICreateSegment(sd, &seg, 0x1002, 4096, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIClose((sci_desc_t)(uintptr_t)0xdeadbeef, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIClose(NULL, 0, &err));
        OK(SCIClose(sd2, 0, &err));
        /* A NULL error pointer is allowed: nothing crashes. */
        SCIClose(NULL, 0, NULL);
        SCIOpen(NULL, 0, NULL);
}

static void test_identity_and_queries(void **state)
{
        (void)state;
        unsigned id = 0;
        OK(SCIGetLocalNodeId(0, &id, 0, &err));
        assert_int_equal(id, NODE_A);
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO, SCIGetLocalNodeId(1, &id, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIGetLocalNodeId(0, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIGetLocalNodeId(0, &id, 4, &err));

        unsigned v = 0;
        OK(SCIQuery(SCI_Q_VENDORID, &v, 0, &err));
        assert_int_equal(v, 0xfab0);
        OK(SCIQuery(SCI_Q_API, &v, 0, &err));
        assert_int_equal(v, (5u << 16) | (11u << 8));
        sci_query_adapter_t qa = {0, 0, SCI_Q_ADAPTER_NODEID, &v};
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        assert_int_equal(v, NODE_A);
        qa.subcommand = SCI_Q_ADAPTER_NUMBER_OF_PORTS;
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        assert_int_equal(v, 4); /* an MXH930 */
        qa.subcommand = SCI_Q_ADAPTER_LINK_OPERATIONAL;
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        assert_int_equal(v, 1); /* port 0 is cabled to the switch */
        qa.portNo = 1;
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        assert_int_equal(v, 0);
        qa.portNo = 9;
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        qa.portNo = 0;
        qa.subcommand = SCI_Q_ADAPTER_DMA_MTU;
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        assert_true(v > 0);
        qa.subcommand = SCI_Q_ADAPTER_CONFIGURED;
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        assert_int_equal(v, 1);
        char serial[64];
        qa.subcommand = SCI_Q_ADAPTER_SERIAL_NUMBER;
        qa.data = serial;
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        assert_string_equal(serial, "ntbfab:a.ntb0");
        qa.data = &v;
        qa.subcommand = SCI_Q_ADAPTER_BDF;
        OK(SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        qa.subcommand = 99;
        EXPECT(SCI_ERR_ILLEGAL_QUERY, SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        qa.subcommand = SCI_Q_ADAPTER_NODEID;
        qa.localAdapterNo = 3;
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO, SCIQuery(SCI_Q_ADAPTER, &qa, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_ADAPTER, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_QUERY, SCIQuery(12345, &v, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_QUERY, SCIQuery(SCI_Q_MAP, &v, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIQuery(SCI_Q_API, &v, 1, &err));

        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        int r;
        OK(r = SCIProbeNode(sd, 0, NODE_A, 0, &err));
        assert_int_equal(r, 1);
        OK(r = SCIProbeNode(sd, 0, NODE_C, 0, &err));
        assert_int_equal(r, 1);
        EXPECT(SCI_ERR_NO_SUCH_NODEID, r = SCIProbeNode(sd, 0, 99, 0, &err));
        assert_int_equal(r, 0);
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO, SCIProbeNode(sd, 7, NODE_B, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIProbeNode(NULL, 0, NODE_B, 0, &err));

        dis_nodeId_list_t list;
        dis_virt_adapter_t at;
        OK(SCIGetNodeIdByAdapterName("c", &list, &at, 0, &err));
        assert_int_equal(list[0], NODE_C); /* an array, one node id per adapter */
        assert_int_equal(list[1], 0);
        assert_int_equal(at, DIS_ADAPTER_TYPE_NTB);
        EXPECT(SCI_ERR_NO_SUCH_NODEID, SCIGetNodeIdByAdapterName("nobody", &list, &at, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIGetNodeIdByAdapterName(NULL, &list, &at, 0, &err));
        OK(SCIClose(sd, 0, &err));
}

static void test_error_strings(void **state)
{
        (void)state;
        static const sci_error_t codes[] = {SCI_ERR_OK,
                                            SCI_ERR_BUSY,
                                            SCI_ERR_FLAG_NOT_IMPLEMENTED,
                                            SCI_ERR_ILLEGAL_FLAG,
                                            SCI_ERR_NOSPC,
                                            SCI_ERR_API_NOSPC,
                                            SCI_ERR_HW_NOSPC,
                                            SCI_ERR_NOT_IMPLEMENTED,
                                            SCI_ERR_ILLEGAL_ADAPTERNO,
                                            SCI_ERR_NO_SUCH_ADAPTERNO,
                                            SCI_ERR_TIMEOUT,
                                            SCI_ERR_OUT_OF_RANGE,
                                            SCI_ERR_NO_SUCH_SEGMENT,
                                            SCI_ERR_ILLEGAL_NODEID,
                                            SCI_ERR_CONNECTION_REFUSED,
                                            SCI_ERR_SEGMENT_NOT_CONNECTED,
                                            SCI_ERR_SIZE_ALIGNMENT,
                                            SCI_ERR_OFFSET_ALIGNMENT,
                                            SCI_ERR_ILLEGAL_PARAMETER,
                                            SCI_ERR_MAX_ENTRIES,
                                            SCI_ERR_SEGMENT_NOT_PREPARED,
                                            SCI_ERR_ILLEGAL_ADDRESS,
                                            SCI_ERR_ILLEGAL_OPERATION,
                                            SCI_ERR_ILLEGAL_QUERY,
                                            SCI_ERR_SEGMENTID_USED,
                                            SCI_ERR_SYSTEM,
                                            SCI_ERR_CANCELLED,
                                            SCI_ERR_NOT_CONNECTED,
                                            SCI_ERR_NOT_AVAILABLE,
                                            SCI_ERR_INCONSISTENT_VERSIONS,
                                            SCI_ERR_COND_INT_RACE_PROBLEM,
                                            SCI_ERR_OVERFLOW,
                                            SCI_ERR_NOT_INITIALIZED,
                                            SCI_ERR_ACCESS,
                                            SCI_ERR_NO_SUCH_NODEID,
                                            SCI_ERR_NODE_NOT_RESPONDING,
                                            SCI_ERR_NO_REMOTE_LINK_ACCESS,
                                            SCI_ERR_NO_LINK_ACCESS,
                                            SCI_ERR_TRANSFER_FAILED,
                                            SCI_ERR_REMOTE_BUSY,
                                            SCI_ERR_NOT_SUPPORTED,
                                            SCI_ERR_DEPRECATED,
                                            SCI_ERR_DMA_NOT_AVAILABLE,
                                            SCI_ERR_DMA_DISABLED,
                                            SCI_ERR_EWOULD_BLOCK,
                                            SCI_ERR_SEMAPHORE_COUNT_EXCEEDED,
                                            SCI_ERR_IRQL_ILLEGAL,
                                            SCI_ERR_LOCAL_BUSY,
                                            SCI_ERR_ALL_BUSY,
                                            SCI_ERR_NO_SUCH_FDID,
                                            SCI_ERR_INTNO_USED};
        const char *unknown = SCIGetErrorString((sci_error_t)0x7777);
        for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
                const char *s = SCIGetErrorString(codes[i]);
                assert_non_null(s);
                assert_true(strlen(s) > 3);
                if (!strcmp(s, unknown))
                        fail_msg("0x%x has no sentence", (unsigned)codes[i]);
                for (size_t k = 0; k < i; k++)
                        if (codes[k] != codes[i] && !strcmp(s, SCIGetErrorString(codes[k])))
                                fail_msg("0x%x and 0x%x share a sentence", (unsigned)codes[i],
                                         (unsigned)codes[k]);
        }
        assert_int_equal(SCI_ERR_NO_SUCH_INTNO, SCI_ERR_NO_SUCH_SEGMENT);
}

/* ---- local segments ----------------------------------------------------------------------------
 */

static void test_local_segments(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_local_segment_t s1, s2, s3;
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCICreateSegment(sd, &s1, 0x2000, 0, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCICreateSegment(sd, NULL, 0x2000, 4096, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG,
               SCICreateSegment(sd, &s1, 0x2000, 4096, NULL, NULL, 0x100000u, &err));
        EXPECT(SCI_ERR_NOSPC,
               SCICreateSegment(sd, &s1, 0x2000, (size_t)1 << 50, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_NOSPC,
               SCICreateSegment(sd, &s1, 0x2000, (size_t)2 << 30, NULL, NULL, 0, &err));
        OK(SCICreateSegment(sd, &s1, 0x2000, 10000, NULL, NULL, 0, &err));
        assert_int_equal(SCIGetLocalSegmentSize(s1), 10000);
        assert_int_equal(SCIGetLocalSegmentId(s1), 0x2000);
        EXPECT(SCI_ERR_SEGMENTID_USED,
               SCICreateSegment(sd, &s2, 0x2000, 4096, NULL, NULL, 0, &err));
        /* A private segment's id is its own. */
        OK(SCICreateSegment(sd, &s2, 0x2000, 4096, NULL, NULL, SCI_FLAG_PRIVATE, &err));
        OK(SCIRemoveSegment(s2, 0, &err));
        /* Automatic ids never collide. */
        OK(SCICreateSegment(sd, &s2, 0, 4096, NULL, NULL, SCI_FLAG_AUTO_ID, &err));
        OK(SCICreateSegment(sd, &s3, 0, 4096, NULL, NULL, SCI_FLAG_AUTO_ID, &err));
        assert_true(SCIGetLocalSegmentId(s2) >= 0x80000000u);
        assert_int_not_equal(SCIGetLocalSegmentId(s2), SCIGetLocalSegmentId(s3));
        OK(SCIRemoveSegment(s3, 0, &err));
        OK(SCIRemoveSegment(s2, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCICreateSegment(sd, &s2, 0x80000001u, 4096, NULL, NULL, 0, &err));

        /* Prepare and availability. */
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO, SCIPrepareSegment(s1, 2, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIPrepareSegment(s1, 0, 0x40000000u, &err));
        EXPECT(SCI_ERR_SEGMENT_NOT_PREPARED, SCISetSegmentAvailable(s1, 0, 0, &err));
        OK(SCIPrepareSegment(s1, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCISetSegmentAvailable(s1, 0, 1, &err));
        OK(SCISetSegmentAvailable(s1, 0, 0, &err));
        OK(SCISetSegmentUnavailable(s1, 0, 0, &err));

        /* Maps: any offset and size inside; nothing outside. */
        sci_map_t m, m2;
        volatile uint8_t *p;
        OK(p = SCIMapLocalSegment(s1, &m, 0, 10000, NULL, 0, &err));
        assert_non_null(p);
        EXPECT(SCI_ERR_OUT_OF_RANGE, SCIMapLocalSegment(s1, &m2, 9000, 1001, NULL, 0, &err));
        EXPECT(SCI_ERR_OUT_OF_RANGE, SCIMapLocalSegment(s1, &m2, SIZE_MAX, 2, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIMapLocalSegment(s1, &m2, 0, 0, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIMapLocalSegment(s1, &m2, 0, 16, NULL, 0x40000000u, &err));
        EXPECT(SCI_ERR_FLAG_NOT_IMPLEMENTED,
               SCIMapLocalSegment(s1, &m2, 0, 16, NULL, SCI_FLAG_FIXED_MAP_ADDR, &err));
        volatile uint8_t *q;
        OK(q = SCIMapLocalSegment(s1, &m2, 8192, 100, NULL, 0, &err));
        assert_ptr_equal(q, p + 8192);
        assert_ptr_equal(SCIGetMapPointer(m2), q);
        assert_int_equal(SCIGetMapPhysAddr(m2), SCIGetMapPhysAddr(m) + 8192);
        for (int i = 0; i < 100; i++)
                q[i] = (uint8_t)i;
        assert_int_equal(p[8192 + 99], 99);
        sci_query_local_segment_t ql = {s1, SCI_Q_LOCAL_SEGMENT_IOADDR, {0}};
        OK(SCIQuery(SCI_Q_LOCAL_SEGMENT, &ql, 0, &err));
        assert_int_equal(ql.data.ioaddr, SCIGetMapPhysAddr(m));
        ql.subcommand = SCI_Q_LOCAL_SEGMENT_PHYS_ADDR;
        OK(SCIQuery(SCI_Q_LOCAL_SEGMENT, &ql, 0, &err));
        assert_int_equal(ql.data.ioaddr, SCIGetMapPhysAddr(m));
        ql.subcommand = 7;
        EXPECT(SCI_ERR_ILLEGAL_QUERY, SCIQuery(SCI_Q_LOCAL_SEGMENT, &ql, 0, &err));
        /* Mapped: not removable. */
        EXPECT(SCI_ERR_BUSY, SCIRemoveSegment(s1, 0, &err));
        OK(SCIUnmapSegment(m2, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapSegment(m2, 0, &err));
        assert_null(SCIGetMapPointer(m2));
        assert_int_equal(SCIGetMapPhysAddr(m2), 0);

        /* Empty segments: memory attached later; only this node's RAM can be. */
        OK(SCICreateSegment(sd, &s2, 0x2001, 4096, NULL, NULL, SCI_FLAG_EMPTY, &err));
        EXPECT(SCI_ERR_ILLEGAL_OPERATION, SCIPrepareSegment(s2, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_OPERATION, SCIMapLocalSegment(s2, &m2, 0, 16, NULL, 0, &err));
        char stack[8192];
        EXPECT(SCI_ERR_ILLEGAL_ADDRESS, SCIRegisterSegmentMemory(stack, 4096, s2, 0, &err));
        void *heap = malloc(8192);
        EXPECT(SCI_ERR_ILLEGAL_ADDRESS, SCIRegisterSegmentMemory(heap, 4096, s2, 0, &err));
        free(heap);
        EXPECT(SCI_ERR_ILLEGAL_OPERATION,
               SCIRegisterSegmentMemory((void *)(uintptr_t)p, 4096, s1, 0, &err));
        OK(SCIRegisterSegmentMemory((void *)(uintptr_t)(p + 4096), 4096, s2, SCI_FLAG_LOCK_USER_MEM,
                                    &err));
        EXPECT(SCI_ERR_ILLEGAL_OPERATION,
               SCIRegisterSegmentMemory((void *)(uintptr_t)(p + 4096), 4096, s2, 0, &err));
        OK(q = SCIMapLocalSegment(s2, &m2, 0, 4096, NULL, 0, &err));
        assert_ptr_equal(q, p + 4096); /* the same memory */
        ql.segment = s2;
        ql.subcommand = SCI_Q_LOCAL_SEGMENT_IOADDR;
        OK(SCIQuery(SCI_Q_LOCAL_SEGMENT, &ql, 0, &err));
        assert_int_equal(ql.data.ioaddr, SCIGetMapPhysAddr(m) + 4096);
        OK(SCIUnmapSegment(m2, 0, &err));
        OK(SCIRemoveSegment(s2, 0, &err));
        /* Attach by physical address: the RAM behind it, reached directly. */
        OK(SCICreateSegment(sd, &s3, 0x2002, 4096, NULL, NULL, SCI_FLAG_EMPTY, &err));
        EXPECT(SCI_ERR_ILLEGAL_ADDRESS,
               SCIAttachPhysicalMemory(0xfee00000u, NULL, 0, 4096, s3, 0, &err));
        EXPECT(SCI_ERR_NOT_SUPPORTED,
               SCIAttachPhysicalMemory(0, (void *)1, 0, 4096, s3, SCI_FLAG_CUDA_BUFFER, &err));
        EXPECT(SCI_ERR_ILLEGAL_OPERATION,
               SCIAttachPhysicalMemory(SCIGetMapPhysAddr(m), NULL, 0, 4096, s1, 0, &err));
        OK(SCIAttachPhysicalMemory(SCIGetMapPhysAddr(m) + 8192, NULL, 0, 4096, s3, 0, &err));
        OK(q = SCIMapLocalSegment(s3, &m2, 0, 4096, NULL, 0, &err));
        assert_int_equal(q[99], 99); /* what was written at 8192 + 99 above */
        OK(SCIUnmapSegment(m2, 0, &err));
        OK(SCIRemoveSegment(s3, 0, &err));

        OK(SCIUnmapSegment(m, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIRemoveSegment(s1, 1, &err));
        OK(SCIRemoveSegment(s1, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(s1, 0, &err));
        assert_int_equal(SCIGetLocalSegmentSize(s1), 0);
        OK(SCIClose(sd, 0, &err));
}

/* ---- connections -------------------------------------------------------------------------------
 */

static void test_connect_errors(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_remote_segment_t r;
        EXPECT(SCI_ERR_NO_SUCH_NODEID, SCIConnectSegment(sd, &r, 99, 1, 0, NULL, NULL, 0, 0, &err));
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO,
               SCIConnectSegment(sd, &r, NODE_B, 1, 5, NULL, NULL, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_NODEID,
               SCIConnectSegment(sd, &r, NODE_B, 1, 0, NULL, NULL, 0, SCI_FLAG_BROADCAST, &err));
        EXPECT(SCI_ERR_ILLEGAL_NODEID, SCIConnectSegment(sd, &r, DIS_BROADCAST_NODEID_GROUP_ALL, 1,
                                                         0, NULL, NULL, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG,
               SCIConnectSegment(sd, &r, NODE_B, 1, 0, NULL, NULL, 0, 0x8, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCIConnectSegment(sd, NULL, NODE_B, 1, 0, NULL, NULL, 0, 0, &err));
        /* Nothing there: at once without a timeout, after it with one. */
        EXPECT(SCI_ERR_NO_SUCH_SEGMENT,
               SCIConnectSegment(sd, &r, NODE_B, 0x3000, 0, NULL, NULL, 0, 0, &err));
        uint64_t t0 = now_ms();
        EXPECT(SCI_ERR_TIMEOUT,
               SCIConnectSegment(sd, &r, NODE_B, 0x3000, 0, NULL, NULL, 300, 0, &err));
        assert_true(now_ms() - t0 >= 290);
        /* There but not available: refused (timeout 0). */
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x3000 4096 0");
        EXPECT(SCI_ERR_CONNECTION_REFUSED,
               SCIConnectSegment(sd, &r, NODE_B, 0x3000, 0, NULL, NULL, 0, 0, &err));
        /* Made available: the connect goes through. */
        sfx_ok(b, "seg_fill 0x3000 100");
        sfx_ok(b, "seg_available 0x3000");
        OK(SCIConnectSegment(sd, &r, NODE_B, 0x3000, 0, NULL, NULL, 5000, 0, &err));
        assert_int_equal(SCIGetRemoteSegmentSize(r), 4096);
        assert_int_equal(SCIGetRemoteSegmentId(r), 0x3000);
        assert_int_equal(SCIGetRemoteSegmentNodeId(r), NODE_B);
        OK(SCIDisconnectSegment(r, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectSegment(r, 0, &err));
        assert_int_equal(SCIGetRemoteSegmentSize(r), 0);
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

static void *creator(void *x)
{
        struct peer *b = *(struct peer **)x;
        sfx_nap(300);
        sfx_ok(b, "seg_create 0x3100 8192 0");
        sfx_nap(200);
        sfx_ok(b, "seg_available 0x3100");
        return NULL;
}

static void test_connect_retry_until_created(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *b = sfx_peer("b");
        /* b creates the segment a little later (told by another thread while this one
         * connects), then makes it available: the connect waits for both. */
        sci_remote_segment_t r;
        pthread_t th;
        static struct peer *bb;
        bb = b;
        assert_int_equal(pthread_create(&th, NULL, creator, &bb), 0);
        OK(SCIConnectSegment(sd, &r, NODE_B, 0x3100, 0, NULL, NULL, 10000, 0, &err));
        pthread_join(th, NULL);
        assert_int_equal(SCIGetRemoteSegmentSize(r), 8192);
        OK(SCIDisconnectSegment(r, 0, &err));
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

static void test_remote_access(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x3200 16384 0");
        sfx_ok(b, "seg_fill 0x3200 7000");
        sfx_ok(b, "seg_available 0x3200");
        sci_remote_segment_t r;
        OK(SCIConnectSegment(sd, &r, NODE_B, 0x3200, 0, NULL, NULL, 1000, 0, &err));
        /* The owner hears of the connection: event reason, our node id, its adapter. */
        char ans[128];
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_wait 0x3200 5000"), 0);
        unsigned reason, node, ad;
        assert_int_equal(sscanf(ans, "%u %u %u", &reason, &node, &ad), 3);
        assert_int_equal(reason, SCI_CB_CONNECT);
        assert_int_equal(node, NODE_A);
        assert_int_equal(ad, 0);

        sci_map_t m, ro;
        volatile uint32_t *p;
        OK(p = (volatile uint32_t *)SCIMapRemoteSegment(r, &m, 0, 16384, NULL, 0, &err));
        assert_int_equal(p[10], 7000 + 40); /* b's pattern, read through the window */
        p[11] = 0xabcdef01u;
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x3200 44"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0xabcdef01u);
        sci_query_remote_segment_t qr = {r, SCI_Q_REMOTE_SEGMENT_IOADDR, {0}};
        OK(SCIQuery(SCI_Q_REMOTE_SEGMENT, &qr, 0, &err));
        assert_int_equal(qr.data.ioaddr, SCIGetMapPhysAddr(m)); /* a window address of a */
        EXPECT(SCI_ERR_OUT_OF_RANGE, SCIMapRemoteSegment(r, &ro, 16000, 1000, NULL, 0, &err));
        /* Copies both ways, with and without a sequence, with the error check. */
        uint32_t buf[64];
        for (int i = 0; i < 64; i++)
                buf[i] = 0x5000 + i;
        sci_sequence_t seq;
        OK(SCICreateMapSequence(m, &seq, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCICreateMapSequence(m, &seq, 3, &err));
        sci_sequence_status_t st;
        OK(st = SCIStartSequence(seq, 0, &err));
        assert_int_equal(st, SCI_SEQ_OK);
        OK(SCIMemCpy(seq, buf, m, 1024, sizeof(buf), SCI_FLAG_ERROR_CHECK, &err));
        OK(st = SCICheckSequence(seq, 0, &err));
        assert_int_equal(st, SCI_SEQ_OK);
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x3200 1276"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0x5000 + 63);
        uint32_t back[64];
        OK(SCIMemCpy(NULL, back, m, 1024, sizeof(back), SCI_FLAG_BLOCK_READ | SCI_FLAG_ERROR_CHECK,
                     &err));
        assert_memory_equal(back, buf, sizeof(buf));
        EXPECT(SCI_ERR_OUT_OF_RANGE, SCIMemCpy(NULL, buf, m, 16384 - 8, 16, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(NULL, NULL, m, 0, 16, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIMemCpy(NULL, buf, m, 0, 16, 0x4, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCIMemCpy(seq, buf, (sci_map_t)(uintptr_t)0x77, 0, 16, 0, &err));
        OK(SCIMemWrite(buf, (volatile void *)(p + 100), 8, 0, &err));
        assert_int_equal(p[101], 0x5001);
        EXPECT(SCI_ERR_ILLEGAL_ADDRESS, SCIMemWrite(buf, (volatile void *)buf, 8, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_ADDRESS, SCIMemWrite(buf, (volatile void *)(p + 4095), 8, 0, &err));
        SCIFlush(seq, 0);
        SCIFlush(NULL, 0);
        SCIStoreBarrier(seq, 0);
        OK(SCICacheSync(m, (void *)(uintptr_t)p, 64, SCI_FLAG_CACHE_FLUSH, &err));
        OK(SCICacheSync(NULL, buf, 64, SCI_FLAG_CACHE_INVALIDATE, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCICacheSync(NULL, buf, 64, 1, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCICacheSync(NULL, NULL, 64, 0, &err));
        /* A read-only map refuses stores through the library (they would fault). */
        volatile uint32_t *rp;
        OK(rp = (volatile uint32_t *)SCIMapRemoteSegment(r, &ro, 4096, 4096, NULL,
                                                         SCI_FLAG_READONLY_MAP, &err));
        assert_int_equal(rp[0], p[1024]);
        EXPECT(SCI_ERR_ILLEGAL_OPERATION, SCIMemCpy(NULL, buf, ro, 0, 4, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_ADDRESS, SCIMemWrite(buf, (volatile void *)rp, 4, 0, &err));
        OK(SCIMemCpy(NULL, back, ro, 0, 4, SCI_FLAG_BLOCK_READ, &err));
        /* Still mapped: busy. A map with a sequence open unmaps (as on Dolphin's library);
         * the sequence stays, not retriable, until removed. */
        EXPECT(SCI_ERR_BUSY, SCIDisconnectSegment(r, 0, &err));
        OK(SCIUnmapSegment(m, 0, &err));
        sci_sequence_status_t gone;
        OK(gone = SCICheckSequence(seq, 0, &err));
        assert_int_equal(gone, SCI_SEQ_NOT_RETRIABLE);
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(seq, buf, m, 0, 4, 0, &err));
        OK(SCIRemoveSequence(seq, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSequence(seq, 0, &err));
        OK(SCIUnmapSegment(ro, 0, &err));
        OK(SCIDisconnectSegment(r, 0, &err));
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_wait 0x3200 5000"), 0);
        assert_int_equal(sscanf(ans, "%u %u", &reason, &node), 2);
        assert_int_equal(reason, SCI_CB_DISCONNECT);
        assert_int_equal(node, NODE_A);
        /* Owner-side timeout: nothing more happens. */
        assert_int_equal(sfx_cmd(b, NULL, 0, "seg_wait 0x3200 100"), SCI_ERR_TIMEOUT);
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

static void test_connect_same_node(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_local_segment_t s;
        sci_map_t lm, rm;
        volatile uint8_t *lp = make_segment(sd, 0x3300, 8192, &s, &lm);
        sci_remote_segment_t r;
        OK(SCIConnectSegment(sd, &r, NODE_A, 0x3300, 0, NULL, NULL, 0, 0, &err));
        volatile uint8_t *rp;
        OK(rp = SCIMapRemoteSegment(r, &rm, 0, 8192, NULL, 0, &err));
        rp[5] = 0x42;
        assert_int_equal(lp[5], 0x42);
        unsigned node, ad;
        sci_segment_cb_reason_t why;
        OK(why = SCIWaitForLocalSegmentEvent(s, &node, &ad, 5000, 0, &err));
        assert_int_equal(why, SCI_CB_CONNECT);
        assert_int_equal(node, NODE_A);
        EXPECT(SCI_ERR_TIMEOUT, SCIWaitForLocalSegmentEvent(s, &node, &ad, 50, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIWaitForLocalSegmentEvent(s, &node, &ad, 50, 1, &err));
        OK(SCIUnmapSegment(rm, 0, &err));
        OK(SCIDisconnectSegment(r, 0, &err));
        drop_segment(s, lm);
        OK(SCIClose(sd, 0, &err));
}

/* A cable of this node goes down and comes back: connections are told, sequences know it. */
static void test_link_events(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x3700 4096 0");
        sfx_ok(b, "seg_available 0x3700");
        sci_remote_segment_t r;
        sci_map_t m;
        sci_sequence_t q;
        OK(SCIConnectSegment(sd, &r, NODE_B, 0x3700, 0, NULL, NULL, 1000, 0, &err));
        OK(SCIMapRemoteSegment(r, &m, 0, 4096, NULL, 0, &err));
        OK(SCICreateMapSequence(m, &q, 0, &err));
        assert_int_equal(SCIStartSequence(q, 0, &err), SCI_SEQ_OK);
        assert_int_equal(sfx_cli("fault link-down a.ntb0.0"), 0);
        sci_error_t status;
        sci_segment_cb_reason_t why;
        OK(why = SCIWaitForRemoteSegmentEvent(r, &status, 10000, 0, &err));
        assert_int_equal(why, SCI_CB_NOT_OPERATIONAL);
        assert_int_equal(status, SCI_ERR_NO_LINK_ACCESS);
        assert_int_equal(SCICheckSequence(q, 0, &err), SCI_SEQ_RETRIABLE);
        uint32_t v = 1;
        EXPECT(SCI_ERR_TRANSFER_FAILED, SCIMemCpy(q, &v, m, 0, 4, SCI_FLAG_ERROR_CHECK, &err));
        assert_int_equal(sfx_cli("fault link-up a.ntb0.0"), 0);
        OK(why = SCIWaitForRemoteSegmentEvent(r, &status, 10000, 0, &err));
        assert_int_equal(why, SCI_CB_OPERATIONAL);
        assert_int_equal(SCICheckSequence(q, 0, &err), SCI_SEQ_OK);
        OK(SCIMemCpy(q, &v, m, 0, 4, SCI_FLAG_ERROR_CHECK, &err));
        OK(SCIRemoveSequence(q, 0, &err));
        OK(SCIUnmapSegment(m, 0, &err));
        OK(SCIDisconnectSegment(r, 0, &err));
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

/*
 * The owner's node daemon is killed and started again: its processes' sessions ended with
 * it, so the fabric manager drops what they exported when the daemon registers again.
 */
static void test_owner_daemon_restarts(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x3800 4096 0");
        sfx_ok(b, "seg_fill 0x3800 9");
        sfx_ok(b, "seg_available 0x3800");
        sci_remote_segment_t r;
        sci_map_t m;
        OK(SCIConnectSegment(sd, &r, NODE_B, 0x3800, 0, NULL, NULL, 1000, 0, &err));
        volatile uint32_t *p;
        OK(p = (volatile uint32_t *)SCIMapRemoteSegment(r, &m, 0, 4096, NULL, 0, &err));
        assert_int_equal(p[1], 9 + 4);
        assert_int_equal(sfx_cli("fault kill b"), 0);
        char args[600];
        snprintf(args, sizeof(args), "up %s/tests/integration/sisci-cluster.yaml",
                 getenv("NTBFAB_SRC"));
        assert_int_equal(sfx_cli(args), 0);
        sci_error_t status;
        sci_segment_cb_reason_t why;
        OK(why = SCIWaitForRemoteSegmentEvent(r, &status, 20000, 0, &err));
        assert_int_equal(why, SCI_CB_LOST);
        assert_true(eventually32(p + 1, 0xffffffffu));
        OK(SCIUnmapSegment(m, 0, &err));
        OK(SCIDisconnectSegment(r, 0, &err));
        sfx_kill(b);
        /* b works again for new processes. */
        b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x3800 4096 0");
        sfx_ok(b, "seg_available 0x3800");
        OK(SCIConnectSegment(sd, &r, NODE_B, 0x3800, 0, NULL, NULL, 5000, 0, &err));
        OK(SCIDisconnectSegment(r, 0, &err));
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

/* ---- failure: an owner dies, a connector dies, a segment is removed by force ------------------
 */

static sci_callback_action_t lost_cb(void *arg, sci_remote_segment_t seg,
                                     sci_segment_cb_reason_t reason, sci_error_t e)
{
        (void)seg;
        (void)e;
        if (reason == SCI_CB_LOST)
                __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST);
        return SCI_CALLBACK_CONTINUE;
}

static void test_owner_dies(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x3400 8192 0");
        sfx_ok(b, "seg_fill 0x3400 1");
        sfx_ok(b, "seg_available 0x3400");
        sci_remote_segment_t r, r2;
        sci_map_t m;
        OK(SCIConnectSegment(sd, &r, NODE_B, 0x3400, 0, NULL, NULL, 1000, 0, &err));
        static int lost;
        lost = 0;
        OK(SCIConnectSegment(sd, &r2, NODE_B, 0x3400, 0, lost_cb, &lost, 1000,
                             SCI_FLAG_USE_CALLBACK, &err));
        volatile uint32_t *p;
        OK(p = (volatile uint32_t *)SCIMapRemoteSegment(r, &m, 0, 8192, NULL, 0, &err));
        assert_int_equal(p[3], 1 + 12);
        sci_sequence_t seq;
        OK(SCICreateMapSequence(m, &seq, 0, &err));
        sfx_kill(b); /* the owner process dies */
        /* The connector hears it (its event, and the other connection's callback)... */
        sci_error_t status = SCI_ERR_OK;
        sci_segment_cb_reason_t why;
        OK(why = SCIWaitForRemoteSegmentEvent(r, &status, 10000, 0, &err));
        assert_int_equal(why, SCI_CB_LOST);
        for (int i = 0; i < 500 && !__atomic_load_n(&lost, __ATOMIC_SEQ_CST); i++)
                sfx_nap(10);
        assert_int_equal(lost, 1);
        EXPECT(SCI_ERR_ILLEGAL_OPERATION, SCIWaitForRemoteSegmentEvent(r2, &status, 10, 0, &err));
        /* ...and its mapping reads all ones, as hardware's would: no fault. */
        assert_true(eventually32(p + 3, 0xffffffffu));
        p[4] = 7; /* a lost write, not a crash */
        uint32_t v = 0;
        EXPECT(SCI_ERR_TRANSFER_FAILED,
               SCIMemCpy(seq, &v, m, 0, 4, SCI_FLAG_BLOCK_READ | SCI_FLAG_ERROR_CHECK, &err));
        assert_int_equal(SCICheckSequence(seq, 0, &err), SCI_SEQ_NOT_RETRIABLE);
        sci_map_t m2;
        EXPECT(SCI_ERR_NOT_CONNECTED, SCIMapRemoteSegment(r, &m2, 0, 8, NULL, 0, &err));
        OK(SCIRemoveSequence(seq, 0, &err));
        OK(SCIUnmapSegment(m, 0, &err));
        OK(SCIDisconnectSegment(r, 0, &err));
        OK(SCIDisconnectSegment(r2, 0, &err));
        OK(SCIClose(sd, 0, &err));
}

static int conn_events[8];
static sci_callback_action_t seg_cb(void *arg, sci_local_segment_t seg,
                                    sci_segment_cb_reason_t reason, unsigned node, unsigned adapter,
                                    sci_error_t e)
{
        (void)arg;
        (void)seg;
        (void)node;
        (void)adapter;
        (void)e;
        if (reason < 8)
                __atomic_add_fetch(&conn_events[reason], 1, __ATOMIC_SEQ_CST);
        return SCI_CALLBACK_CONTINUE;
}

static void test_connector_dies(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        memset(conn_events, 0, sizeof(conn_events));
        sci_local_segment_t s;
        sci_map_t lm;
        OK(SCICreateSegment(sd, &s, 0x3500, 4096, seg_cb, NULL, SCI_FLAG_USE_CALLBACK, &err));
        OK(SCIPrepareSegment(s, 0, 0, &err));
        volatile uint32_t *lp;
        OK(lp = SCIMapLocalSegment(s, &lm, 0, 4096, NULL, 0, &err));
        OK(SCISetSegmentAvailable(s, 0, 0, &err));
        unsigned node, ad;
        EXPECT(SCI_ERR_ILLEGAL_OPERATION, SCIWaitForLocalSegmentEvent(s, &node, &ad, 0, 0, &err));
        struct peer *b = sfx_peer("b");
        struct peer *c = sfx_peer("c");
        sfx_ok(b, "connect %u 0x3500 2000 0", NODE_A);
        sfx_ok(c, "connect %u 0x3500 2000 0", NODE_A);
        sfx_ok(b, "rwrite 8 77");
        assert_true(eventually32(lp + 2, 77));
        for (int i = 0; i < 500 && conn_events[SCI_CB_CONNECT] < 2; i++)
                sfx_nap(10);
        assert_int_equal(conn_events[SCI_CB_CONNECT], 2);
        OK(SCIUnmapSegment(lm, 0, &err));
        sfx_kill(b); /* a connector dies: the owner sees it disconnect */
        for (int i = 0; i < 1000 && conn_events[SCI_CB_DISCONNECT] < 1; i++)
                sfx_nap(10);
        assert_int_equal(conn_events[SCI_CB_DISCONNECT], 1);
        /* Removed by force: the remaining connector loses it (and keeps running). */
        OK(SCIRemoveSegment(s, SCI_FLAG_FORCE_REMOVE, &err));
        char ans[64];
        for (int i = 0; i < 500; i++, sfx_nap(10)) {
                assert_int_equal(sfx_cmd(c, ans, sizeof(ans), "rread 0"), 0);
                if (strtoul(ans, NULL, 0) == 0xffffffffu)
                        break;
        }
        assert_int_equal(strtoul(ans, NULL, 0), 0xffffffffu);
        sfx_ok(c, "disconnect");
        sfx_quit(c);
        OK(SCIClose(sd, 0, &err));
}

/* ---- interrupts --------------------------------------------------------------------------------
 */

static int int_calls;
static sci_callback_action_t int_cb(void *arg, sci_local_interrupt_t i, sci_error_t e)
{
        (void)arg;
        (void)i;
        (void)e;
        return __atomic_add_fetch(&int_calls, 1, __ATOMIC_SEQ_CST) >= 3 ? SCI_CALLBACK_CANCEL
                                                                        : SCI_CALLBACK_CONTINUE;
}

static void test_interrupts(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_local_interrupt_t li, li2;
        unsigned no = 0x40;
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCICreateInterrupt(sd, &li, 0, NULL, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO, SCICreateInterrupt(sd, &li, 3, &no, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCICreateInterrupt(sd, &li, 0, &no, NULL, NULL, 0x100, &err));
        OK(SCICreateInterrupt(sd, &li, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err));
        assert_int_equal(no, 0x40);
        EXPECT(SCI_ERR_INTNO_USED,
               SCICreateInterrupt(sd, &li2, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err));
        unsigned auto_no = 0;
        OK(SCICreateInterrupt(sd, &li2, 0, &auto_no, NULL, NULL, 0, &err));
        assert_int_not_equal(auto_no, 0x40);
        OK(SCIRemoveInterrupt(li2, 0, &err));
        EXPECT(SCI_ERR_TIMEOUT, SCIWaitForInterrupt(li, 0, 0, &err));
        EXPECT(SCI_ERR_TIMEOUT, SCIWaitForInterrupt(li, 100, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIWaitForInterrupt(li, 100, 1, &err));
        /* b triggers ours, twice: two waits succeed, a third times out. */
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "int_connect %u 0x40", NODE_A);
        sfx_ok(b, "int_trigger");
        OK(SCIWaitForInterrupt(li, 5000, 0, &err));
        sfx_ok(b, "int_trigger");
        OK(SCIWaitForInterrupt(li, 5000, 0, &err));
        EXPECT(SCI_ERR_TIMEOUT, SCIWaitForInterrupt(li, 50, 0, &err));
        /* We trigger b's. */
        sfx_ok(b, "int_create 0x41");
        sci_remote_interrupt_t ri;
        EXPECT(SCI_ERR_NO_SUCH_INTNO, SCIConnectInterrupt(sd, &ri, NODE_B, 0, 0x999, 0, 0, &err));
        EXPECT(SCI_ERR_TIMEOUT, SCIConnectInterrupt(sd, &ri, NODE_B, 0, 0x999, 200, 0, &err));
        EXPECT(SCI_ERR_NO_SUCH_NODEID, SCIConnectInterrupt(sd, &ri, 99, 0, 0x41, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIConnectInterrupt(sd, &ri, NODE_B, 0, 0x41, 0, 2, &err));
        OK(SCIConnectInterrupt(sd, &ri, NODE_B, 0, 0x41, 1000, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCITriggerInterrupt(ri, 1, &err));
        OK(SCITriggerInterrupt(ri, 0, &err));
        sfx_ok(b, "int_wait 5000");
        /* b removes its interrupt: our trigger says we are not connected any more. */
        sfx_ok(b, "int_remove");
        for (int i = 0; i < 500; i++, sfx_nap(10)) {
                err = SCI_ERR_OK;
                SCITriggerInterrupt(ri, 0, &err);
                if (err == SCI_ERR_NOT_CONNECTED)
                        break;
        }
        assert_int_equal(err, SCI_ERR_NOT_CONNECTED);
        OK(SCIDisconnectInterrupt(ri, 0, &err));
        /* A callback takes the interrupts (waits are refused) until it cancels. */
        OK(SCIRemoveInterrupt(li, 0, &err));
        int_calls = 0;
        no = 0x42;
        OK(SCICreateInterrupt(sd, &li, 0, &no, int_cb, NULL,
                              SCI_FLAG_FIXED_INTNO | SCI_FLAG_USE_CALLBACK, &err));
        EXPECT(SCI_ERR_ILLEGAL_OPERATION, SCIWaitForInterrupt(li, 10, 0, &err));
        sfx_ok(b, "int_connect %u 0x42", NODE_A);
        for (int k = 0; k < 3; k++) {
                sfx_ok(b, "int_trigger");
                for (int i = 0; i < 500 && __atomic_load_n(&int_calls, __ATOMIC_SEQ_CST) <= k; i++)
                        sfx_nap(10);
        }
        assert_int_equal(int_calls, 3);
        sfx_ok(b, "int_trigger");
        sfx_nap(100);
        assert_int_equal(int_calls, 3); /* cancelled */
        OK(SCIRemoveInterrupt(li, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveInterrupt(li, 0, &err));
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

/* Another thread waits on an interrupt that is removed under it: the wait ends, cancelled. */
static void *waiter(void *arg)
{
        sci_error_t e = SCI_ERR_OK;
        SCIWaitForInterrupt(*(sci_local_interrupt_t *)arg, SCI_INFINITE_TIMEOUT, 0, &e);
        return (void *)(uintptr_t)e;
}

static void test_interrupt_removed_while_waiting(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        static sci_local_interrupt_t li;
        unsigned no = 0x43;
        OK(SCICreateInterrupt(sd, &li, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err));
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, waiter, &li), 0);
        sfx_nap(100);
        OK(SCIRemoveInterrupt(li, 0, &err));
        void *ret;
        pthread_join(th, &ret);
        assert_int_equal((sci_error_t)(uintptr_t)ret, SCI_ERR_CANCELLED);
        OK(SCIClose(sd, 0, &err));
}

static size_t dint_len;
static uint8_t dint_data[64];
static sci_callback_action_t dint_cb(void *arg, sci_local_data_interrupt_t i, void *data,
                                     unsigned length, sci_error_t e)
{
        (void)arg;
        (void)i;
        (void)e;
        if (length <= sizeof(dint_data))
                memcpy(dint_data, data, length);
        __atomic_store_n(&dint_len, length, __ATOMIC_SEQ_CST);
        return SCI_CALLBACK_CONTINUE;
}

static void test_data_interrupts(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_local_data_interrupt_t li;
        unsigned no = 0x50;
        OK(SCICreateDataInterrupt(sd, &li, 0, &no, NULL, NULL, SCI_FLAG_FIXED_INTNO, &err));
        char buf[2048];
        unsigned len = sizeof(buf);
        EXPECT(SCI_ERR_TIMEOUT, SCIWaitForDataInterrupt(li, buf, &len, 50, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDataInterrupt(li, NULL, &len, 50, 0, &err));
        struct peer *b = sfx_peer("b");
        struct peer *c = sfx_peer("c");
        sfx_ok(b, "dint_connect %u 0x50", NODE_A);
        sfx_ok(c, "dint_connect %u 0x50", NODE_A);
        /* Messages from two writers, each in order; sizes 1, 4, 1024 bytes. */
        sfx_ok(b, "dint_trigger 01");
        sfx_ok(c, "dint_trigger 0a0b0c0d");
        char big[2 * 1024 + 1];
        for (int i = 0; i < 1024; i++)
                sprintf(big + 2 * i, "%02x", (uint8_t)(i * 3));
        sfx_ok(b, "dint_trigger %s", big);
        bool got1 = false, got4 = false, got1024 = false;
        for (int k = 0; k < 3; k++) {
                len = sizeof(buf);
                OK(SCIWaitForDataInterrupt(li, buf, &len, 5000, 0, &err));
                if (len == 1) {
                        assert_int_equal((uint8_t)buf[0], 1);
                        got1 = true;
                } else if (len == 4) {
                        assert_memory_equal(buf, "\x0a\x0b\x0c\x0d", 4);
                        got4 = true;
                } else if (len == 1024) {
                        assert_true(got1); /* b's messages arrive in b's order */
                        for (int i = 0; i < 1024; i++)
                                assert_int_equal((uint8_t)buf[i], (uint8_t)(i * 3));
                        got1024 = true;
                }
        }
        assert_true(got1 && got4 && got1024);
        /* Too small a buffer: the message stays, the needed length is told. */
        sfx_ok(b, "dint_trigger 0102030405060708");
        len = 4;
        EXPECT(SCI_ERR_OVERFLOW, SCIWaitForDataInterrupt(li, buf, &len, 5000, 0, &err));
        assert_int_equal(len, 8);
        len = sizeof(buf);
        OK(SCIWaitForDataInterrupt(li, buf, &len, 5000, 0, &err));
        assert_int_equal(len, 8);
        /* More than a lane holds unread: the trigger fails at once, nothing is sent. */
        for (int i = 0; i < 8; i++)
                sfx_ok(c, "dint_trigger %02x", i);
        assert_int_equal(sfx_cmd(c, NULL, 0, "dint_trigger ff"), SCI_ERR_NOSPC);
        for (int i = 0; i < 8; i++) {
                len = sizeof(buf);
                OK(SCIWaitForDataInterrupt(li, buf, &len, 5000, 0, &err));
                assert_int_equal(len, 1);
                assert_int_equal((uint8_t)buf[0], i);
        }
        sfx_ok(c, "dint_trigger ff");
        len = sizeof(buf);
        OK(SCIWaitForDataInterrupt(li, buf, &len, 5000, 0, &err));
        assert_int_equal((uint8_t)buf[0], 0xff);
        /* Ours to b: the payload limit. */
        sfx_ok(b, "dint_create 0x51");
        sci_remote_data_interrupt_t ri;
        OK(SCIConnectDataInterrupt(sd, &ri, NODE_B, 0, 0x51, 1000, 0, &err));
        EXPECT(SCI_ERR_OUT_OF_RANGE, SCITriggerDataInterrupt(ri, buf, 1025, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCITriggerDataInterrupt(ri, NULL, 4, 0, &err));
        OK(SCITriggerDataInterrupt(ri, "hello", 5, 0, &err));
        char ans[64];
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "dint_wait 5000"), 0);
        assert_string_equal(ans, "5 68656c6c6f");
        OK(SCIDisconnectDataInterrupt(ri, 0, &err));
        sfx_quit(b);
        sfx_quit(c);
        OK(SCIRemoveDataInterrupt(li, 0, &err));
        /* With a callback. */
        no = 0x52;
        OK(SCICreateDataInterrupt(sd, &li, 0, &no, dint_cb, NULL,
                                  SCI_FLAG_FIXED_INTNO | SCI_FLAG_USE_CALLBACK, &err));
        len = sizeof(buf);
        EXPECT(SCI_ERR_ILLEGAL_OPERATION, SCIWaitForDataInterrupt(li, buf, &len, 10, 0, &err));
        b = sfx_peer("b");
        sfx_ok(b, "dint_connect %u 0x52", NODE_A);
        dint_len = 0;
        sfx_ok(b, "dint_trigger c0ffee");
        for (int i = 0; i < 500 && !__atomic_load_n(&dint_len, __ATOMIC_SEQ_CST); i++)
                sfx_nap(10);
        assert_int_equal(dint_len, 3);
        assert_memory_equal(dint_data, "\xc0\xff\xee", 3);
        sfx_quit(b);
        OK(SCIRemoveDataInterrupt(li, 0, &err));
        OK(SCIClose(sd, 0, &err));
}

/* ---- DMA ---------------------------------------------------------------------------------------
 */

static int dma_calls;
static sci_callback_action_t dma_cb(void *arg, sci_dma_queue_t q, sci_error_t e)
{
        (void)q;
        if (e == SCI_ERR_OK)
                __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
        return SCI_CALLBACK_CONTINUE;
}

/* One transfer of size bytes to remote offset roff (a fresh, zeroed area of the segment). */
static void dma_round(sci_dma_queue_t dq, sci_local_segment_t ls, sci_remote_segment_t rs,
                      volatile uint8_t *lp, volatile uint8_t *rp, size_t size, size_t roff,
                      unsigned flags, uint8_t seed)
{
        for (size_t k = 0; k < size; k++)
                lp[k] = (uint8_t)(seed + k);
        OK(SCIStartDmaTransfer(dq, ls, rs, 0, size, roff, NULL, NULL, flags, &err));
        sci_dma_queue_state_t st;
        OK(st = SCIWaitForDMAQueue(dq, 10000, 0, &err));
        assert_int_equal(st, SCI_DMAQUEUE_DONE);
        for (size_t k = 0; k < size; k += 251)
                if (rp[roff + k] != (uint8_t)(seed + k))
                        fail_msg("byte %zu of a %zu-byte DMA write", k, size);
        assert_int_equal(rp[roff + size - 1], (uint8_t)(seed + size - 1));
        assert_int_equal(rp[roff + size], 0); /* nothing past the end */
}

static void test_dma(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *b = sfx_peer("b");
        const size_t S = 4 << 20;
        sfx_ok(b, "seg_create 0x6000 %zu 0", S);
        sfx_ok(b, "seg_available 0x6000");
        sci_remote_segment_t rs;
        sci_map_t rm, lm;
        sci_local_segment_t ls;
        OK(SCIConnectSegment(sd, &rs, NODE_B, 0x6000, 0, NULL, NULL, 1000, 0, &err));
        volatile uint8_t *rp, *lp;
        OK(rp = SCIMapRemoteSegment(rs, &rm, 0, S, NULL, 0, &err));
        lp = make_segment(sd, 0x6001, S, &ls, &lm);
        sci_dma_queue_t dq;
        OK(SCICreateDMAQueue(sd, &dq, 0, 0, 0, &err)); /* 0 entries: one */
        OK(SCIRemoveDMAQueue(dq, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCICreateDMAQueue(sd, NULL, 0, 4, 0, &err));
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO, SCICreateDMAQueue(sd, &dq, 2, 4, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCICreateDMAQueue(sd, &dq, 0, 4, 0x40000000u, &err));
        OK(SCICreateDMAQueue(sd, &dq, 0, 4, 0, &err));
        assert_int_equal(SCIDMAQueueState(dq), SCI_DMAQUEUE_IDLE);
        sci_dma_queue_state_t st;
        OK(st = SCIWaitForDMAQueue(dq, 0, 0, &err)); /* nothing posted */
        assert_int_equal(st, SCI_DMAQUEUE_IDLE);
        /* The adapter's engine, several sizes; the CPU fallback (SYSDMA); reads. */
        dma_round(dq, ls, rs, lp, rp, 1, 4096, 0, 1);
        dma_round(dq, ls, rs, lp, rp, 4096, 8192, 0, 2);
        dma_round(dq, ls, rs, lp, rp, 1 << 20, 16384, 0, 3);
        dma_round(dq, ls, rs, lp, rp, 12345, 2 << 20, SCI_FLAG_DMA_SYSDMA, 4);
        memset((void *)(uintptr_t)(lp + 65536), 0, 8192);
        OK(SCIStartDmaTransfer(dq, ls, rs, 65536, 8192, 2 << 20, NULL, NULL,
                               SCI_FLAG_DMA_READ | SCI_FLAG_DMA_WAIT, &err));
        assert_int_equal(lp[65536 + 100], (uint8_t)(4 + 100));
        /* The vector form: three pieces, and its limits. */
        dis_dma_vec_t v[3] = {{100, 0, 200000, 0}, {200, 1000, 300000, 0}, {300, 2000, 400000, 0}};
        for (size_t k = 0; k < 3000; k++)
                lp[k] = (uint8_t)(k ^ 0x5a);
        OK(SCIStartDmaTransferVec(dq, ls, rs, 3, v, NULL, NULL, 0, &err));
        OK(SCIWaitForDMAQueue(dq, 10000, 0, &err));
        assert_int_equal(rp[200000 + 99], (uint8_t)(99 ^ 0x5a));
        assert_int_equal(rp[300000 + 199], (uint8_t)(1199 ^ 0x5a));
        assert_int_equal(rp[400000 + 299], (uint8_t)(2299 ^ 0x5a));
        static dis_dma_vec_t many[DIS_DMA_MAX_VECLEN + 1];
        EXPECT(SCI_ERR_MAX_ENTRIES, SCIStartDmaTransferVec(dq, ls, rs, DIS_DMA_MAX_VECLEN + 1, many,
                                                           NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCIStartDmaTransferVec(dq, ls, rs, 0, v, NULL, NULL, 0, &err));
        v[0].flags = 0xdeadbeef; /* not read: programs leave it uninitialized */
        OK(SCIStartDmaTransferVec(dq, ls, rs, 1, v, NULL, NULL, 0, &err));
        OK(SCIWaitForDMAQueue(dq, 10000, 0, &err));
        EXPECT(SCI_ERR_OUT_OF_RANGE,
               SCIStartDmaTransfer(dq, ls, rs, 0, 8192, S - 4096, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_OUT_OF_RANGE,
               SCIStartDmaTransfer(dq, ls, rs, S - 1, 2, 0, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCIStartDmaTransfer(dq, ls, rs, 0, 0, 0, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG,
               SCIStartDmaTransfer(dq, ls, rs, 0, 8, 0, NULL, NULL, 0x2, &err));
        /* Callbacks, and a queue kept busy: its segments cannot go, nor can it. */
        dma_calls = 0;
        OK(SCIStartDmaTransfer(dq, ls, rs, 0, S, 0, dma_cb, &dma_calls, SCI_FLAG_USE_CALLBACK,
                               &err));
        OK(SCIStartDmaTransfer(dq, ls, rs, 0, 4096, 0, dma_cb, &dma_calls, SCI_FLAG_USE_CALLBACK,
                               &err));
        if (SCIDMAQueueState(dq) == SCI_DMAQUEUE_POSTED) {
                EXPECT(SCI_ERR_BUSY, SCIRemoveDMAQueue(dq, 0, &err));
                EXPECT(SCI_ERR_BUSY, SCIDisconnectSegment(rs, 0, &err));
        }
        OK(st = SCIWaitForDMAQueue(dq, 10000, 0, &err));
        assert_int_equal(st, SCI_DMAQUEUE_DONE);
        for (int i = 0; i < 200 && dma_calls < 2; i++)
                sfx_nap(10);
        assert_int_equal(dma_calls, 2);
        /* Abort: the queue ends ABORTED, whatever was in flight. */
        OK(SCIStartDmaTransfer(dq, ls, rs, 0, S, 0, NULL, NULL, 0, &err));
        OK(SCIAbortDMAQueue(dq, 0, &err));
        st = SCIDMAQueueState(dq);
        assert_true(st == SCI_DMAQUEUE_ABORTED || st == SCI_DMAQUEUE_DONE);
        /* A lost remote segment: transfers are refused. */
        sfx_kill(b);
        sci_error_t status;
        OK(SCIWaitForRemoteSegmentEvent(rs, &status, 10000, 0, &err));
        EXPECT(SCI_ERR_NOT_CONNECTED,
               SCIStartDmaTransfer(dq, ls, rs, 0, 8, 0, NULL, NULL, 0, &err));
        OK(SCIRemoveDMAQueue(dq, 0, &err));
        OK(SCIUnmapSegment(rm, 0, &err));
        OK(SCIDisconnectSegment(rs, 0, &err));
        drop_segment(ls, lm);
        OK(SCIClose(sd, 0, &err));
}

/* ---- multicast ---------------------------------------------------------------------------------
 */

static void test_broadcast(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct peer *b = sfx_peer("b"), *c = sfx_peer("c");
        sci_remote_segment_t g;
        EXPECT(SCI_ERR_NO_SUCH_SEGMENT,
               SCIConnectSegment(sd, &g, DIS_BROADCAST_NODEID_GROUP_ALL, 0x7000, 0, NULL, NULL, 0,
                                 SCI_FLAG_BROADCAST, &err));
        sfx_ok(b, "seg_create 0x7000 65536 %u", SCI_FLAG_BROADCAST);
        sfx_ok(b, "seg_available 0x7000");
        sfx_ok(c, "seg_create 0x7000 65536 %u", SCI_FLAG_BROADCAST);
        sfx_ok(c, "seg_available 0x7000");
        /* A member of another size cannot join. */
        struct peer *b2 = sfx_peer("b");
        sfx_ok(b2, "seg_create 0x7001 4096 0");
        /* A broadcast segment is not connectable one node at a time. */
        sci_remote_segment_t one;
        EXPECT(SCI_ERR_CONNECTION_REFUSED,
               SCIConnectSegment(sd, &one, NODE_B, 0x7000, 0, NULL, NULL, 0, 0, &err));
        OK(SCIConnectSegment(sd, &g, DIS_BROADCAST_NODEID_GROUP_ALL, 0x7000, 0, NULL, NULL, 1000,
                             SCI_FLAG_BROADCAST, &err));
        assert_int_equal(SCIGetRemoteSegmentSize(g), 65536);
        sci_map_t m;
        OK(SCIMapRemoteSegment(g, &m, 0, 65536, NULL, 0, &err));
        uint32_t v = 0xb0adca57;
        OK(SCIMemCpy(NULL, &v, m, 1000 * 4, 4, 0, &err));
        char ans[64];
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x7000 4000"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0xb0adca57u);
        assert_int_equal(sfx_cmd(c, ans, sizeof(ans), "seg_read 0x7000 4000"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0xb0adca57u);
        /* By DMA too (one transfer, every member). */
        sci_local_segment_t ls;
        sci_map_t lm;
        volatile uint32_t *lp = (volatile uint32_t *)make_segment(sd, 0x7002, 65536, &ls, &lm);
        lp[7] = 0x12345678;
        sci_dma_queue_t dq;
        OK(SCICreateDMAQueue(sd, &dq, 0, 1, 0, &err));
        OK(SCIStartDmaTransfer(dq, ls, g, 0, 4096, 8192, NULL, NULL, SCI_FLAG_DMA_WAIT, &err));
        EXPECT(SCI_ERR_ILLEGAL_OPERATION,
               SCIStartDmaTransfer(dq, ls, g, 0, 4096, 0, NULL, NULL, SCI_FLAG_DMA_READ, &err));
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x7000 8220"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0x12345678u);
        assert_int_equal(sfx_cmd(c, ans, sizeof(ans), "seg_read 0x7000 8220"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0x12345678u);
        OK(SCIRemoveDMAQueue(dq, 0, &err));
        drop_segment(ls, lm);
        OK(SCIUnmapSegment(m, 0, &err));
        OK(SCIDisconnectSegment(g, 0, &err));
        sfx_quit(b);
        sfx_quit(c);
        sfx_quit(b2);
        OK(SCIClose(sd, 0, &err));
}

/* ---- threads -----------------------------------------------------------------------------------
 */

struct thr {
        sci_desc_t sd;
        int id;
        int failures;
};

static void *hammer(void *arg)
{
        struct thr *t = arg;
        for (int i = 0; i < 50; i++) {
                sci_error_t e;
                sci_local_segment_t s;
                sci_map_t m;
                SCICreateSegment(t->sd, &s, 0x8000 + t->id * 100 + i, 4096, NULL, NULL, 0, &e);
                if (e != SCI_ERR_OK) {
                        t->failures++;
                        continue;
                }
                volatile uint32_t *p = SCIMapLocalSegment(s, &m, 0, 4096, NULL, 0, &e);
                if (e == SCI_ERR_OK) {
                        p[0] = (uint32_t)i;
                        t->failures += p[0] != (uint32_t)i;
                        SCIUnmapSegment(m, 0, &e);
                }
                SCIRemoveSegment(s, 0, &e);
                t->failures += e != SCI_ERR_OK;
        }
        return NULL;
}

static void test_threads(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct thr t[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
                t[i] = (struct thr){sd, i, 0};
                assert_int_equal(pthread_create(&th[i], NULL, hammer, &t[i]), 0);
        }
        for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                assert_int_equal(t[i].failures, 0);
        }
        OK(SCIClose(sd, 0, &err));
}

/* ---- SmartIO -----------------------------------------------------------------------------------
 */

static void test_device_list_and_query(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        size_t n;
        OK(n = SCIGetDeviceList(sd, NULL, 0, NULL, 0, &err));
        assert_int_equal(n, 3); /* the pool: c.nvme0, c.acc0, a.acc1 */
        sci_smartio_device_info_t f;
        memset(&f, 0, sizeof(f));
        f.fdid = f.nodeid = 0xffffffffu;
        f.pci_class = 0x010802;
        uint32_t ids[4] = {0};
        OK(n = SCIGetDeviceList(sd, ids, 4, &f, 0, &err));
        assert_int_equal(n, 1);
        assert_int_equal(ids[0], FDID_NVME);
        f.pci_class = 0;
        f.pci_vendor_id = 0xfab0;
        f.pci_device_id = 0x0002;
        OK(n = SCIGetDeviceList(sd, ids, 1, &f, 0, &err)); /* two match, one fits */
        assert_int_equal(n, 2);
        f.nodeid = NODE_C;
        OK(n = SCIGetDeviceList(sd, ids, 4, &f, 0, &err));
        assert_int_equal(n, 1);
        assert_int_equal(ids[0], FDID_ACC);
        f.nodeid = NODE_B;
        OK(n = SCIGetDeviceList(sd, ids, 4, &f, 0, &err));
        assert_int_equal(n, 0);
        memset(&f, 0, sizeof(f));
        f.fdid = f.nodeid = 0xffffffffu;
        snprintf(f.user_name, sizeof(f.user_name), "a.acc1");
        OK(n = SCIGetDeviceList(sd, ids, 4, &f, 0, &err));
        assert_int_equal(n, 1);
        assert_int_equal(ids[0], FDID_ACC1);
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIGetDeviceList(sd, NULL, 2, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIGetDeviceList(sd, ids, 4, NULL, 1, &err));

        sci_smartio_device_info_t info;
        sci_smartio_query_device_t q = {FDID_NVME, SCI_Q_DEVICE_INFO, &info};
        OK(SCIQuery(SCI_Q_DEVICE, &q, 0, &err));
        assert_int_equal(info.fdid, FDID_NVME);
        assert_int_equal(info.nodeid, NODE_C);
        assert_int_equal(info.pci_class, 0x010802);
        assert_int_equal(info.pci_vendor_id, 0xfab0);
        assert_int_equal(info.pci_device_id, 0x0001);
        assert_int_equal(info.bdf, 0x0300);
        assert_string_equal(info.user_name, "c.nvme0");
        q.fdid = 0x9999;
        EXPECT(SCI_ERR_NO_SUCH_FDID, SCIQuery(SCI_Q_DEVICE, &q, 0, &err));
        q.fdid = FDID_NVME;
        q.subcommand = 9;
        EXPECT(SCI_ERR_ILLEGAL_QUERY, SCIQuery(SCI_Q_DEVICE, &q, 0, &err));
        q.subcommand = SCI_Q_DEVICE_INFO;
        q.data = NULL;
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIQuery(SCI_Q_DEVICE, &q, 0, &err));
        OK(SCIClose(sd, 0, &err));
}

/* Borrow within 5 s: a returned borrow takes a round through the manager. */
static void borrow_eventually(sci_desc_t sd, sci_smartio_device_t *dev, uint32_t fdid,
                              unsigned flags)
{
        for (int i = 0; i < 500; i++, sfx_nap(10)) {
                err = SCI_ERR_OK;
                SCIBorrowDevice(sd, dev, fdid, flags, &err);
                if (err != SCI_ERR_NOT_AVAILABLE)
                        break;
        }
        if (err != SCI_ERR_OK)
                fail_msg("borrow of 0x%x: %s", fdid, SCIGetErrorString(err));
}

static void test_borrow(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_smartio_device_t dev, dev2;
        EXPECT(SCI_ERR_NO_SUCH_FDID, SCIBorrowDevice(sd, &dev, 0x9999, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIBorrowDevice(sd, &dev, FDID_NVME, 0x2, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIBorrowDevice(sd, NULL, FDID_NVME, 0, &err));
        /* Exclusive: nobody else, not even this node's other processes. */
        OK(SCIBorrowDevice(sd, &dev, FDID_NVME, SCI_FLAG_EXCLUSIVE, &err));
        assert_int_equal(SCIGetFabricDeviceId(dev), FDID_NVME);
        EXPECT(SCI_ERR_NOT_AVAILABLE, SCIBorrowDevice(sd, &dev2, FDID_NVME, 0, &err));
        struct peer *b = sfx_peer("b"), *c = sfx_peer("c");
        assert_int_equal(sfx_cmd(b, NULL, 0, "borrow 0x%x 0", FDID_NVME), SCI_ERR_NOT_AVAILABLE);
        assert_int_equal(sfx_cmd(c, NULL, 0, "borrow 0x%x 0", FDID_NVME), SCI_ERR_NOT_AVAILABLE);
        /* The registers: BAR0 as a device segment, mapped for I/O. */
        sci_remote_segment_t bar;
        EXPECT(SCI_ERR_NO_SUCH_SEGMENT,
               SCIConnectDeviceSegment(dev, &bar, 1, SCI_MEMTYPE_BAR, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCIConnectDeviceSegment(dev, &bar, 0, 3, NULL, NULL, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG,
               SCIConnectDeviceSegment(dev, &bar, 0, SCI_MEMTYPE_BAR, NULL, NULL, 0x2, &err));
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO,
               SCIConnectDeviceSegmentPath(dev, &bar, 0, SCI_MEMTYPE_BAR, 4, NULL, NULL, 0, &err));
        OK(SCIConnectDeviceSegmentPath(dev, &bar, 0, SCI_MEMTYPE_BAR, 0, NULL, NULL,
                                       SCI_FLAG_SPECIFY_PATH, &err));
        OK(SCIDisconnectSegment(bar, 0, &err));
        OK(SCIConnectDeviceSegment(dev, &bar, 0, SCI_MEMTYPE_BAR, NULL, NULL, 0, &err));
        assert_int_equal(SCIGetRemoteSegmentSize(bar), 16384);
        assert_int_equal(SCIGetRemoteSegmentNodeId(bar), NODE_C);
        sci_map_t bm;
        volatile uint32_t *regs;
        OK(regs = (volatile uint32_t *)SCIMapRemoteSegment(bar, &bm, 0, 16384, NULL,
                                                           SCI_FLAG_IO_MAP_IOSPACE, &err));
        assert_int_equal(regs[0x08 / 4], 0x00010400u); /* NVMe VS 1.4 */
        sci_query_remote_segment_t qr = {bar, SCI_Q_REMOTE_SEGMENT_IOADDR, {0}};
        OK(SCIQuery(SCI_Q_REMOTE_SEGMENT, &qr, 0, &err));
        assert_int_equal(qr.data.ioaddr, SCIGetMapPhysAddr(bm));
        EXPECT(SCI_ERR_BUSY, SCIReturnDevice(dev, 0, &err));
        /* The manager lets others in. */
        OK(SCIReleaseExclusiveBorrow(dev, 0, &err));
        OK(SCIReleaseExclusiveBorrow(dev, 0, &err)); /* shared already: nothing to do */
        sfx_ok(b, "borrow 0x%x 0", FDID_NVME);
        sfx_ok(c, "borrow 0x%x 0", FDID_NVME);              /* the lender's own process, shared */
        OK(SCIBorrowDevice(sd, &dev2, FDID_NVME, 0, &err)); /* this process again, shared */
        OK(SCIReturnDevice(dev2, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIReturnDevice(dev2, 0, &err));
        sfx_ok(b, "return");
        sfx_ok(c, "return");
        OK(SCIUnmapSegment(bm, 0, &err));
        OK(SCIDisconnectSegment(bar, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIReturnDevice(dev, 1, &err));
        OK(SCIReturnDevice(dev, 0, &err));
        /* A borrow belongs to its process: when it dies, the device comes back. */
        sfx_ok(b, "borrow 0x%x 1", FDID_NVME);
        EXPECT(SCI_ERR_NOT_AVAILABLE, SCIBorrowDevice(sd, &dev, FDID_NVME, 0, &err));
        sfx_kill(b);
        borrow_eventually(sd, &dev, FDID_NVME, SCI_FLAG_EXCLUSIVE);
        OK(SCIReturnDevice(dev, 0, &err));
        /* The lender's own process holds it exclusively: remote borrowers wait. */
        sfx_ok(c, "borrow 0x%x 1", FDID_NVME);
        EXPECT(SCI_ERR_NOT_AVAILABLE, SCIBorrowDevice(sd, &dev, FDID_NVME, 0, &err));
        sfx_ok(c, "return");
        borrow_eventually(sd, &dev, FDID_NVME, 0);
        OK(SCIReturnDevice(dev, 0, &err));
        sfx_quit(c);
        OK(SCIClose(sd, 0, &err));
}

static void test_device_segments(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_smartio_device_t dev;
        OK(SCIBorrowDevice(sd, &dev, FDID_ACC, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCICreateDeviceSegment(dev, 1, 8192, SCI_MEMTYPE_BAR, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCICreateDeviceSegment(dev, 1, 0, SCI_MEMTYPE_PRIVATE, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG,
               SCICreateDeviceSegment(dev, 1, 8192, SCI_MEMTYPE_PRIVATE, 0, 0x8, &err));
        /* Placement by the access hints: a submission queue near the device, ... */
        OK(SCICreateDeviceSegment(dev, 1, 8192, SCI_MEMTYPE_PRIVATE,
                                  SCI_MEMACCESS_HOST_WRITE | SCI_MEMACCESS_DEVICE_READ, 0, &err));
        EXPECT(SCI_ERR_SEGMENTID_USED,
               SCICreateDeviceSegment(dev, 1, 8192, SCI_MEMTYPE_PRIVATE, 0, 0, &err));
        /* ... a completion queue near the host. */
        OK(SCICreateDeviceSegment(dev, 2, 8192, SCI_MEMTYPE_PRIVATE,
                                  SCI_MEMACCESS_HOST_READ | SCI_MEMACCESS_DEVICE_WRITE, 0, &err));
        /* The flags overrule the hints. */
        OK(SCICreateDeviceSegment(dev, 3, 4096, SCI_MEMTYPE_PRIVATE, SCI_MEMACCESS_HOST_READ,
                                  SCI_FLAG_DEVICE_SIDE_ONLY, &err));
        OK(SCICreateDeviceSegment(dev, 4, 4096, SCI_MEMTYPE_PRIVATE, SCI_MEMACCESS_DEVICE_READ,
                                  SCI_FLAG_LOCAL_ONLY, &err));
        static const unsigned where[] = {0, NODE_C, NODE_A, NODE_C, NODE_A};
        sci_remote_segment_t r[5];
        for (unsigned i = 1; i <= 4; i++) {
                OK(SCIConnectDeviceSegment(dev, &r[i], i, SCI_MEMTYPE_PRIVATE, NULL, NULL, 0,
                                           &err));
                if (SCIGetRemoteSegmentNodeId(r[i]) != where[i])
                        fail_msg("device segment %u is on node %u, not %u", i,
                                 SCIGetRemoteSegmentNodeId(r[i]), where[i]);
        }
        EXPECT(SCI_ERR_NO_SUCH_SEGMENT,
               SCIConnectDeviceSegment(dev, &r[0], 9, SCI_MEMTYPE_PRIVATE, NULL, NULL, 0, &err));
        /* Shared: another borrower finds it (SEGMENTID_USED on create) and shares the memory. */
        OK(SCICreateDeviceSegment(dev, 5, 4096, SCI_MEMTYPE_SHARED,
                                  SCI_MEMACCESS_MULTIHOST_READ | SCI_MEMACCESS_DEVICE_WRITE, 0,
                                  &err));
        EXPECT(SCI_ERR_SEGMENTID_USED,
               SCICreateDeviceSegment(dev, 5, 4096, SCI_MEMTYPE_SHARED, 0, 0, &err));
        sci_remote_segment_t sh;
        OK(SCIConnectDeviceSegment(dev, &sh, 5, SCI_MEMTYPE_SHARED, NULL, NULL, 0, &err));
        sci_map_t shm;
        volatile uint32_t *shp;
        OK(shp = (volatile uint32_t *)SCIMapRemoteSegment(sh, &shm, 0, 4096, NULL, 0, &err));
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "borrow 0x%x 0", FDID_ACC);
        char ans[64];
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "devseg 5 4096 %u %u", SCI_MEMTYPE_SHARED,
                                 SCI_MEMACCESS_HOST_WRITE),
                         0);
        assert_int_equal(strtoul(ans, NULL, 0), NODE_A); /* read by several hosts: its creator's */
        sfx_ok(b, "rwrite 16 4242");
        assert_true(eventually32(shp + 4, 4242));
        sfx_ok(b, "disconnect");
        sfx_ok(b, "return");
        OK(SCIUnmapSegment(shm, 0, &err));
        OK(SCIDisconnectSegment(sh, 0, &err));
        for (unsigned i = 1; i <= 4; i++)
                OK(SCIDisconnectSegment(r[i], 0, &err));
        OK(SCIReturnDevice(dev, 0, &err));
        /* Device segments go with their creator's borrow. */
        OK(SCIBorrowDevice(sd, &dev, FDID_ACC, 0, &err));
        EXPECT(SCI_ERR_NO_SUCH_SEGMENT,
               SCIConnectDeviceSegment(dev, &r[1], 1, SCI_MEMTYPE_PRIVATE, NULL, NULL, 0, &err));
        OK(SCIReturnDevice(dev, 0, &err));
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

/* A borrowed accelerator's register BAR as a SISCI device segment, and its copy engine. */
struct accel {
        sci_smartio_device_t dev;
        sci_remote_segment_t bar;
        sci_map_t map;
        struct accel_drv drv;
};

static void accel_up(sci_desc_t sd, struct accel *a, uint32_t fdid)
{
        OK(SCIBorrowDevice(sd, &a->dev, fdid, 0, &err));
        OK(SCIConnectDeviceSegment(a->dev, &a->bar, 0, SCI_MEMTYPE_BAR, NULL, NULL, 0, &err));
        volatile void *regs;
        OK(regs = SCIMapRemoteSegment(a->bar, &a->map, 0, SCIGetRemoteSegmentSize(a->bar), NULL,
                                      SCI_FLAG_IO_MAP_IOSPACE, &err));
        assert_int_equal(accel_open(&a->drv, (void *)(uintptr_t)regs), 0);
}

static void accel_down(struct accel *a)
{
        OK(SCIUnmapSegment(a->map, 0, &err));
        OK(SCIDisconnectSegment(a->bar, 0, &err));
        OK(SCIReturnDevice(a->dev, 0, &err));
}

static void test_map_for_device(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct accel acc = {0}, acc1 = {0};
        accel_up(sd, &acc, FDID_ACC);
        sci_local_segment_t ls, unprepared;
        sci_map_t lm;
        OK(SCICreateSegment(sd, &ls, 0x9000, 65536, NULL, NULL, 0, &err));
        OK(SCIPrepareSegment(ls, 0, 0, &err));
        volatile uint8_t *lp;
        OK(lp = SCIMapLocalSegment(ls, &lm, 0, 65536, NULL, 0, &err));
        OK(SCICreateSegment(sd, &unprepared, 0x9001, 4096, NULL, NULL, 0, &err));
        sci_ioaddr_t io = 0;
        EXPECT(SCI_ERR_SEGMENT_NOT_PREPARED,
               SCIMapLocalSegmentForDevice(unprepared, 0, acc.dev, &io, 0, 0, 0, &err));
        OK(SCIRemoveSegment(unprepared, 0, &err));
        EXPECT(SCI_ERR_NOT_AVAILABLE,
               SCIMapLocalSegmentForDevice(ls, 0, acc.dev, &io, 0, 0, 0, &err));
        OK(SCISetSegmentAvailable(ls, 0, 0, &err));
        EXPECT(SCI_ERR_OUT_OF_RANGE,
               SCIMapLocalSegmentForDevice(ls, 0, acc.dev, &io, 65536, 1, 0, &err));
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO,
               SCIMapLocalSegmentForDevice(ls, 3, acc.dev, &io, 0, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG,
               SCIMapLocalSegmentForDevice(ls, 0, acc.dev, &io, 0, 0, 1, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
               SCIMapLocalSegmentForDevice(ls, 0, acc.dev, NULL, 0, 0, 0, &err));
        OK(SCIMapLocalSegmentForDevice(ls, 0, acc.dev, &io, 0, 0, 0, &err));
        assert_int_not_equal(io, 0);
        sci_ioaddr_t io_again;
        EXPECT(SCI_ERR_BUSY, SCIMapLocalSegmentForDevice(ls, 0, acc.dev, &io_again, 0, 0, 0, &err));
        /* The device reads and writes our memory across the fabric at the address it got. */
        for (int i = 0; i < 4096; i++)
                lp[i] = (uint8_t)(i * 13);
        assert_int_equal(accel_copy(&acc.drv, io, io + 8192, 4096, 5000, NULL), 0);
        for (int i = 0; i < 4096; i += 97)
                assert_int_equal(lp[8192 + i], (uint8_t)(i * 13));
        EXPECT(SCI_ERR_BUSY, SCIRemoveSegment(ls, 0, &err));
        EXPECT(SCI_ERR_BUSY, SCIReturnDevice(acc.dev, 0, &err));

        /* A segment of another node, for the device. */
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x9100 65536 0");
        sfx_ok(b, "seg_available 0x9100");
        sci_remote_segment_t rs;
        OK(SCIConnectSegment(sd, &rs, NODE_B, 0x9100, 0, NULL, NULL, 1000, 0, &err));
        sci_ioaddr_t rio;
        EXPECT(SCI_ERR_OUT_OF_RANGE,
               SCIMapRemoteSegmentForDevice(rs, acc.dev, &rio, 65536, 4, 0, &err));
        OK(SCIMapRemoteSegmentForDevice(rs, acc.dev, &rio, 4096, 4096, 0, &err));
        EXPECT(SCI_ERR_BUSY, SCIMapRemoteSegmentForDevice(rs, acc.dev, &rio, 0, 0, 0, &err));
        EXPECT(SCI_ERR_BUSY, SCIDisconnectSegment(rs, 0, &err));
        *(volatile uint32_t *)lp = 0x600dda7a;
        assert_int_equal(accel_copy(&acc.drv, io, rio + 16, 4, 5000, NULL), 0);
        char ans[64];
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x9100 %d", 4096 + 16), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0x600dda7au);

        /* Peer to peer: a's own accelerator writes into c's accelerator's memory (its BAR2). */
        accel_up(sd, &acc1, FDID_ACC1);
        sci_remote_segment_t bar2;
        sci_map_t b2m;
        OK(SCIConnectDeviceSegment(acc.dev, &bar2, 2, SCI_MEMTYPE_BAR, NULL, NULL, 0, &err));
        volatile uint32_t *devmem;
        OK(devmem = (volatile uint32_t *)SCIMapRemoteSegment(bar2, &b2m, 0, 65536, NULL, 0, &err));
        sci_ioaddr_t io1, p2p;
        OK(SCIMapLocalSegmentForDevice(ls, 0, acc1.dev, &io1, 0, 0, 0, &err));
        OK(SCIMapRemoteSegmentForDevice(bar2, acc1.dev, &p2p, 0, 65536, 0, &err));
        *(volatile uint32_t *)lp = 0xfeedf00d;
        devmem[10] = 0;
        assert_int_equal(accel_copy(&acc1.drv, io1, p2p + 40, 4, 5000, NULL), 0);
        assert_true(eventually32(devmem + 10, 0xfeedf00du));
        OK(SCIUnmapRemoteSegmentForDevice(bar2, acc1.dev, 0, &err));
        EXPECT(SCI_ERR_NOT_CONNECTED, SCIUnmapRemoteSegmentForDevice(bar2, acc1.dev, 0, &err));
        OK(SCIUnmapLocalSegmentForDevice(ls, 0, acc1.dev, 0, &err));
        OK(SCIUnmapSegment(b2m, 0, &err));
        OK(SCIDisconnectSegment(bar2, 0, &err));
        accel_down(&acc1);

        OK(SCIUnmapRemoteSegmentForDevice(rs, acc.dev, 0, &err));
        OK(SCIDisconnectSegment(rs, 0, &err));
        OK(SCIUnmapLocalSegmentForDevice(ls, 0, acc.dev, 0, &err));
        EXPECT(SCI_ERR_NOT_CONNECTED, SCIUnmapLocalSegmentForDevice(ls, 0, acc.dev, 0, &err));
        accel_down(&acc);
        drop_segment(ls, lm);
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

static void test_requester(void **state)
{
        (void)state;
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        struct accel acc1 = {0};
        accel_up(sd, &acc1, FDID_ACC1);
        sci_local_segment_t ls;
        sci_map_t lm;
        volatile uint32_t *lp = (volatile uint32_t *)make_segment(sd, 0x9200, 4096, &ls, &lm);
        sci_ioaddr_t io;
        OK(SCIMapLocalSegmentForDevice(ls, 0, acc1.dev, &io, 0, 0, 0, &err));
        struct peer *b = sfx_peer("b");
        sfx_ok(b, "seg_create 0x9300 4096 0");
        sfx_ok(b, "seg_available 0x9300");
        sci_remote_segment_t rs;
        OK(SCIConnectSegment(sd, &rs, NODE_B, 0x9300, 0, NULL, NULL, 1000, 0, &err));
        /* Where this host reaches the segment: through the window the CPU connection set up. */
        sci_query_remote_segment_t q = {rs, SCI_Q_REMOTE_SEGMENT_IOADDR, {0}};
        OK(SCIQuery(SCI_Q_REMOTE_SEGMENT, &q, 0, &err));
        char ans[64];
        /* The local device is not in the adapter's requester table: its writes are dropped. */
        lp[0] = 0x1111;
        accel_copy(&acc1.drv, io, q.data.ioaddr, 4, 5000, NULL);
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x9300 0"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0);
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRegisterPCIeRequester(sd, 0, 0x77, 0, 0, &err));
        EXPECT(SCI_ERR_NO_SUCH_ADAPTERNO, SCIRegisterPCIeRequester(sd, 2, 5, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_FLAG, SCIRegisterPCIeRequester(sd, 0, 5, 0, 0x2, &err));
        OK(SCIRegisterPCIeRequester(sd, 0, 5, 0, 0, &err)); /* a.acc1 is 0000:05:00.0 */
        EXPECT(SCI_ERR_BUSY, SCIRegisterPCIeRequester(sd, 0, 5, 0, 0, &err));
        EXPECT(SCI_ERR_BUSY, SCIClose(sd, 0, &err));
        lp[0] = 0x2222;
        assert_int_equal(accel_copy(&acc1.drv, io, q.data.ioaddr, 4, 5000, NULL), 0);
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x9300 0"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0x2222);
        OK(SCIUnregisterPCIeRequester(sd, 0, 5, 0, 0, &err));
        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIUnregisterPCIeRequester(sd, 0, 5, 0, 0, &err));
        lp[0] = 0x3333;
        accel_copy(&acc1.drv, io, q.data.ioaddr, 4, 5000, NULL);
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x9300 0"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0x2222); /* dropped again */
        OK(SCIRegisterPCIeRequester(sd, 0, 5, 0, SCI_FLAG_PCIE_REQUESTER_GLOBAL, &err));
        lp[0] = 0x4444;
        assert_int_equal(accel_copy(&acc1.drv, io, q.data.ioaddr, 4, 5000, NULL), 0);
        assert_int_equal(sfx_cmd(b, ans, sizeof(ans), "seg_read 0x9300 0"), 0);
        assert_int_equal(strtoul(ans, NULL, 0), 0x4444);
        OK(SCIUnregisterPCIeRequester(sd, 0, 5, 0, SCI_FLAG_PCIE_REQUESTER_GLOBAL, &err));
        OK(SCIDisconnectSegment(rs, 0, &err));
        OK(SCIUnmapLocalSegmentForDevice(ls, 0, acc1.dev, 0, &err));
        drop_segment(ls, lm);
        accel_down(&acc1);
        sfx_quit(b);
        OK(SCIClose(sd, 0, &err));
}

/* ---- everything with bad handles ---------------------------------------------------------------
 */

static void test_bad_handles(void **state)
{
        (void)state;
        /* NULL, forged, and freed handles of every kind; a handle of the wrong kind. */
        sci_desc_t sd;
        OK(SCIOpen(&sd, 0, &err));
        sci_local_segment_t freed_seg;
        OK(SCICreateSegment(sd, &freed_seg, 0x3600, 4096, NULL, NULL, 0, &err));
        OK(SCIRemoveSegment(freed_seg, 0, &err));
        void *bad[] = {NULL, (void *)(uintptr_t)0xdeadbeef, (void *)(uintptr_t)1, (void *)freed_seg,
                       (void *)sd};
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
                void *h = bad[k];
                unsigned u = 0;
                sci_map_t m;
                sci_sequence_t q;
                sci_ioaddr_t io;
                sci_error_t st;
                char buf[16];
                unsigned len = sizeof(buf);
                dis_dma_vec_t v = {16, 0, 0, 0};
                if (h != (void *)sd) {
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIClose(h, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                               SCICreateSegment(h, (void *)&m, 1, 4096, NULL, NULL, 0, &err));
                        EXPECT(
                            SCI_ERR_ILLEGAL_PARAMETER,
                            SCIConnectSegment(h, (void *)&m, NODE_B, 1, 0, NULL, NULL, 0, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                               SCICreateDMAQueue(h, (void *)&m, 0, 1, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                               SCICreateInterrupt(h, (void *)&m, 0, &u, NULL, NULL, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                               SCIConnectInterrupt(h, (void *)&m, NODE_B, 0, 1, 0, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                               SCIBorrowDevice(h, (void *)&m, FDID_NVME, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                               SCIGetDeviceList(h, NULL, 0, NULL, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIProbeNode(h, 0, NODE_B, 0, &err));
                        EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                               SCIRegisterPCIeRequester(h, 0, 5, 0, 0, &err));
                }
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSegment(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIPrepareSegment(h, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCISetSegmentAvailable(h, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCISetSegmentUnavailable(h, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIMapLocalSegment(h, &m, 0, 16, NULL, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIMapRemoteSegment(h, &m, 0, 16, NULL, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapSegment(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectSegment(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCICreateMapSequence(h, &q, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveSequence(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIStartSequence(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCICheckSequence(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIMemCpy(NULL, buf, h, 0, 4, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIWaitForLocalSegmentEvent(h, &u, &u, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForRemoteSegmentEvent(h, &st, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIAttachPhysicalMemory(0x100000, NULL, 0, 4096, h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRegisterSegmentMemory(buf, 16, h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveDMAQueue(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIAbortDMAQueue(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIStartDmaTransfer(h, h, h, 0, 16, 0, NULL, NULL, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIStartDmaTransferVec(h, h, h, 1, &v, NULL, NULL, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForDMAQueue(h, 0, 0, &err));
                assert_int_equal(SCIDMAQueueState(h), SCI_DMAQUEUE_ERROR);
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveInterrupt(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIWaitForInterrupt(h, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectInterrupt(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCITriggerInterrupt(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIRemoveDataInterrupt(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIWaitForDataInterrupt(h, buf, &len, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIDisconnectDataInterrupt(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCITriggerDataInterrupt(h, buf, 4, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIReturnDevice(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIReleaseExclusiveBorrow(h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIConnectDeviceSegment(h, (void *)&m, 0, SCI_MEMTYPE_BAR, NULL, NULL, 0,
                                               &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCICreateDeviceSegment(h, 1, 4096, SCI_MEMTYPE_PRIVATE, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIMapLocalSegmentForDevice(h, 0, h, &io, 0, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapLocalSegmentForDevice(h, 0, h, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER,
                       SCIMapRemoteSegmentForDevice(h, h, &io, 0, 0, 0, &err));
                EXPECT(SCI_ERR_ILLEGAL_PARAMETER, SCIUnmapRemoteSegmentForDevice(h, h, 0, &err));
                assert_int_equal(SCIGetLocalSegmentSize(h), 0);
                assert_int_equal(SCIGetRemoteSegmentSize(h), 0);
                assert_int_equal(SCIGetLocalSegmentId(h), 0);
                assert_int_equal(SCIGetRemoteSegmentId(h), 0);
                assert_int_equal(SCIGetRemoteSegmentNodeId(h), 0);
                assert_null(SCIGetMapPointer(h));
                assert_int_equal(SCIGetMapPhysAddr(h), 0);
                assert_int_equal(SCIGetFabricDeviceId(h), 0);
                SCIFlush(h, 0);
                SCIStoreBarrier(h, 0);
        }
        OK(SCIClose(sd, 0, &err));
}

static void test_not_initialized(void **state)
{
        (void)state;
        /* Before SCIInitialize (and after the last SCITerminate) every call says so. */
        SCITerminate(); /* the suite's own initialization */
        sci_desc_t sd;
        unsigned id;
        EXPECT(SCI_ERR_NOT_INITIALIZED, SCIOpen(&sd, 0, &err));
        EXPECT(SCI_ERR_NOT_INITIALIZED, SCIGetLocalNodeId(0, &id, 0, &err));
        EXPECT(SCI_ERR_NOT_INITIALIZED, SCIQuery(SCI_Q_API, &id, 0, &err));
        SCITerminate(); /* one too many: nothing happens */
        OK(SCIInitialize(0, &err));
        OK(SCIOpen(&sd, 0, &err));
        OK(SCIClose(sd, 0, &err));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_init_open_close, sfx_kill_all),
            cmocka_unit_test_teardown(test_identity_and_queries, sfx_kill_all),
            cmocka_unit_test_teardown(test_error_strings, sfx_kill_all),
            cmocka_unit_test_teardown(test_local_segments, sfx_kill_all),
            cmocka_unit_test_teardown(test_connect_errors, sfx_kill_all),
            cmocka_unit_test_teardown(test_connect_retry_until_created, sfx_kill_all),
            cmocka_unit_test_teardown(test_remote_access, sfx_kill_all),
            cmocka_unit_test_teardown(test_connect_same_node, sfx_kill_all),
            cmocka_unit_test_teardown(test_owner_dies, sfx_kill_all),
            cmocka_unit_test_teardown(test_connector_dies, sfx_kill_all),
            cmocka_unit_test_teardown(test_link_events, sfx_kill_all),
            cmocka_unit_test_teardown(test_owner_daemon_restarts, sfx_kill_all),
            cmocka_unit_test_teardown(test_interrupts, sfx_kill_all),
            cmocka_unit_test_teardown(test_interrupt_removed_while_waiting, sfx_kill_all),
            cmocka_unit_test_teardown(test_data_interrupts, sfx_kill_all),
            cmocka_unit_test_teardown(test_dma, sfx_kill_all),
            cmocka_unit_test_teardown(test_broadcast, sfx_kill_all),
            cmocka_unit_test_teardown(test_threads, sfx_kill_all),
            cmocka_unit_test_teardown(test_device_list_and_query, sfx_kill_all),
            cmocka_unit_test_teardown(test_borrow, sfx_kill_all),
            cmocka_unit_test_teardown(test_device_segments, sfx_kill_all),
            cmocka_unit_test_teardown(test_map_for_device, sfx_kill_all),
            cmocka_unit_test_teardown(test_requester, sfx_kill_all),
            cmocka_unit_test_teardown(test_bad_handles, sfx_kill_all),
            cmocka_unit_test_teardown(test_not_initialized, sfx_kill_all),
        };
        return cmocka_run_group_tests_name("libsisci", tests, sfx_setup, sfx_teardown);
}
