/* daemon/store.h: a node daemon's SQLite database (WAL): what must survive a SIGKILL. */
#ifndef NTBF_DAEMON_STORE_H
#define NTBF_DAEMON_STORE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Tables are maps from a text key to a JSON text value, kept in insertion order (an update
 * keeps a row's place): that order is the order the fabric manager committed its plans in,
 * which rebuilding the budget state depends on (docs/daemon.md).
 *
 *   meta        schema version, the node the database belongs to
 *   lends       this node's lent device functions (fdid -> {available})
 *   borrows     this node's borrows (fdid -> BORROW as the fabric manager answered it)
 *   programmed  what this node programmed in its hardware (entry key -> entry)
 *   fm_devices  fabric manager: the device registry (fdid -> {node, available, lost})
 *   fm_allocs   fabric manager: committed plans (sequence -> {kind, ..., plan})
 *   fm_devsegs  fabric manager: SISCI device segments (tag -> where their memory is, whose)
 *   fm_res      fabric manager: every resource of every committed plan, one row each (for
 *               operators and tests: LUT slots, requester IDs, IOVA and window ranges)
 */
enum ntbf__table {
        NTBF_T_META,
        NTBF_T_LENDS,
        NTBF_T_BORROWS,
        NTBF_T_PROGRAMMED,
        NTBF_T_FM_DEVICES,
        NTBF_T_FM_ALLOCS,
        NTBF_T_FM_DEVSEGS,
        NTBF_T_COUNT
};

struct ntbf__store;

/* Open or create path (":memory:" for tests). */
int ntbf__store_open(const char *path, struct ntbf__store **out, char *why, size_t whylen);
void ntbf__store_close(struct ntbf__store *s);
/* Remove a closed database file and its WAL journals (tests, benchmarks). */
void ntbf__store_remove(const char *path);
/* The last SQLite error message. */
const char *ntbf__store_error(const struct ntbf__store *s);

/* Group changes into one transaction (nested calls are counted). */
int ntbf__store_begin(struct ntbf__store *s);
int ntbf__store_commit(struct ntbf__store *s);
/* Undo the open transaction (all nesting levels). */
void ntbf__store_rollback(struct ntbf__store *s);

int ntbf__store_put(struct ntbf__store *s, enum ntbf__table t, const char *key, const char *json);
int ntbf__store_del(struct ntbf__store *s, enum ntbf__table t, const char *key);
int ntbf__store_clear(struct ntbf__store *s, enum ntbf__table t);
/* The value of key into a malloc'd string (caller frees), NTBF_ENOTFOUND if absent. */
int ntbf__store_get(struct ntbf__store *s, enum ntbf__table t, const char *key, char **json);
/* Call fn for every row in insertion order; a non-zero return stops and is returned. */
int ntbf__store_each(struct ntbf__store *s, enum ntbf__table t,
                     int (*fn)(void *arg, const char *key, const char *json), void *arg);

/* The fabric manager's resource rows of allocation seq (replaced as a whole). */
struct ntbf__res_row {
        const char *kind, *object, *what;
        int64_t first, count;
        uint64_t addr, size, dst_addr;
        const char *dst_node, *programmer;
};
int ntbf__store_res_put(struct ntbf__store *s, uint64_t seq, const struct ntbf__res_row *rows,
                        size_t n);
int ntbf__store_res_del(struct ntbf__store *s, uint64_t seq);

#endif
