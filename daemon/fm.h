/* daemon/fm.h: the fabric manager: device registry, admission, programming, leases
 * (docs/daemon.md). */
#ifndef NTBF_DAEMON_FM_H
#define NTBF_DAEMON_FM_H

#include "ids.h"
#include "ntbfab/budget.h"
#include "store.h"

/*
 * The fabric manager holds the one budget state of the fabric and decides every lend,
 * borrow, return and mapping. It never touches hardware or sockets: it asks nodes to
 * program entries through net (peer.c in the daemon; a fake in unit tests), and is told
 * the time by it, so leases are testable with a fake clock.
 */
struct ntbf__fm_net {
        void *ctx;
        /* Send request m (params p, ownership taken) to node (maybe this one); cb runs once. */
        void (*request)(void *ctx, uint32_t node, const char *m, struct json_object *p,
                        ntbf__done_fn cb, void *arg);
        /* A one-way message to node (ownership of p taken). */
        void (*notify)(void *ctx, uint32_t node, const char *m, struct json_object *p);
        uint64_t (*now_ms)(void *ctx);
        /* Whether node's daemon is connected (this node: always). */
        bool (*connected)(void *ctx, uint32_t node);
        /* Optional. The time up to which every message sent to this node has been read
         * (leases are measured up to it); without it, now_ms. */
        uint64_t (*heard_ms)(void *ctx);
        /* Optional. Call fn(arg) on the next turn of the loop, after pending I/O; without it
         * queued mutations run back to back. */
        void (*defer)(void *ctx, void (*fn)(void *), void *arg);
};

struct ntbf__fm;

/*
 * Load the registry and the committed plans from st (rebuilding the budget state in their
 * order), and start every node's lease afresh. why says what failed.
 */
int ntbf__fm_new(const struct ntbf_topo *t, uint32_t self, struct ntbf__store *st,
                 const struct ntbf__fm_net *net, struct ntbf__fm **out, char *why, size_t whylen);
void ntbf__fm_free(struct ntbf__fm *fm);

/*
 * A request from node `from` (p is borrowed, not taken): register, sync, lend, unlend,
 * avail, list, borrow, return, map, unmap, status. cb runs exactly once, maybe later
 * (mutations run one at a time, in arrival order).
 */
void ntbf__fm_request(struct ntbf__fm *fm, uint32_t from, const char *m, struct json_object *p,
                      ntbf__done_fn cb, void *arg);
/* node was heard from (a heartbeat or any message): its leases are renewed. hb may carry
 * its adapters' port states {"ports": [[adapter, port, up], ...]}. */
void ntbf__fm_seen(struct ntbf__fm *fm, uint32_t node, struct json_object *hb);
/* Look at the leases: a silent node's borrows are returned, its lent devices lost. */
void ntbf__fm_tick(struct ntbf__fm *fm);
/* Mutations queued or running (0 when idle). */
unsigned ntbf__fm_busy(const struct ntbf__fm *fm);
/* The budget state (tests compare it with the baseline). */
const struct ntbf_state *ntbf__fm_state(const struct ntbf__fm *fm);

#endif
