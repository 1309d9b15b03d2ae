/* daemon/sisci.h: the node daemon's SISCI side: client sessions and the sisci.* methods. */
#ifndef NTBF_DAEMON_SISCI_H
#define NTBF_DAEMON_SISCI_H

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

#include "rpc.h"

struct ntbf__d;
struct ntbf__sx;

/* The sisci.* RPC methods, spliced into the daemon's method table (methods.c). */
#define NTBF__SX_METHOD_DECL(fn)                                                                   \
        void fn(void *ctx, struct ntbf__rpc_call *call, struct json_object *p)
NTBF__SX_METHOD_DECL(ntbf__sx_m_session);
NTBF__SX_METHOD_DECL(ntbf__sx_m_listen);
NTBF__SX_METHOD_DECL(ntbf__sx_m_seg_create);
NTBF__SX_METHOD_DECL(ntbf__sx_m_seg_attach);
NTBF__SX_METHOD_DECL(ntbf__sx_m_seg_available);
NTBF__SX_METHOD_DECL(ntbf__sx_m_seg_remove);
NTBF__SX_METHOD_DECL(ntbf__sx_m_connect);
NTBF__SX_METHOD_DECL(ntbf__sx_m_release);
NTBF__SX_METHOD_DECL(ntbf__sx_m_int_create);
NTBF__SX_METHOD_DECL(ntbf__sx_m_int_remove);
NTBF__SX_METHOD_DECL(ntbf__sx_m_int_connect);
NTBF__SX_METHOD_DECL(ntbf__sx_m_dma_channel);
NTBF__SX_METHOD_DECL(ntbf__sx_m_borrow);
NTBF__SX_METHOD_DECL(ntbf__sx_m_return);
NTBF__SX_METHOD_DECL(ntbf__sx_m_release_exclusive);
NTBF__SX_METHOD_DECL(ntbf__sx_m_devseg_create);
NTBF__SX_METHOD_DECL(ntbf__sx_m_devseg_connect);
NTBF__SX_METHOD_DECL(ntbf__sx_m_map_device);
NTBF__SX_METHOD_DECL(ntbf__sx_m_requester);

extern const char *const ntbf__sx_places[]; /* "hints", "device", "host" */

#define NTBF__SX_U(name, req, lo, hi)                                                              \
        {                                                                                          \
                name, NTBF_P_UINT, req, lo, hi, NULL                                               \
        }
#define NTBF__SX_B(name)                                                                           \
        {                                                                                          \
                name, NTBF_P_BOOL, false, 0, 0, NULL                                               \
        }
#define NTBF__SX_ID   NTBF__SX_U("id", true, 0, UINT32_MAX)
#define NTBF__SX_ADAP NTBF__SX_U("adapter", true, 0, 63)
#define NTBF__SX_HOLD NTBF__SX_U("holder", true, 1, UINT64_MAX >> 12)

/* docs/rpc.md, "SISCI" */
#define NTBF__SX_METHODS                                                                           \
        {"sisci.session", ntbf__sx_m_session, {{NULL}}},                                           \
            {"sisci.listen", ntbf__sx_m_listen, {NTBF__SX_U("session", true, 1, UINT64_MAX)}},     \
            {"sisci.seg_create",                                                                   \
             ntbf__sx_m_seg_create,                                                                \
             {NTBF__SX_U("id", false, 0, UINT32_MAX),                                              \
              NTBF__SX_U("size", true, 1, UINT64_C(1) << 48),                                      \
              NTBF__SX_U("addr", false, 0, UINT64_C(1) << 48), NTBF__SX_B("private"),              \
              NTBF__SX_B("broadcast")}},                                                           \
            {"sisci.seg_attach",                                                                   \
             ntbf__sx_m_seg_attach,                                                                \
             {NTBF__SX_ID, NTBF__SX_U("addr", true, 0, UINT64_C(1) << 48),                         \
              NTBF__SX_U("size", true, 1, UINT64_C(1) << 48)}},                                    \
            {"sisci.seg_available",                                                                \
             ntbf__sx_m_seg_available,                                                             \
             {NTBF__SX_ID, NTBF__SX_ADAP, {"available", NTBF_P_BOOL, true, 0, 0, NULL}}},          \
            {"sisci.seg_remove",                                                                   \
             ntbf__sx_m_seg_remove,                                                                \
             {NTBF__SX_ID, NTBF__SX_B("force"), NTBF__SX_B("graceful")}},                          \
            {"sisci.connect",                                                                      \
             ntbf__sx_m_connect,                                                                   \
             {NTBF__SX_U("node_id", true, 0, UINT32_MAX), NTBF__SX_ID, NTBF__SX_ADAP,              \
              NTBF__SX_B("broadcast")}},                                                           \
            {"sisci.release", ntbf__sx_m_release, {NTBF__SX_U("handle", true, 1, UINT64_MAX)}},    \
            {"sisci.int_create",                                                                   \
             ntbf__sx_m_int_create,                                                                \
             {NTBF__SX_B("data_int"), NTBF__SX_U("intno", false, 0, UINT32_MAX),                   \
              NTBF__SX_U("data", true, 0, UINT32_MAX), NTBF__SX_U("addr", true, 0, UINT64_MAX),    \
              NTBF__SX_U("mbox_addr", false, 0, UINT64_C(1) << 48),                                \
              NTBF__SX_U("mbox_size", false, 0, UINT64_C(1) << 40),                                \
              NTBF__SX_U("lanes", false, 1, 64)}},                                                 \
            {"sisci.int_remove",                                                                   \
             ntbf__sx_m_int_remove,                                                                \
             {NTBF__SX_B("data_int"), NTBF__SX_U("intno", true, 0, UINT32_MAX)}},                  \
            {"sisci.int_connect",                                                                  \
             ntbf__sx_m_int_connect,                                                               \
             {NTBF__SX_B("data_int"), NTBF__SX_U("node_id", true, 0, UINT32_MAX),                  \
              NTBF__SX_U("intno", true, 0, UINT32_MAX), NTBF__SX_ADAP}},                           \
            {"sisci.dma_channel", ntbf__sx_m_dma_channel, {NTBF__SX_ADAP}},                        \
            {"sisci.borrow",                                                                       \
             ntbf__sx_m_borrow,                                                                    \
             {NTBF__SX_U("fdid", true, 0, UINT32_MAX), NTBF__SX_B("exclusive")}},                  \
            {"sisci.return", ntbf__sx_m_return, {NTBF__SX_HOLD}},                                  \
            {"sisci.release_exclusive", ntbf__sx_m_release_exclusive, {NTBF__SX_HOLD}},            \
            {"sisci.devseg_create",                                                                \
             ntbf__sx_m_devseg_create,                                                             \
             {NTBF__SX_HOLD,                                                                       \
              NTBF__SX_ID,                                                                         \
              NTBF__SX_U("size", true, 1, UINT64_C(1) << 40),                                      \
              NTBF__SX_U("memtype", true, 2, 4),                                                   \
              NTBF__SX_U("hints", false, 0, 0xff),                                                 \
              {"place", NTBF_P_ENUM, false, 0, 0, ntbf__sx_places}}},                              \
            {"sisci.devseg_connect",                                                               \
             ntbf__sx_m_devseg_connect,                                                            \
             {NTBF__SX_HOLD, NTBF__SX_ID, NTBF__SX_U("memtype", true, 1, 4), NTBF__SX_ADAP}},      \
            {"sisci.map_device",                                                                   \
             ntbf__sx_m_map_device,                                                                \
             {NTBF__SX_HOLD, NTBF__SX_U("seg", false, 0, UINT32_MAX),                              \
              NTBF__SX_U("node", false, 0, UINT32_MAX), NTBF__SX_U("group", false, 0, UINT32_MAX), \
              NTBF__SX_U("addr", false, 0, UINT64_MAX),                                            \
              NTBF__SX_U("size", true, 1, UINT64_C(1) << 48),                                      \
              NTBF__SX_U("adapter", false, 0, 63)}},                                               \
        {                                                                                          \
                "sisci.requester", ntbf__sx_m_requester,                                           \
                {                                                                                  \
                        NTBF__SX_ADAP, NTBF__SX_U("bus", true, 0, 255),                            \
                            NTBF__SX_U("devfn", true, 0, 255)                                      \
                }                                                                                  \
        }

int ntbf__sx_new(struct ntbf__d *d);
void ntbf__sx_free(struct ntbf__d *d);
/* A client connection went away: end its session, or stop sending it events. */
void ntbf__sx_conn_gone(struct ntbf__d *d, struct ntbf__rpc_conn *c);
/* What this node tells the manager when it registers: live sessions, exports, holds. */
struct json_object *ntbf__sx_register_params(struct ntbf__d *d);
/* A note from the manager (sx_event, sx_memfree); false if not one. */
bool ntbf__sx_note(struct ntbf__d *d, const char *m, struct json_object *p);
/* A request from the manager (sx_mem); false if not one. */
bool ntbf__sx_request(struct ntbf__d *d, const char *m, struct json_object *p,
                      void (*cb)(void *arg, int err, const char *msg, struct json_object *res),
                      void *arg);
/* Whether m is a SISCI request for the fabric manager (sx_export, ...). */
bool ntbf__sx_fm_method(const char *m);
/* Whether the client process pid holds local device fdid through SISCI (device.open then
 * opens it even while other nodes borrow it shared). */
bool ntbf__sx_pid_holds(struct ntbf__d *d, pid_t pid, uint32_t fdid);
/* device.lost for fdid: SISCI's borrows of it are gone with the node's borrow. */
void ntbf__sx_device_lost(struct ntbf__d *d, uint32_t fdid);
/* Whether a session of this node holds its borrow of fdid. */
bool ntbf__sx_holds(struct ntbf__d *d, uint32_t fdid);

#endif
