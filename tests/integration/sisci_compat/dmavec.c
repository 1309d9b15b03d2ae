/* dmavec: long DMA vectors on a short queue (maxEntries counts transfers), element flags left
 * uninitialized, a queue created with 0 entries, a transfer from process memory, a requested
 * channel. Usage: dmavec -server | dmavec -client NODEID */
#include <string.h>
#include <unistd.h>

#include "sxc.h"

#define SEG_ID 0x5c30
#define SIZE   (1u << 20)
#define ELEM   512u

static unsigned char pattern(size_t k, unsigned round)
{
        return (unsigned char)(k * 7 + round);
}

int main(int argc, char **argv)
{
        CHECK(argc >= 2, "usage: dmavec -server | -client NODEID");
        sci_desc_t sd;
        sci_error_t err;
        TRY(SCIInitialize, NO_FLAGS);
        TRY(SCIOpen, &sd, NO_FLAGS);
        if (!strcmp(argv[1], "-server")) {
                sci_local_segment_t seg;
                TRY(SCICreateSegment, sd, &seg, SEG_ID, SIZE, NO_CALLBACK, NO_ARG, NO_FLAGS);
                TRY(SCIPrepareSegment, seg, ADAPTER_NO, NO_FLAGS);
                TRY(SCISetSegmentAvailable, seg, ADAPTER_NO, NO_FLAGS);
                unsigned node, adapter;
                sci_segment_cb_reason_t why;
                do
                        why = SCIWaitForLocalSegmentEvent(seg, &node, &adapter,
                                                          SCI_INFINITE_TIMEOUT, NO_FLAGS, &err);
                while (err == SCI_ERR_OK && why != SCI_CB_DISCONNECT);
                TRY(SCIRemoveSegment, seg, NO_FLAGS);
                printf("served\n");
                TRY(SCIClose, sd, NO_FLAGS);
                SCITerminate();
                return 0;
        }
        CHECK(argc == 3, "usage: dmavec -client NODEID");
        sci_remote_segment_t rs;
        sci_local_segment_t ls;
        sci_map_t lm, rm;
        sci_dma_queue_t dq;
        TRY(SCIConnectSegment, sd, &rs, (unsigned)strtoul(argv[2], NULL, 0), SEG_ID, ADAPTER_NO,
            NO_CALLBACK, NO_ARG, SCI_INFINITE_TIMEOUT, NO_FLAGS);
        volatile unsigned char *remote = SCIMapRemoteSegment(rs, &rm, 0, SIZE, NULL, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK, "SCIMapRemoteSegment: %s", SCIGetErrorString(err));
        TRY(SCICreateSegment, sd, &ls, 0, SIZE, NO_CALLBACK, NO_ARG, SCI_FLAG_AUTO_ID);
        TRY(SCIPrepareSegment, ls, ADAPTER_NO, NO_FLAGS);
        unsigned char *local = SCIMapLocalSegment(ls, &lm, 0, SIZE, NULL, NO_FLAGS, &err);
        CHECK(err == SCI_ERR_OK, "SCIMapLocalSegment: %s", SCIGetErrorString(err));

        /* A queue of 4 entries takes vectors of 8 to 256 elements, one entry each. */
        TRY(SCICreateDMAQueue, sd, &dq, ADAPTER_NO, 4, NO_FLAGS);
        sci_dma_channel_t ch;
        TRY(SCIRequestDMAChannel, sd, &ch, ADAPTER_NO, SCI_DMA_TYPE_DONTCARE,
            SCI_DMA_CHANNEL_ID_DONTCARE, NO_FLAGS);
        TRY(SCIAssignDMAChannel, ch, dq, NO_FLAGS);
        static const size_t lens[] = {8, 64, 256};
        for (unsigned r = 0; r < 3; r++) {
                size_t n = lens[r];
                dis_dma_vec_t *vec = malloc(n * sizeof(*vec));
                CHECK(vec, "out of memory");
                memset(vec, 0xa5, n * sizeof(*vec)); /* flags (and padding) left as garbage */
                for (size_t i = 0; i < n; i++) {
                        /* Elements in reverse order of their places: each one counts. */
                        vec[i].size = ELEM;
                        vec[i].local_offset = (n - 1 - i) * ELEM;
                        vec[i].remote_offset = (n - 1 - i) * ELEM + r * 4096;
                }
                for (size_t k = 0; k < n * ELEM; k++)
                        local[k] = pattern(k, r);
                TRY(SCIStartDmaTransferVec, dq, ls, rs, n, vec, NO_CALLBACK, NO_ARG, NO_FLAGS);
                sci_dma_queue_state_t st = SCIWaitForDMAQueue(dq, SCI_INFINITE_TIMEOUT, NO_FLAGS,
                                                              &err);
                CHECK(err == SCI_ERR_OK && st == SCI_DMAQUEUE_DONE, "vector of %zu: state %d, %s",
                      n, st, SCIGetErrorString(err));
                for (size_t k = 0; k < n * ELEM; k++)
                        CHECK(remote[r * 4096 + k] == pattern(k, r),
                              "vector of %zu: byte %zu is 0x%02x", n, k, remote[r * 4096 + k]);
                free(vec);
                printf("vector of %zu elements on a 4-entry queue: done\n", n);
        }
        /* Four transfers in flight fill the queue's four entries. */
        dis_dma_vec_t one = {.size = 4096, .local_offset = 0, .remote_offset = 0};
        for (int i = 0; i < 4; i++)
                TRY(SCIStartDmaTransferVec, dq, ls, rs, 1, &one, NO_CALLBACK, NO_ARG, NO_FLAGS);
        TRY(SCIWaitForDMAQueue, dq, SCI_INFINITE_TIMEOUT, SCI_FLAG_DMA_GLOBAL);
        TRY(SCIReturnDMAChannel, ch);
        TRY(SCIRemoveDMAQueue, dq, NO_FLAGS);

        /* A queue of 0 entries, as programs that pass no number create it; a transfer from
         * process memory. */
        TRY(SCICreateDMAQueue, sd, &dq, ADAPTER_NO, 0, NO_FLAGS);
        char *mem = malloc(8192);
        CHECK(mem, "out of memory");
        for (int k = 0; k < 8192; k++)
                mem[k] = (char)(k ^ 0x3c);
        TRY(SCIStartDmaTransferMem, dq, mem, rs, 8192, 65536, NO_CALLBACK, NO_ARG, NO_FLAGS);
        TRY(SCIWaitForDMAQueue, dq, SCI_INFINITE_TIMEOUT, NO_FLAGS);
        for (int k = 0; k < 8192; k++)
                CHECK(remote[65536 + k] == (unsigned char)(k ^ 0x3c), "byte %d from memory", k);
        free(mem);
        TRY(SCIRemoveDMAQueue, dq, NO_FLAGS);
        printf("a transfer from process memory: done\n");

        TRY(SCIUnmapSegment, lm, NO_FLAGS);
        TRY(SCIRemoveSegment, ls, NO_FLAGS);
        TRY(SCIUnmapSegment, rm, NO_FLAGS);
        TRY(SCIDisconnectSegment, rs, NO_FLAGS);
        TRY(SCIClose, sd, NO_FLAGS);
        SCITerminate();
        return 0;
}
