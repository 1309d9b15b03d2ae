/*
 * sisci_api.h: the SISCI-compatible API (ntbfab's libsisci), with the SmartIO device
 * extension of the SISCI 5.11 generation and the calls of the older SmartIO generation.
 * Semantics, every choice ntbfab made where Dolphin's documentation is silent, and every
 * name with its status are in docs/sisci.md.
 *
 * As in the original API, each function name is a macro that selects the thread-safe
 * ("MT") entry point when _REENTRANT is defined and the single-threaded ("ST") one
 * otherwise; libsisci exports both names (they share one thread-safe implementation).
 */
#ifndef _SISCI_API_H_
#define _SISCI_API_H_

#include "sisci_error.h"
#include "sisci_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef _REENTRANT
#define _SISCI_EXPANDE_FUNCTION_NAME(name) _SISCI_PUBLIC_FUNC_MT_##name
#else
#define _SISCI_EXPANDE_FUNCTION_NAME(name) _SISCI_PUBLIC_FUNC_ST_##name
#endif

/* ---- Library, descriptors, nodes, queries ---- */

#define SCIInitialize _SISCI_EXPANDE_FUNCTION_NAME(SCIInitialize)
void SCIInitialize(unsigned int flags, sci_error_t *error);

#define SCITerminate _SISCI_EXPANDE_FUNCTION_NAME(SCITerminate)
void SCITerminate(void);

#define SCIOpen _SISCI_EXPANDE_FUNCTION_NAME(SCIOpen)
void SCIOpen(sci_desc_t *sd, unsigned int flags, sci_error_t *error);

#define SCIClose _SISCI_EXPANDE_FUNCTION_NAME(SCIClose)
void SCIClose(sci_desc_t sd, unsigned int flags, sci_error_t *error);

#define SCIGetLocalNodeId _SISCI_EXPANDE_FUNCTION_NAME(SCIGetLocalNodeId)
void SCIGetLocalNodeId(unsigned int adapterNo, unsigned int *nodeId, unsigned int flags,
                       sci_error_t *error);

#define SCIProbeNode _SISCI_EXPANDE_FUNCTION_NAME(SCIProbeNode)
int SCIProbeNode(sci_desc_t sd, unsigned int localAdapterNo, unsigned int nodeId,
                 unsigned int flags, sci_error_t *error);

#define SCIGetNodeIdByAdapterName _SISCI_EXPANDE_FUNCTION_NAME(SCIGetNodeIdByAdapterName)
void SCIGetNodeIdByAdapterName(char *adapterName, dis_nodeId_list_t *nodeIdList,
                               dis_virt_adapter_t *adapterType, unsigned int flags,
                               sci_error_t *error);

#define SCIGetNodeInfoByAdapterName _SISCI_EXPANDE_FUNCTION_NAME(SCIGetNodeInfoByAdapterName)
void SCIGetNodeInfoByAdapterName(char *adapterName, unsigned int *adapterNo,
                                 dis_nodeId_list_t *nodeIdList, dis_adapter_type_t *adapterType,
                                 unsigned int flags, sci_error_t *error);

#define SCIQuery _SISCI_EXPANDE_FUNCTION_NAME(SCIQuery)
void SCIQuery(unsigned int command, void *data, unsigned int flags, sci_error_t *error);

#define SCIGetErrorString _SISCI_EXPANDE_FUNCTION_NAME(SCIGetErrorString)
const char *SCIGetErrorString(sci_error_t error);

/* ---- Local and remote segments ---- */

#define SCICreateSegment _SISCI_EXPANDE_FUNCTION_NAME(SCICreateSegment)
void SCICreateSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                      size_t size, sci_cb_local_segment_t callback, void *callbackArg,
                      unsigned int flags, sci_error_t *error);

#define SCIRemoveSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIRemoveSegment)
void SCIRemoveSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error);

#define SCIPrepareSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIPrepareSegment)
void SCIPrepareSegment(sci_local_segment_t segment, unsigned int localAdapterNo, unsigned int flags,
                       sci_error_t *error);

#define SCISetSegmentAvailable _SISCI_EXPANDE_FUNCTION_NAME(SCISetSegmentAvailable)
void SCISetSegmentAvailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                            unsigned int flags, sci_error_t *error);

#define SCISetSegmentUnavailable _SISCI_EXPANDE_FUNCTION_NAME(SCISetSegmentUnavailable)
void SCISetSegmentUnavailable(sci_local_segment_t segment, unsigned int localAdapterNo,
                              unsigned int flags, sci_error_t *error);

#define SCIAttachPhysicalMemory _SISCI_EXPANDE_FUNCTION_NAME(SCIAttachPhysicalMemory)
void SCIAttachPhysicalMemory(sci_ioaddr_t ioaddress, void *address, unsigned int busNo, size_t size,
                             sci_local_segment_t segment, unsigned int flags, sci_error_t *error);

#define SCIRegisterSegmentMemory _SISCI_EXPANDE_FUNCTION_NAME(SCIRegisterSegmentMemory)
void SCIRegisterSegmentMemory(void *address, size_t size, sci_local_segment_t segment,
                              unsigned int flags, sci_error_t *error);

#define SCIShareSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIShareSegment)
void SCIShareSegment(sci_local_segment_t segment, unsigned int flags, sci_error_t *error);

#define SCIAttachLocalSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIAttachLocalSegment)
void SCIAttachLocalSegment(sci_desc_t sd, sci_local_segment_t *segment, unsigned int segmentId,
                           size_t *size, sci_cb_local_segment_t callback, void *callbackArg,
                           unsigned int flags, sci_error_t *error);

#define SCIConnectSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIConnectSegment)
void SCIConnectSegment(sci_desc_t sd, sci_remote_segment_t *segment, unsigned int nodeId,
                       unsigned int segmentId, unsigned int localAdapterNo,
                       sci_cb_remote_segment_t callback, void *callbackArg, unsigned int timeout,
                       unsigned int flags, sci_error_t *error);

#define SCIDisconnectSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIDisconnectSegment)
void SCIDisconnectSegment(sci_remote_segment_t segment, unsigned int flags, sci_error_t *error);

#define SCIGetLocalSegmentSize _SISCI_EXPANDE_FUNCTION_NAME(SCIGetLocalSegmentSize)
size_t SCIGetLocalSegmentSize(sci_local_segment_t segment);

#define SCIGetRemoteSegmentSize _SISCI_EXPANDE_FUNCTION_NAME(SCIGetRemoteSegmentSize)
size_t SCIGetRemoteSegmentSize(sci_remote_segment_t segment);

#define SCIGetLocalSegmentId _SISCI_EXPANDE_FUNCTION_NAME(SCIGetLocalSegmentId)
unsigned int SCIGetLocalSegmentId(sci_local_segment_t segment);

#define SCIGetRemoteSegmentId _SISCI_EXPANDE_FUNCTION_NAME(SCIGetRemoteSegmentId)
unsigned int SCIGetRemoteSegmentId(sci_remote_segment_t segment);

#define SCIGetRemoteSegmentNodeId _SISCI_EXPANDE_FUNCTION_NAME(SCIGetRemoteSegmentNodeId)
unsigned int SCIGetRemoteSegmentNodeId(sci_remote_segment_t segment);

#define SCIWaitForLocalSegmentEvent _SISCI_EXPANDE_FUNCTION_NAME(SCIWaitForLocalSegmentEvent)
sci_segment_cb_reason_t SCIWaitForLocalSegmentEvent(sci_local_segment_t segment,
                                                    unsigned int *sourceNodeId,
                                                    unsigned int *localAdapterNo,
                                                    unsigned int timeout, unsigned int flags,
                                                    sci_error_t *error);

#define SCIWaitForRemoteSegmentEvent _SISCI_EXPANDE_FUNCTION_NAME(SCIWaitForRemoteSegmentEvent)
sci_segment_cb_reason_t SCIWaitForRemoteSegmentEvent(sci_remote_segment_t segment,
                                                     sci_error_t *status, unsigned int timeout,
                                                     unsigned int flags, sci_error_t *error);

/* ---- Mappings ---- */

#define SCIMapLocalSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIMapLocalSegment)
void *SCIMapLocalSegment(sci_local_segment_t segment, sci_map_t *map, size_t offset, size_t size,
                         void *addr, unsigned int flags, sci_error_t *error);

#define SCIMapRemoteSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIMapRemoteSegment)
volatile void *SCIMapRemoteSegment(sci_remote_segment_t segment, sci_map_t *map, size_t offset,
                                   size_t size, void *addr, unsigned int flags, sci_error_t *error);

#define SCIUnmapSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIUnmapSegment)
void SCIUnmapSegment(sci_map_t map, unsigned int flags, sci_error_t *error);

#define SCIGetMapPointer _SISCI_EXPANDE_FUNCTION_NAME(SCIGetMapPointer)
volatile void *SCIGetMapPointer(sci_map_t map);

#define SCIGetMapPhysAddr _SISCI_EXPANDE_FUNCTION_NAME(SCIGetMapPhysAddr)
sci_ioaddr_t SCIGetMapPhysAddr(sci_map_t map);

/* ---- Sequences, copies and barriers ---- */

#define SCICreateMapSequence _SISCI_EXPANDE_FUNCTION_NAME(SCICreateMapSequence)
void SCICreateMapSequence(sci_map_t map, sci_sequence_t *sequence, unsigned int flags,
                          sci_error_t *error);

#define SCIRemoveSequence _SISCI_EXPANDE_FUNCTION_NAME(SCIRemoveSequence)
void SCIRemoveSequence(sci_sequence_t sequence, unsigned int flags, sci_error_t *error);

#define SCIStartSequence _SISCI_EXPANDE_FUNCTION_NAME(SCIStartSequence)
sci_sequence_status_t SCIStartSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error);

#define SCICheckSequence _SISCI_EXPANDE_FUNCTION_NAME(SCICheckSequence)
sci_sequence_status_t SCICheckSequence(sci_sequence_t sequence, unsigned int flags,
                                       sci_error_t *error);

#define SCIFlush _SISCI_EXPANDE_FUNCTION_NAME(SCIFlush)
void SCIFlush(sci_sequence_t sequence, unsigned int flags);

#define SCIStoreBarrier _SISCI_EXPANDE_FUNCTION_NAME(SCIStoreBarrier)
void SCIStoreBarrier(sci_sequence_t sequence, unsigned int flags);

#define SCIMemCpy _SISCI_EXPANDE_FUNCTION_NAME(SCIMemCpy)
void SCIMemCpy(sci_sequence_t sequence, void *memAddr, sci_map_t remoteMap, size_t remoteOffset,
               size_t size, unsigned int flags, sci_error_t *error);

#define SCIMemWrite _SISCI_EXPANDE_FUNCTION_NAME(SCIMemWrite)
void SCIMemWrite(void *memAddr, volatile void *remoteAddr, size_t size, unsigned int flags,
                 sci_error_t *error);

/* Undocumented exports of Dolphin's library, under their plain names: the CPU copy routine
 * SCIMemCpy uses (a number; ntbfab has one routine and keeps the number). */
void SetSciMemCopyFunction(unsigned int function); /* plain export */
unsigned int GetSciMemCopyFunction(void);          /* plain export */

#define SCICacheSync _SISCI_EXPANDE_FUNCTION_NAME(SCICacheSync)
void SCICacheSync(sci_map_t map, void *addr, size_t length, unsigned int flags, sci_error_t *error);

/* ---- DMA queues ---- */

#define SCICreateDMAQueue _SISCI_EXPANDE_FUNCTION_NAME(SCICreateDMAQueue)
void SCICreateDMAQueue(sci_desc_t sd, sci_dma_queue_t *dq, unsigned int localAdapterNo,
                       unsigned int maxEntries, unsigned int flags, sci_error_t *error);

#define SCIRemoveDMAQueue _SISCI_EXPANDE_FUNCTION_NAME(SCIRemoveDMAQueue)
void SCIRemoveDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error);

#define SCIAbortDMAQueue _SISCI_EXPANDE_FUNCTION_NAME(SCIAbortDMAQueue)
void SCIAbortDMAQueue(sci_dma_queue_t dq, unsigned int flags, sci_error_t *error);

#define SCIStartDmaTransfer _SISCI_EXPANDE_FUNCTION_NAME(SCIStartDmaTransfer)
void SCIStartDmaTransfer(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                         sci_remote_segment_t remoteSegment, size_t localOffset, size_t size,
                         size_t remoteOffset, sci_cb_dma_t callback, void *callbackArg,
                         unsigned int flags, sci_error_t *error);

#define SCIStartDmaTransferVec _SISCI_EXPANDE_FUNCTION_NAME(SCIStartDmaTransferVec)
void SCIStartDmaTransferVec(sci_dma_queue_t dq, sci_local_segment_t localSegment,
                            sci_remote_segment_t remoteSegment, size_t vecLength,
                            dis_dma_vec_t *disDmaVec, sci_cb_dma_t callback, void *callbackArg,
                            unsigned int flags, sci_error_t *error);

#define SCIStartDmaTransferMem _SISCI_EXPANDE_FUNCTION_NAME(SCIStartDmaTransferMem)
void SCIStartDmaTransferMem(sci_dma_queue_t dq, void *localAddress,
                            sci_remote_segment_t remoteSegment, size_t size, size_t remoteOffset,
                            sci_cb_dma_t callback, void *callbackArg, unsigned int flags,
                            sci_error_t *error);

#define SCIRequestDMAChannel _SISCI_EXPANDE_FUNCTION_NAME(SCIRequestDMAChannel)
void SCIRequestDMAChannel(sci_desc_t sd, sci_dma_channel_t *channel, unsigned int localAdapterNo,
                          sci_dma_type_t type, unsigned int channelId, unsigned int flags,
                          sci_error_t *error);

#define SCIReturnDMAChannel _SISCI_EXPANDE_FUNCTION_NAME(SCIReturnDMAChannel)
void SCIReturnDMAChannel(sci_dma_channel_t channel, sci_error_t *error);

#define SCIAssignDMAChannel _SISCI_EXPANDE_FUNCTION_NAME(SCIAssignDMAChannel)
void SCIAssignDMAChannel(sci_dma_channel_t channel, sci_dma_queue_t dq, unsigned int flags,
                         sci_error_t *error);

#define SCIWaitForDMAQueue _SISCI_EXPANDE_FUNCTION_NAME(SCIWaitForDMAQueue)
sci_dma_queue_state_t SCIWaitForDMAQueue(sci_dma_queue_t dq, unsigned int timeout,
                                         unsigned int flags, sci_error_t *error);

#define SCIDMAQueueState _SISCI_EXPANDE_FUNCTION_NAME(SCIDMAQueueState)
sci_dma_queue_state_t SCIDMAQueueState(sci_dma_queue_t dq);

/* ---- Interrupts and data interrupts ---- */

#define SCICreateInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCICreateInterrupt)
void SCICreateInterrupt(sci_desc_t sd, sci_local_interrupt_t *interrupt,
                        unsigned int localAdapterNo, unsigned int *interruptNo,
                        sci_cb_interrupt_t callback, void *callbackArg, unsigned int flags,
                        sci_error_t *error);

#define SCIRemoveInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIRemoveInterrupt)
void SCIRemoveInterrupt(sci_local_interrupt_t interrupt, unsigned int flags, sci_error_t *error);

#define SCIWaitForInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIWaitForInterrupt)
void SCIWaitForInterrupt(sci_local_interrupt_t interrupt, unsigned int timeout, unsigned int flags,
                         sci_error_t *error);

#define SCIConnectInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIConnectInterrupt)
void SCIConnectInterrupt(sci_desc_t sd, sci_remote_interrupt_t *interrupt, unsigned int nodeId,
                         unsigned int localAdapterNo, unsigned int interruptNo,
                         unsigned int timeout, unsigned int flags, sci_error_t *error);

#define SCIDisconnectInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIDisconnectInterrupt)
void SCIDisconnectInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error);

#define SCITriggerInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCITriggerInterrupt)
void SCITriggerInterrupt(sci_remote_interrupt_t interrupt, unsigned int flags, sci_error_t *error);

#define SCICreateDataInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCICreateDataInterrupt)
void SCICreateDataInterrupt(sci_desc_t sd, sci_local_data_interrupt_t *interrupt,
                            unsigned int localAdapterNo, unsigned int *interruptNo,
                            sci_cb_data_interrupt_t callback, void *callbackArg, unsigned int flags,
                            sci_error_t *error);

#define SCIRemoveDataInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIRemoveDataInterrupt)
void SCIRemoveDataInterrupt(sci_local_data_interrupt_t interrupt, unsigned int flags,
                            sci_error_t *error);

#define SCIWaitForDataInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIWaitForDataInterrupt)
void SCIWaitForDataInterrupt(sci_local_data_interrupt_t interrupt, void *data, unsigned int *length,
                             unsigned int timeout, unsigned int flags, sci_error_t *error);

#define SCIConnectDataInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIConnectDataInterrupt)
void SCIConnectDataInterrupt(sci_desc_t sd, sci_remote_data_interrupt_t *interrupt,
                             unsigned int nodeId, unsigned int localAdapterNo,
                             unsigned int interruptNo, unsigned int timeout, unsigned int flags,
                             sci_error_t *error);

#define SCIDisconnectDataInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIDisconnectDataInterrupt)
void SCIDisconnectDataInterrupt(sci_remote_data_interrupt_t interrupt, unsigned int flags,
                                sci_error_t *error);

#define SCITriggerDataInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCITriggerDataInterrupt)
void SCITriggerDataInterrupt(sci_remote_data_interrupt_t interrupt, void *data, unsigned int length,
                             unsigned int flags, sci_error_t *error);

/* Conditional interrupts (an interrupt raised by a store to a flag in a segment). */

#define SCIRegisterInterruptFlag _SISCI_EXPANDE_FUNCTION_NAME(SCIRegisterInterruptFlag)
void SCIRegisterInterruptFlag(unsigned int localAdapterNo, sci_local_interrupt_t *interrupt,
                              sci_local_segment_t segment, unsigned int offset,
                              sci_cb_interrupt_t callback, void *callbackArg, unsigned int flags,
                              sci_error_t *error);

#define SCIEnableConditionalInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIEnableConditionalInterrupt)
void SCIEnableConditionalInterrupt(sci_local_interrupt_t interrupt, unsigned int flags,
                                   sci_error_t *error);

#define SCIDisableConditionalInterrupt _SISCI_EXPANDE_FUNCTION_NAME(SCIDisableConditionalInterrupt)
void SCIDisableConditionalInterrupt(sci_local_interrupt_t interrupt, unsigned int flags,
                                    sci_error_t *error);

#define SCIGetConditionalInterruptTrigCounter                                                      \
        _SISCI_EXPANDE_FUNCTION_NAME(SCIGetConditionalInterruptTrigCounter)
void SCIGetConditionalInterruptTrigCounter(sci_local_interrupt_t interrupt,
                                           unsigned int *interruptTrigCounter, unsigned int flags,
                                           sci_error_t *error);

/* ---- SmartIO device extension (SISCI 5.11 generation) ---- */

#define SCIGetDeviceList _SISCI_EXPANDE_FUNCTION_NAME(SCIGetDeviceList)
size_t SCIGetDeviceList(sci_desc_t sd, uint32_t *fdids, size_t length,
                        const sci_smartio_device_info_t *filter, unsigned int flags,
                        sci_error_t *error);

#define SCIBorrowDevice _SISCI_EXPANDE_FUNCTION_NAME(SCIBorrowDevice)
void SCIBorrowDevice(sci_desc_t sd, sci_smartio_device_t *device, uint32_t fdid, unsigned int flags,
                     sci_error_t *error);

#define SCIReturnDevice _SISCI_EXPANDE_FUNCTION_NAME(SCIReturnDevice)
void SCIReturnDevice(sci_smartio_device_t device, unsigned int flags, sci_error_t *error);

#define SCIReleaseExclusiveBorrow _SISCI_EXPANDE_FUNCTION_NAME(SCIReleaseExclusiveBorrow)
void SCIReleaseExclusiveBorrow(sci_smartio_device_t device, unsigned int flags, sci_error_t *error);

#define SCIGetFabricDeviceId _SISCI_EXPANDE_FUNCTION_NAME(SCIGetFabricDeviceId)
uint32_t SCIGetFabricDeviceId(sci_smartio_device_t device);

#define SCIConnectDeviceSegment _SISCI_EXPANDE_FUNCTION_NAME(SCIConnectDeviceSegment)
void SCIConnectDeviceSegment(sci_smartio_device_t device, sci_remote_segment_t *segment,
                             unsigned int segmentId, unsigned int memoryType,
                             sci_cb_device_segment_t callback, void *callbackArg,
                             unsigned int flags, sci_error_t *error);

#define SCIConnectDeviceSegmentPath _SISCI_EXPANDE_FUNCTION_NAME(SCIConnectDeviceSegmentPath)
void SCIConnectDeviceSegmentPath(sci_smartio_device_t device, sci_remote_segment_t *segment,
                                 unsigned int segmentId, unsigned int memoryType,
                                 unsigned int localAdapterNo, sci_cb_device_segment_t callback,
                                 void *callbackArg, unsigned int flags, sci_error_t *error);

#define SCICreateDeviceSegment _SISCI_EXPANDE_FUNCTION_NAME(SCICreateDeviceSegment)
void SCICreateDeviceSegment(sci_smartio_device_t device, unsigned int segmentId, size_t size,
                            unsigned int memoryType, unsigned int accessHints, unsigned int flags,
                            sci_error_t *error);

#define SCIMapLocalSegmentForDevice _SISCI_EXPANDE_FUNCTION_NAME(SCIMapLocalSegmentForDevice)
void SCIMapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                 sci_smartio_device_t device, sci_ioaddr_t *ioaddr, size_t offset,
                                 size_t size, unsigned int flags, sci_error_t *error);

#define SCIUnmapLocalSegmentForDevice _SISCI_EXPANDE_FUNCTION_NAME(SCIUnmapLocalSegmentForDevice)
void SCIUnmapLocalSegmentForDevice(sci_local_segment_t segment, unsigned int localAdapterNo,
                                   sci_smartio_device_t device, unsigned int flags,
                                   sci_error_t *error);

#define SCIMapRemoteSegmentForDevice _SISCI_EXPANDE_FUNCTION_NAME(SCIMapRemoteSegmentForDevice)
void SCIMapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_smartio_device_t device,
                                  sci_ioaddr_t *ioaddr, size_t offset, size_t size,
                                  unsigned int flags, sci_error_t *error);

#define SCIUnmapRemoteSegmentForDevice _SISCI_EXPANDE_FUNCTION_NAME(SCIUnmapRemoteSegmentForDevice)
void SCIUnmapRemoteSegmentForDevice(sci_remote_segment_t segment, sci_smartio_device_t device,
                                    unsigned int flags, sci_error_t *error);

#define SCIRegisterPCIeRequester _SISCI_EXPANDE_FUNCTION_NAME(SCIRegisterPCIeRequester)
void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                              unsigned int devfn, unsigned int flags, sci_error_t *error);

#define SCIUnregisterPCIeRequester _SISCI_EXPANDE_FUNCTION_NAME(SCIUnregisterPCIeRequester)
void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int localAdapterNo, unsigned int bus,
                                unsigned int devfn, unsigned int flags, sci_error_t *error);

/* ---- The older SmartIO generation ----
 *
 * sci_device_t is sci_smartio_device_t, SCIBorrowDevice and SCIReturnDevice are the same
 * calls. SCIConnectDeviceMemory connects a device segment whose kind a flag names
 * (SCI_FLAG_BAR or 0: a BAR, SCI_FLAG_PRIVATE, SCI_FLAG_SHARED), through an adapter; both
 * argument orders of that generation are accepted (the adapter before or after the device),
 * the sixth argument is not used. SCIMapLocalSegmentForDevice with 7 arguments and
 * SCIMapRemoteSegmentForDevice with 6 are that generation's forms: no flags.
 */
#define SCIConnectDeviceMemory _SISCI_EXPANDE_FUNCTION_NAME(SCIConnectDeviceMemory)
void SCIConnectDeviceMemory(sci_desc_t sd, sci_remote_segment_t *segment,
                            unsigned int localAdapterNo, sci_device_t device,
                            unsigned int segmentNo, unsigned int reserved, unsigned int flags,
                            sci_error_t *error);

#ifdef __cplusplus
}
#endif

static inline void _SISCI_MapLocalSegmentForDevice7(sci_local_segment_t segment,
                                                    unsigned int localAdapterNo,
                                                    sci_smartio_device_t device,
                                                    sci_ioaddr_t *ioaddr, size_t offset,
                                                    size_t size, sci_error_t *error)
{
        SCIMapLocalSegmentForDevice(segment, localAdapterNo, device, ioaddr, offset, size, 0,
                                    error);
}

static inline void _SISCI_MapRemoteSegmentForDevice6(sci_remote_segment_t segment,
                                                     sci_smartio_device_t device,
                                                     sci_ioaddr_t *ioaddr, size_t offset,
                                                     size_t size, sci_error_t *error)
{
        SCIMapRemoteSegmentForDevice(segment, device, ioaddr, offset, size, 0, error);
}

static inline void _SISCI_ConnectDeviceMemoryDevFirst(sci_desc_t sd, sci_remote_segment_t *segment,
                                                      sci_device_t device,
                                                      unsigned int localAdapterNo,
                                                      unsigned int segmentNo, unsigned int reserved,
                                                      unsigned int flags, sci_error_t *error)
{
        SCIConnectDeviceMemory(sd, segment, localAdapterNo, device, segmentNo, reserved, flags,
                               error);
}

/* A call with the older generation's number of arguments takes that generation's form. */
#define _SISCI_PICK8(_1, _2, _3, _4, _5, _6, _7, _8, name, ...) name
#define _SISCI_PICK7(_1, _2, _3, _4, _5, _6, _7, name, ...)     name
#define _SISCI_PUBLIC_FUNC_MT_SCIMapLocalSegmentForDevice(...)                                     \
        _SISCI_PICK8(__VA_ARGS__, _SISCI_PUBLIC_FUNC_MT_SCIMapLocalSegmentForDevice,               \
                     _SISCI_MapLocalSegmentForDevice7, )                                           \
        (__VA_ARGS__)
#define _SISCI_PUBLIC_FUNC_ST_SCIMapLocalSegmentForDevice(...)                                     \
        _SISCI_PICK8(__VA_ARGS__, _SISCI_PUBLIC_FUNC_ST_SCIMapLocalSegmentForDevice,               \
                     _SISCI_MapLocalSegmentForDevice7, )                                           \
        (__VA_ARGS__)
#define _SISCI_PUBLIC_FUNC_MT_SCIMapRemoteSegmentForDevice(...)                                    \
        _SISCI_PICK7(__VA_ARGS__, _SISCI_PUBLIC_FUNC_MT_SCIMapRemoteSegmentForDevice,              \
                     _SISCI_MapRemoteSegmentForDevice6, )                                          \
        (__VA_ARGS__)
#define _SISCI_PUBLIC_FUNC_ST_SCIMapRemoteSegmentForDevice(...)                                    \
        _SISCI_PICK7(__VA_ARGS__, _SISCI_PUBLIC_FUNC_ST_SCIMapRemoteSegmentForDevice,              \
                     _SISCI_MapRemoteSegmentForDevice6, )                                          \
        (__VA_ARGS__)

#ifdef __cplusplus
static inline void _SISCI_EXPANDE_FUNCTION_NAME(SCIConnectDeviceMemory)(
    sci_desc_t sd, sci_remote_segment_t *segment, sci_device_t device, unsigned int localAdapterNo,
    unsigned int segmentNo, unsigned int reserved, unsigned int flags, sci_error_t *error)
{
        _SISCI_ConnectDeviceMemoryDevFirst(sd, segment, device, localAdapterNo, segmentNo, reserved,
                                           flags, error);
}
#else
#if defined(__GNUC__)
#define _SISCI_GENERIC __extension__ _Generic /* also under -std=c99 -pedantic */
#else
#define _SISCI_GENERIC _Generic
#endif
#define _SISCI_CONNECT_DEVICE_MEMORY(fn, sd, segment, a, ...)                                      \
        _SISCI_GENERIC((a), sci_device_t                                                           \
                       : _SISCI_ConnectDeviceMemoryDevFirst, default                               \
                       : fn)                                                                       \
        (sd, segment, a, __VA_ARGS__)
#define _SISCI_PUBLIC_FUNC_MT_SCIConnectDeviceMemory(...)                                          \
        _SISCI_CONNECT_DEVICE_MEMORY(_SISCI_PUBLIC_FUNC_MT_SCIConnectDeviceMemory, __VA_ARGS__)
#define _SISCI_PUBLIC_FUNC_ST_SCIConnectDeviceMemory(...)                                          \
        _SISCI_CONNECT_DEVICE_MEMORY(_SISCI_PUBLIC_FUNC_ST_SCIConnectDeviceMemory, __VA_ARGS__)
#endif

#endif
