/* frontends/sisci-compat/src/compat.c: calls of Dolphin's library that are other names for what
 * libsisci does elsewhere, or that ntbfab refuses (docs/sisci.md, "Every name of the headers"). */
#include "sx.h"

/*
 * The older SmartIO generation: a device segment of the kind the flags name, through the
 * adapter named. (The header routes the other argument order here too.)
 */
void(SCIConnectDeviceMemory)(sci_desc_t sd, sci_remote_segment_t *segment,
                             unsigned int localAdapterNo, sci_device_t device,
                             unsigned int segmentNo, unsigned int reserved, unsigned int flags,
                             sci_error_t *error)
{
        (void)sd;       /* the device's descriptor: the device handle says it */
        (void)reserved; /* undocumented, 0 in every public use */
        SX_ERR(error);
        unsigned kinds = SCI_FLAG_BAR | SCI_FLAG_PRIVATE | SCI_FLAG_SHARED;
        unsigned kind = flags & kinds;
        if ((flags & ~kinds) || (kind & (kind - 1))) {
                sx_lock();
                *err = sx.init ? SCI_ERR_ILLEGAL_FLAG : SCI_ERR_NOT_INITIALIZED;
                sx_unlock();
                return;
        }
        unsigned memtype = kind == SCI_FLAG_PRIVATE  ? SCI_MEMTYPE_PRIVATE
                           : kind == SCI_FLAG_SHARED ? SCI_MEMTYPE_SHARED
                                                     : SCI_MEMTYPE_BAR;
        SCIConnectDeviceSegmentPath(device, segment, segmentNo, memtype, localAdapterNo, NULL, NULL,
                                    0, err);
}

/* SCIMemCpy copies with one routine (memcpy through the mapping); the number is kept. */
static _Atomic unsigned memcopy_function;

__attribute__((visibility("default"))) void SetSciMemCopyFunction(unsigned int function)
{
        memcopy_function = function;
}

__attribute__((visibility("default"))) unsigned int GetSciMemCopyFunction(void)
{
        return memcopy_function;
}

/* A refusal with SCI_ERR_NOT_SUPPORTED (or the usual code before SCIInitialize). */
static void refuse(sci_error_t *error)
{
        SX_ERR(error);
        if ((*err = sx_enter()) == SCI_ERR_OK)
                *err = SCI_ERR_NOT_SUPPORTED;
        sx_unlock();
}

/*
 * Segments shared between the processes of a node: a segment is one process's in ntbfab;
 * another process of the node connects to it (SCIConnectSegment; a same-node connection
 * takes no fabric resources and maps the memory directly).
 */
void SCIShareSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error)
{
        (void)segment;
        (void)flags;
        refuse(error);
}

void SCIAttachLocalSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                           size_t *size, sci_cb_local_segment_t callback, void *callbackArg,
                           unsigned int flags, sci_error_t *error)
{
        (void)sd;
        (void)segment;
        (void)segmentId;
        (void)size;
        (void)callback;
        (void)callbackArg;
        (void)flags;
        refuse(error);
}

/*
 * Conditional interrupts are raised by the adapter when a store hits a flag in a segment:
 * no NTB backend has such a comparator, and no software may watch the data path for it.
 */
void SCIRegisterInterruptFlag(unsigned int localAdapterNo, sci_local_interrupt_t *interrupt,
                              sci_local_segment_t segment, unsigned int offset,
                              sci_cb_interrupt_t callback, void *callbackArg, unsigned int flags,
                              sci_error_t *error)
{
        (void)localAdapterNo;
        (void)interrupt;
        (void)segment;
        (void)offset;
        (void)callback;
        (void)callbackArg;
        (void)flags;
        refuse(error);
}

void SCIEnableConditionalInterrupt(sci_local_interrupt_t interrupt, unsigned int flags,
                                   sci_error_t *error)
{
        (void)interrupt;
        (void)flags;
        refuse(error);
}

void SCIDisableConditionalInterrupt(sci_local_interrupt_t interrupt, unsigned int flags,
                                    sci_error_t *error)
{
        (void)interrupt;
        (void)flags;
        refuse(error);
}

void SCIGetConditionalInterruptTrigCounter(sci_local_interrupt_t interrupt,
                                           unsigned int *interruptTrigCounter, unsigned int flags,
                                           sci_error_t *error)
{
        (void)interrupt;
        (void)interruptTrigCounter;
        (void)flags;
        refuse(error);
}
