/* daemon/ids.h: fabric-wide device ids (fdid), function addresses, and the reply callback shape. */
#ifndef NTBF_DAEMON_IDS_H
#define NTBF_DAEMON_IDS_H

#include <json-c/json.h>

#include "ntbfab/topology.h"

/*
 * One shape for every answer, local or from a peer: err is 0 or an ntbfab / -errno code,
 * msg the sentence when err != 0, res the result (ownership passes to the callback).
 */
typedef void (*ntbf__done_fn)(void *arg, int err, const char *msg, struct json_object *res);

/* fdid = node id << 12 | index of the function among the node's borrowable ones (docs/daemon.md).
 */
#define NTBF_FDID_INDEX_BITS 12
uint32_t ntbf__fdid_of(const struct ntbf_topo *t, uint32_t device, uint32_t function);
/* NTBF_ENOTFOUND when fdid names no function of the topology. */
int ntbf__fdid_resolve(const struct ntbf_topo *t, uint32_t fdid, uint32_t *device,
                       uint32_t *function);
/* The function's own PCI address in its host ("0000:05:00.0"). */
const char *ntbf__func_bdf(const struct ntbf_topo *t, uint32_t device, uint32_t function, char *buf,
                           size_t len);
/* The device function of node at bdf, by its own address; NTBF_ENOTFOUND if none. */
int ntbf__func_by_bdf(const struct ntbf_topo *t, uint32_t node, const char *bdf, uint32_t *device,
                      uint32_t *function);
/* "0x4001". */
const char *ntbf__fdid_str(uint32_t fdid, char *buf, size_t len);

/* JSON text of o, compact, as the wire carries it (valid until o changes). */
const char *ntbf__json_text(struct json_object *o);

/* Small JSON helpers. */
void ntbf__jput_u(struct json_object *o, const char *k, uint64_t v);
void ntbf__jput_s(struct json_object *o, const char *k, const char *v);
void ntbf__jput_b(struct json_object *o, const char *k, bool v);
/* A member as an unsigned integer / string / bool; false if absent or of another type. */
bool ntbf__jget_u(struct json_object *o, const char *k, uint64_t *v);
bool ntbf__jget_s(struct json_object *o, const char *k, const char **v);
bool ntbf__jget_b(struct json_object *o, const char *k, bool *v);
/* "window" and "offset" of window address addr of adapter a (docs/rpc.md). */
void ntbf__put_window(struct json_object *o, const struct ntbf_adapter *a, uint64_t addr);

#endif
