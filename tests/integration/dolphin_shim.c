/* tests/integration/dolphin_shim.c: libsisci with some SCIQuery answers withheld, for the tests
 * of the dolphin backend's figures (dolphin.sh). Used only there. */
/*
 * The dolphin backend loads its SISCI library by path (NTBFAB_SISCI_LIB) and resolves every
 * name through the handle: with this module as the library, SCIQuery is this one and every
 * other name is ntbfab's libsisci's (the module's dependency). It answers with libsisci's
 * SCIQuery, called by its single-threaded name. NTBFAB_TEST_SISCI_UNANSWERED,
 * set in the library's namespace through NTBFAB_SISCI_ENV, lists SCI_Q_ADAPTER subcommands by
 * name, separated by commas (ATT_PAGE_SIZE,ATT_NUMBER_OF_ENTRIES): those fail with
 * SCI_ERR_ILLEGAL_QUERY, as from a library that does not know them.
 * NTBFAB_TEST_SISCI_ATT_ENTRIES=N makes it answer N to SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES.
 *
 * NTBFAB_TEST_SISCI_COUNTS=FILE: the module counts the local segments the process holds and
 * its connections to segments, and writes "segments N connections M" to FILE at each change:
 * what a refused operation must leave as it found it (dolphin_refuse.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sisci_api.h"

/* libsisci's own functions, under their other names (the same code). */
void _SISCI_PUBLIC_FUNC_ST_SCIQuery(unsigned int command, void *data, unsigned int flags,
                                    sci_error_t *error);
void _SISCI_PUBLIC_FUNC_ST_SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment,
                                            unsigned int segmentId, size_t size,
                                            sci_cb_local_segment_t callback, void *callbackArg,
                                            unsigned int flags, sci_error_t *error);
void _SISCI_PUBLIC_FUNC_ST_SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags,
                                            sci_error_t *error);
void _SISCI_PUBLIC_FUNC_ST_SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment,
                                             unsigned int nodeId, unsigned int segmentId,
                                             unsigned int localAdapterNo,
                                             sci_cb_remote_segment_t callback, void *callbackArg,
                                             unsigned int timeout, unsigned int flags,
                                             sci_error_t *error);
void _SISCI_PUBLIC_FUNC_ST_SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags,
                                                sci_error_t *error);

static long segments, connections;

static void count(long *what, long delta, sci_error_t e)
{
        if (e != SCI_ERR_OK)
                return;
        __atomic_add_fetch(what, delta, __ATOMIC_SEQ_CST);
        const char *path = getenv("NTBFAB_TEST_SISCI_COUNTS");
        if (!path || !*path)
                return;
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f)
                return;
        fprintf(f, "segments %ld connections %ld\n", __atomic_load_n(&segments, __ATOMIC_SEQ_CST),
                __atomic_load_n(&connections, __ATOMIC_SEQ_CST));
        if (!fclose(f))
                rename(tmp, path);
}

void SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                      size_t size, sci_cb_local_segment_t callback, void *callbackArg,
                      unsigned int flags, sci_error_t *error)
{
        _SISCI_PUBLIC_FUNC_ST_SCICreateSegment(sd, segment, segmentId, size, callback, callbackArg,
                                               flags, error);
        count(&segments, 1, *error);
}

void SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error)
{
        _SISCI_PUBLIC_FUNC_ST_SCIRemoveSegment(segment, flags, error);
        count(&segments, -1, *error);
}

void SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment, unsigned int nodeId,
                       unsigned int segmentId, unsigned int localAdapterNo,
                       sci_cb_remote_segment_t callback, void *callbackArg, unsigned int timeout,
                       unsigned int flags, sci_error_t *error)
{
        _SISCI_PUBLIC_FUNC_ST_SCIConnectSegment(sd, segment, nodeId, segmentId, localAdapterNo,
                                                callback, callbackArg, timeout, flags, error);
        count(&connections, 1, *error);
}

void SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags, sci_error_t *error)
{
        _SISCI_PUBLIC_FUNC_ST_SCIDisconnectSegment(segment, flags, error);
        count(&connections, -1, *error);
}

static const struct {
        const char *name;
        unsigned sub;
} subs[] = {
    {"NUMBER_OF_PORTS", SCI_Q_ADAPTER_NUMBER_OF_PORTS},
    {"DMA_MTU", SCI_Q_ADAPTER_DMA_MTU},
    {"DMA_SIZE_ALIGNMENT", SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT},
    {"DMA_OFFSET_ALIGNMENT", SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT},
    {"ATT_PAGE_SIZE", SCI_Q_ADAPTER_ATT_PAGE_SIZE},
    {"ATT_NUMBER_OF_ENTRIES", SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES},
};

/* Whether NAME is an item of the comma-separated list. */
static int listed(const char *list, const char *name)
{
        size_t n = strlen(name);
        for (const char *p = list; (p = strstr(p, name)); p += n)
                if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
                        return 1;
        return 0;
}

void SCIQuery(unsigned int command, void *data, unsigned int flags, sci_error_t *error)
{
        const char *no = getenv("NTBFAB_TEST_SISCI_UNANSWERED");
        if (command == SCI_Q_ADAPTER && data && no) {
                const sci_query_adapter_t *q = data;
                for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
                        if (q->subcommand == subs[i].sub && listed(no, subs[i].name)) {
                                *error = SCI_ERR_ILLEGAL_QUERY;
                                return;
                        }
        }
        _SISCI_PUBLIC_FUNC_ST_SCIQuery(command, data, flags, error);
        const char *n = getenv("NTBFAB_TEST_SISCI_ATT_ENTRIES");
        if (command == SCI_Q_ADAPTER && data && n && *error == SCI_ERR_OK &&
            ((const sci_query_adapter_t *)data)->subcommand == SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES)
                *(unsigned *)((const sci_query_adapter_t *)data)->data =
                    (unsigned)strtoul(n, NULL, 0);
}
