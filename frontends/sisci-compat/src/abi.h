/* frontends/sisci-compat/src/abi.h: the one list of libsisci's exported names (functions,
 * constants). */
#ifndef SX_ABI_H
#define SX_ABI_H

/*
 * Every public function of sisci_api.h, once. The library defines the thread-safe entry point
 * _SISCI_PUBLIC_FUNC_MT_<name>; _SISCI_PUBLIC_FUNC_ST_<name> is the same code under the other
 * name. The version script and the aliases are generated from this list (mkabi.c), and the
 * link fails when a name here has no definition, so the exports cannot drift from it; the
 * ABI test compares the list with the header.
 */
#define SX_FUNCS(X)                                                                                \
        X(SCIInitialize)                                                                           \
        X(SCITerminate)                                                                            \
        X(SCIOpen)                                                                                 \
        X(SCIClose)                                                                                \
        X(SCIGetLocalNodeId)                                                                       \
        X(SCIProbeNode)                                                                            \
        X(SCIGetNodeIdByAdapterName)                                                               \
        X(SCIGetNodeInfoByAdapterName)                                                             \
        X(SCIQuery)                                                                                \
        X(SCIGetErrorString)                                                                       \
        X(SCICreateSegment)                                                                        \
        X(SCIRemoveSegment)                                                                        \
        X(SCIPrepareSegment)                                                                       \
        X(SCISetSegmentAvailable)                                                                  \
        X(SCISetSegmentUnavailable)                                                                \
        X(SCIAttachPhysicalMemory)                                                                 \
        X(SCIRegisterSegmentMemory)                                                                \
        X(SCIShareSegment)                                                                         \
        X(SCIAttachLocalSegment)                                                                   \
        X(SCIConnectSegment)                                                                       \
        X(SCIDisconnectSegment)                                                                    \
        X(SCIGetLocalSegmentSize)                                                                  \
        X(SCIGetRemoteSegmentSize)                                                                 \
        X(SCIGetLocalSegmentId)                                                                    \
        X(SCIGetRemoteSegmentId)                                                                   \
        X(SCIGetRemoteSegmentNodeId)                                                               \
        X(SCIWaitForLocalSegmentEvent)                                                             \
        X(SCIWaitForRemoteSegmentEvent)                                                            \
        X(SCIMapLocalSegment)                                                                      \
        X(SCIMapRemoteSegment)                                                                     \
        X(SCIUnmapSegment)                                                                         \
        X(SCIGetMapPointer)                                                                        \
        X(SCIGetMapPhysAddr)                                                                       \
        X(SCICreateMapSequence)                                                                    \
        X(SCIRemoveSequence)                                                                       \
        X(SCIStartSequence)                                                                        \
        X(SCICheckSequence)                                                                        \
        X(SCIFlush)                                                                                \
        X(SCIStoreBarrier)                                                                         \
        X(SCIMemCpy)                                                                               \
        X(SCIMemWrite)                                                                             \
        X(SCICacheSync)                                                                            \
        X(SCICreateDMAQueue)                                                                       \
        X(SCIRemoveDMAQueue)                                                                       \
        X(SCIAbortDMAQueue)                                                                        \
        X(SCIStartDmaTransfer)                                                                     \
        X(SCIStartDmaTransferVec)                                                                  \
        X(SCIStartDmaTransferMem)                                                                  \
        X(SCIRequestDMAChannel)                                                                    \
        X(SCIReturnDMAChannel)                                                                     \
        X(SCIAssignDMAChannel)                                                                     \
        X(SCIWaitForDMAQueue)                                                                      \
        X(SCIDMAQueueState)                                                                        \
        X(SCICreateInterrupt)                                                                      \
        X(SCIRemoveInterrupt)                                                                      \
        X(SCIWaitForInterrupt)                                                                     \
        X(SCIConnectInterrupt)                                                                     \
        X(SCIDisconnectInterrupt)                                                                  \
        X(SCITriggerInterrupt)                                                                     \
        X(SCICreateDataInterrupt)                                                                  \
        X(SCIRemoveDataInterrupt)                                                                  \
        X(SCIWaitForDataInterrupt)                                                                 \
        X(SCIConnectDataInterrupt)                                                                 \
        X(SCIDisconnectDataInterrupt)                                                              \
        X(SCITriggerDataInterrupt)                                                                 \
        X(SCIRegisterInterruptFlag)                                                                \
        X(SCIEnableConditionalInterrupt)                                                           \
        X(SCIDisableConditionalInterrupt)                                                          \
        X(SCIGetConditionalInterruptTrigCounter)                                                   \
        X(SCIGetDeviceList)                                                                        \
        X(SCIBorrowDevice)                                                                         \
        X(SCIReturnDevice)                                                                         \
        X(SCIReleaseExclusiveBorrow)                                                               \
        X(SCIGetFabricDeviceId)                                                                    \
        X(SCIConnectDeviceSegment)                                                                 \
        X(SCIConnectDeviceSegmentPath)                                                             \
        X(SCICreateDeviceSegment)                                                                  \
        X(SCIMapLocalSegmentForDevice)                                                             \
        X(SCIUnmapLocalSegmentForDevice)                                                           \
        X(SCIMapRemoteSegmentForDevice)                                                            \
        X(SCIUnmapRemoteSegmentForDevice)                                                          \
        X(SCIRegisterPCIeRequester)                                                                \
        X(SCIUnregisterPCIeRequester)                                                              \
        X(SCIConnectDeviceMemory)

/* Undocumented exports of Dolphin's library under their plain names (compat.c). */
#define SX_PLAIN(X)                                                                                \
        X(SetSciMemCopyFunction)                                                                   \
        X(GetSciMemCopyFunction)

/*
 * Constants that headers of the original API declare as extern const unsigned int
 * _SISCI_PUBLIC_CONST_<name>: every SCI_FLAG_*, SCI_Q_* and SCI_INFINITE_TIMEOUT of
 * sisci_types.h. The library exports them with the header's values (consts.c).
 */
#define SX_CONSTS(X)                                                                               \
        X(SCI_INFINITE_TIMEOUT)                                                                    \
        X(SCI_FLAG_USE_CALLBACK)                                                                   \
        X(SCI_FLAG_EMPTY)                                                                          \
        X(SCI_FLAG_PRIVATE)                                                                        \
        X(SCI_FLAG_DMA_SOURCE_ONLY)                                                                \
        X(SCI_FLAG_FORCE_REMOVE)                                                                   \
        X(SCI_FLAG_LOCK_USER_MEM)                                                                  \
        X(SCI_FLAG_PHYSICAL)                                                                       \
        X(SCI_FLAG_CUDA_BUFFER)                                                                    \
        X(SCI_FLAG_SCIF_BUFFER)                                                                    \
        X(SCI_FLAG_BROADCAST)                                                                      \
        X(SCI_FLAG_AUTO_ID)                                                                        \
        X(SCI_FLAG_DMA_WAIT)                                                                       \
        X(SCI_FLAG_DMA_READ)                                                                       \
        X(SCI_FLAG_DMA_PHDMA)                                                                      \
        X(SCI_FLAG_DMA_GLOBAL)                                                                     \
        X(SCI_FLAG_ALLOW_UNICAST)                                                                  \
        X(SCI_FLAG_DMA_SYSDMA)                                                                     \
        X(SCI_FLAG_DMA_USER_MEM)                                                                   \
        X(SCI_FLAG_DMA_ADAPTER)                                                                    \
        X(SCI_FLAG_FIXED_INTNO)                                                                    \
        X(SCI_FLAG_SHARED_INT)                                                                     \
        X(SCI_FLAG_CONDITIONAL_INTERRUPT)                                                          \
        X(SCI_FLAG_COUNTING_INT)                                                                   \
        X(SCI_FLAG_SHARE_EXTERNAL)                                                                 \
        X(SCI_FLAG_FIXED_MAP_ADDR)                                                                 \
        X(SCI_FLAG_READONLY_MAP)                                                                   \
        X(SCI_FLAG_LOCK_OPERATION)                                                                 \
        X(SCI_FLAG_CONDITIONAL_INTERRUPT_MAP)                                                      \
        X(SCI_FLAG_UNCONDITIONAL_DATA_INTERRUPT_MAP)                                               \
        X(SCI_FLAG_IO_MAP_IOSPACE)                                                                 \
        X(SCI_FLAG_NO_MEMORY_LOOPBACK)                                                             \
        X(SCI_FLAG_SHARED_MAP)                                                                     \
        X(SCI_FLAG_WRITE_BACK_CACHE_MAP)                                                           \
        X(SCI_FLAG_BLOCK_READ)                                                                     \
        X(SCI_FLAG_ERROR_CHECK)                                                                    \
        X(SCI_FLAG_THREAD_SAFE)                                                                    \
        X(SCI_FLAG_FLUSH_CPU_BUFFERS_ONLY)                                                         \
        X(SCI_FLAG_CACHE_FLUSH)                                                                    \
        X(SCI_FLAG_CACHE_INVALIDATE)                                                               \
        X(SCI_FLAG_EXCLUSIVE)                                                                      \
        X(SCI_FLAG_DEVICE_SIDE_ONLY)                                                               \
        X(SCI_FLAG_LOCAL_ONLY)                                                                     \
        X(SCI_FLAG_DEVICE_PREFER_BANDWIDTH)                                                        \
        X(SCI_FLAG_HOST_PREFER_BANDWIDTH)                                                          \
        X(SCI_FLAG_SPECIFY_PATH)                                                                   \
        X(SCI_FLAG_SPECIFY_SLOT)                                                                   \
        X(SCI_FLAG_PCIE_REQUESTER_GLOBAL)                                                          \
        X(SCI_FLAG_BAR)                                                                            \
        X(SCI_FLAG_SHARED)                                                                         \
        X(SCI_Q_VENDORID)                                                                          \
        X(SCI_Q_API)                                                                               \
        X(SCI_Q_ADAPTER)                                                                           \
        X(SCI_Q_LOCAL_SEGMENT)                                                                     \
        X(SCI_Q_REMOTE_SEGMENT)                                                                    \
        X(SCI_Q_DEVICE)                                                                            \
        X(SCI_Q_MAP)                                                                               \
        X(SCI_Q_ADAPTER_NODEID)                                                                    \
        X(SCI_Q_ADAPTER_BDF)                                                                       \
        X(SCI_Q_ADAPTER_SERIAL_NUMBER)                                                             \
        X(SCI_Q_ADAPTER_NUMBER_OF_PORTS)                                                           \
        X(SCI_Q_ADAPTER_DMA_MTU)                                                                   \
        X(SCI_Q_ADAPTER_LINK_OPERATIONAL)                                                          \
        X(SCI_Q_ADAPTER_CONFIGURED)                                                                \
        X(SCI_Q_ADAPTER_DMA_SIZE_ALIGNMENT)                                                        \
        X(SCI_Q_ADAPTER_DMA_OFFSET_ALIGNMENT)                                                      \
        X(SCI_Q_ADAPTER_ATT_PAGE_SIZE)                                                             \
        X(SCI_Q_ADAPTER_ATT_NUMBER_OF_ENTRIES)                                                     \
        X(SCI_Q_LOCAL_SEGMENT_IOADDR)                                                              \
        X(SCI_Q_LOCAL_SEGMENT_PHYS_ADDR)                                                           \
        X(SCI_Q_REMOTE_SEGMENT_IOADDR)                                                             \
        X(SCI_Q_DEVICE_INFO)

#endif
