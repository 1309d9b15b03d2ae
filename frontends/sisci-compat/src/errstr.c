/* frontends/sisci-compat/src/errstr.c: SCIGetErrorString, a sentence for every sci_error_t. */
#include "sx.h"

static const struct {
        sci_error_t code;
        const char *text;
} texts[] = {
    {SCI_ERR_OK, "no error"},
    {SCI_ERR_BUSY, "the resource is in use (still mapped, connected or holding resources)"},
    {SCI_ERR_FLAG_NOT_IMPLEMENTED, "the flag is not implemented"},
    {SCI_ERR_ILLEGAL_FLAG, "a flag is not valid for this call"},
    {SCI_ERR_NOSPC, "out of resources (memory, translation slots or requester IDs)"},
    {SCI_ERR_API_NOSPC, "out of library resources"},
    {SCI_ERR_HW_NOSPC, "out of hardware resources"},
    {SCI_ERR_NOT_IMPLEMENTED, "the function is not implemented"},
    {SCI_ERR_ILLEGAL_ADAPTERNO, "the adapter number is not valid"},
    {SCI_ERR_NO_SUCH_ADAPTERNO, "this node has no adapter with that number"},
    {SCI_ERR_TIMEOUT, "the operation timed out"},
    {SCI_ERR_OUT_OF_RANGE, "the offset or size is outside the segment or buffer"},
    {SCI_ERR_NO_SUCH_SEGMENT, "no such segment (or interrupt number)"},
    {SCI_ERR_ILLEGAL_NODEID, "the node id is not valid"},
    {SCI_ERR_CONNECTION_REFUSED, "the connection was refused (the segment is not available "
                                 "to other nodes)"},
    {SCI_ERR_SEGMENT_NOT_CONNECTED, "the segment is not connected"},
    {SCI_ERR_SIZE_ALIGNMENT, "the size is not properly aligned"},
    {SCI_ERR_OFFSET_ALIGNMENT, "the offset is not properly aligned"},
    {SCI_ERR_ILLEGAL_PARAMETER, "a parameter is not valid (a NULL pointer, a bad handle or "
                                "size)"},
    {SCI_ERR_MAX_ENTRIES, "the queue holds its maximum number of entries"},
    {SCI_ERR_SEGMENT_NOT_PREPARED, "the segment is not prepared on that adapter"},
    {SCI_ERR_ILLEGAL_ADDRESS, "the address is not valid"},
    {SCI_ERR_ILLEGAL_OPERATION, "the operation is not allowed in this state"},
    {SCI_ERR_ILLEGAL_QUERY, "the query is not valid"},
    {SCI_ERR_SEGMENTID_USED, "the segment id is in use"},
    {SCI_ERR_SYSTEM, "a system error (the node's daemon or fabric could not be reached)"},
    {SCI_ERR_CANCELLED, "the operation was cancelled (its object was removed)"},
    {SCI_ERR_NOT_CONNECTED, "not connected"},
    {SCI_ERR_NOT_AVAILABLE, "not available (held exclusively or taken out of the pool)"},
    {SCI_ERR_INCONSISTENT_VERSIONS, "inconsistent versions"},
    {SCI_ERR_COND_INT_RACE_PROBLEM, "conditional interrupt race"},
    {SCI_ERR_OVERFLOW, "overflow: the data did not fit the buffer"},
    {SCI_ERR_NOT_INITIALIZED, "the library is not initialized (call SCIInitialize)"},
    {SCI_ERR_ACCESS, "access denied"},
    {SCI_ERR_NO_SUCH_NODEID, "no node has that node id"},
    {SCI_ERR_NODE_NOT_RESPONDING, "the node does not respond"},
    {SCI_ERR_NO_REMOTE_LINK_ACCESS, "the remote link is down"},
    {SCI_ERR_NO_LINK_ACCESS, "no link to the node (no path, or a link on it is down)"},
    {SCI_ERR_TRANSFER_FAILED, "the transfer failed"},
    {SCI_ERR_REMOTE_BUSY, "the remote end is busy"},
    {SCI_ERR_NOT_SUPPORTED, "not supported on this fabric"},
    {SCI_ERR_DEPRECATED, "deprecated"},
    {SCI_ERR_DMA_NOT_AVAILABLE, "no DMA engine is available"},
    {SCI_ERR_DMA_DISABLED, "DMA is disabled"},
    {SCI_ERR_EWOULD_BLOCK, "the operation would block"},
    {SCI_ERR_SEMAPHORE_COUNT_EXCEEDED, "semaphore count exceeded"},
    {SCI_ERR_IRQL_ILLEGAL, "illegal interrupt level"},
    {SCI_ERR_LOCAL_BUSY, "the local end is busy"},
    {SCI_ERR_ALL_BUSY, "every resource is busy"},
    {SCI_ERR_NO_SUCH_FDID, "no device has that fabric device id"},
    {SCI_ERR_INTNO_USED, "the interrupt number is in use"},
};

const char *SCIGetErrorString(sci_error_t error)
{
        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
                if (texts[i].code == error)
                        return texts[i].text;
        return "unknown SISCI error code";
}
