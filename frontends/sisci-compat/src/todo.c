/* frontends/sisci-compat/src/todo.c: entry points not written yet (temporary). */
#include <stdlib.h>

#include "sx.h"

#define NI(err) do { if (err) *(err) = SCI_ERR_NOT_IMPLEMENTED; } while (0)

void sx_dev_free(struct sx_dev *d) { free(d); }
void sx_dev_drop(struct sx_dev *d) { (void)d; }
void sx_on_device_lost(uint32_t fdid) { (void)fdid; }
sci_error_t sx_query_device(sci_smartio_query_device_t *q);
sci_error_t sx_query_device(sci_smartio_query_device_t *q) { (void)q; return SCI_ERR_NOT_IMPLEMENTED; }

size_t SCIGetDeviceList(sci_desc_t sd, uint32_t *fd, size_t l, const sci_smartio_device_info_t *fi, unsigned int f, sci_error_t *e) { (void)sd; (void)fd; (void)l; (void)fi; (void)f; NI(e); return 0; }
void SCIBorrowDevice(sci_desc_t sd, sci_smartio_device_t *d, uint32_t fdid, unsigned int f, sci_error_t *e) { (void)sd; (void)d; (void)fdid; (void)f; NI(e); }
void SCIReturnDevice(sci_smartio_device_t d, unsigned int f, sci_error_t *e) { (void)d; (void)f; NI(e); }
void SCIReleaseExclusiveBorrow(sci_smartio_device_t d, unsigned int f, sci_error_t *e) { (void)d; (void)f; NI(e); }
uint32_t SCIGetFabricDeviceId(sci_smartio_device_t d) { (void)d; return 0; }
void SCIConnectDeviceSegment(sci_smartio_device_t d, sci_remote_segment_t *s, unsigned int id, unsigned int m, sci_cb_device_segment_t cb, void *a, unsigned int f, sci_error_t *e) { (void)d; (void)s; (void)id; (void)m; (void)cb; (void)a; (void)f; NI(e); }
void SCIConnectDeviceSegmentPath(sci_smartio_device_t d, sci_remote_segment_t *s, unsigned int id, unsigned int m, unsigned int ad, sci_cb_device_segment_t cb, void *a, unsigned int f, sci_error_t *e) { (void)d; (void)s; (void)id; (void)m; (void)ad; (void)cb; (void)a; (void)f; NI(e); }
void SCICreateDeviceSegment(sci_smartio_device_t d, unsigned int id, size_t s, unsigned int m, unsigned int h, unsigned int f, sci_error_t *e) { (void)d; (void)id; (void)s; (void)m; (void)h; (void)f; NI(e); }
void SCIMapLocalSegmentForDevice(sci_local_segment_t s, unsigned int a, sci_smartio_device_t d, sci_ioaddr_t *io, size_t o, size_t z, unsigned int f, sci_error_t *e) { (void)s; (void)a; (void)d; (void)io; (void)o; (void)z; (void)f; NI(e); }
void SCIUnmapLocalSegmentForDevice(sci_local_segment_t s, unsigned int a, sci_smartio_device_t d, unsigned int f, sci_error_t *e) { (void)s; (void)a; (void)d; (void)f; NI(e); }
void SCIMapRemoteSegmentForDevice(sci_remote_segment_t s, sci_smartio_device_t d, sci_ioaddr_t *io, size_t o, size_t z, unsigned int f, sci_error_t *e) { (void)s; (void)d; (void)io; (void)o; (void)z; (void)f; NI(e); }
void SCIUnmapRemoteSegmentForDevice(sci_remote_segment_t s, sci_smartio_device_t d, unsigned int f, sci_error_t *e) { (void)s; (void)d; (void)f; NI(e); }
void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int a, unsigned int b, unsigned int df, unsigned int f, sci_error_t *e) { (void)sd; (void)a; (void)b; (void)df; (void)f; NI(e); }
void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int a, unsigned int b, unsigned int df, unsigned int f, sci_error_t *e) { (void)sd; (void)a; (void)b; (void)df; (void)f; NI(e); }
