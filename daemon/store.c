/* daemon/store.c: the daemon's SQLite tables (WAL journal, ordered key -> JSON rows). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntbfab/error.h"
#include "store.h"

#define SCHEMA_VERSION "1"

static const char *const table_names[NTBF_T_COUNT] = {
    "meta", "lends", "borrows", "programmed", "fm_devices", "fm_allocs", "fm_devsegs",
};

struct ntbf__store {
        sqlite3 *db;
        int depth; /* nested begin calls */
        sqlite3_stmt *put[NTBF_T_COUNT], *del[NTBF_T_COUNT], *get[NTBF_T_COUNT];
        sqlite3_stmt *res_put, *res_del;
        /* Prepared once: a mutation's transaction is a few rows, parsing its BEGIN and COMMIT
         * each time cost as much as writing them. */
        sqlite3_stmt *begin, *commit;
        char why[256]; /* a transaction that could not begin or commit (rolled back) */
};

const char *ntbf__store_error(const struct ntbf__store *s)
{
        if (s && s->why[0])
                return s->why;
        return s && s->db ? sqlite3_errmsg(s->db) : "no database";
}

static int exec(struct ntbf__store *s, const char *sql)
{
        return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

static int prepare(struct ntbf__store *s, const char *sql, sqlite3_stmt **st)
{
        return sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK
                   ? 0
                   : -EIO;
}

int ntbf__store_open(const char *path, struct ntbf__store **out, char *why, size_t whylen)
{
        struct ntbf__store *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        int r = -EIO;
        if (sqlite3_open_v2(path, &s->db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                            NULL) != SQLITE_OK)
                goto fail;
        sqlite3_busy_timeout(s->db, 2000);
        /* WAL with synchronous=NORMAL: a commit is in the log before it returns, so a killed
         * process loses nothing it committed (only a power loss could lose the last ones). */
        if (exec(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                    "PRAGMA foreign_keys=OFF;"))
                goto fail;
        for (int t = 0; t < NTBF_T_COUNT; t++) {
                char sql[512];
                snprintf(sql, sizeof(sql),
                         "CREATE TABLE IF NOT EXISTS %s (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
                         table_names[t]);
                if (exec(s, sql))
                        goto fail;
                snprintf(sql, sizeof(sql),
                         "INSERT INTO %s (k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET "
                         "v = excluded.v",
                         table_names[t]);
                if (prepare(s, sql, &s->put[t]))
                        goto fail;
                snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE k = ?1", table_names[t]);
                if (prepare(s, sql, &s->del[t]))
                        goto fail;
                snprintf(sql, sizeof(sql), "SELECT v FROM %s WHERE k = ?1", table_names[t]);
                if (prepare(s, sql, &s->get[t]))
                        goto fail;
        }
        if (exec(s, "CREATE TABLE IF NOT EXISTS fm_res (alloc INTEGER NOT NULL, kind TEXT, "
                    "object TEXT, what TEXT, first INTEGER, count INTEGER, addr INTEGER, size "
                    "INTEGER, dst_node TEXT, dst_addr INTEGER, programmer TEXT)") ||
            exec(s, "CREATE INDEX IF NOT EXISTS fm_res_alloc ON fm_res (alloc)") ||
            prepare(s, "INSERT INTO fm_res VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    &s->res_put) ||
            prepare(s, "DELETE FROM fm_res WHERE alloc = ?1", &s->res_del) ||
            prepare(s, "BEGIN IMMEDIATE", &s->begin) || prepare(s, "COMMIT", &s->commit))
                goto fail;
        char *v = NULL;
        if (ntbf__store_get(s, NTBF_T_META, "schema", &v) == 0) {
                if (strcmp(v, SCHEMA_VERSION)) {
                        snprintf(why, whylen,
                                 "%s was written by another version of ntbfabd (schema %.16s, "
                                 "this one writes %s); move it away to start afresh",
                                 path, v, SCHEMA_VERSION);
                        free(v);
                        r = NTBF_ECONFIG;
                        goto fail_quiet;
                }
                free(v);
        } else if (ntbf__store_put(s, NTBF_T_META, "schema", SCHEMA_VERSION)) {
                goto fail;
        }
        *out = s;
        return 0;
fail:
        snprintf(why, whylen, "cannot open the database %s: %s", path,
                 s->db ? sqlite3_errmsg(s->db) : "out of memory");
fail_quiet:
        ntbf__store_close(s);
        return r;
}

void ntbf__store_close(struct ntbf__store *s)
{
        if (!s)
                return;
        for (int t = 0; t < NTBF_T_COUNT; t++) {
                sqlite3_finalize(s->put[t]);
                sqlite3_finalize(s->del[t]);
                sqlite3_finalize(s->get[t]);
        }
        sqlite3_finalize(s->res_put);
        sqlite3_finalize(s->res_del);
        sqlite3_finalize(s->begin);
        sqlite3_finalize(s->commit);
        sqlite3_close(s->db);
        free(s);
}

void ntbf__store_remove(const char *path)
{
        char p[PATH_MAX + 8];
        unlink(path);
        snprintf(p, sizeof(p), "%s-wal", path);
        unlink(p);
        snprintf(p, sizeof(p), "%s-shm", path);
        unlink(p);
}

static int step_done(sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return rc == SQLITE_DONE ? 0 : -EIO;
}

/*
 * A transaction that cannot begin (the database is locked past the busy timeout, the disk
 * is full) or commit is undone whole: nothing of it is written, the next begin starts
 * afresh, and ntbf__store_error says why until then. Writes between a failed begin and its
 * commit fail too (nothing is written outside a transaction).
 */
int ntbf__store_begin(struct ntbf__store *s)
{
        if (s->depth++)
                return s->why[0] ? -EIO : 0;
        s->why[0] = 0;
        int r = step_done(s->begin);
        if (r)
                snprintf(s->why, sizeof(s->why), "%s", sqlite3_errmsg(s->db));
        return r;
}

int ntbf__store_commit(struct ntbf__store *s)
{
        if (!s->depth || --s->depth)
                return s->why[0] ? -EIO : 0;
        if (s->why[0])
                return -EIO; /* its begin failed: nothing to commit */
        int r = step_done(s->commit);
        if (r) {
                snprintf(s->why, sizeof(s->why), "%s", sqlite3_errmsg(s->db));
                if (!sqlite3_get_autocommit(s->db))
                        exec(s, "ROLLBACK");
        }
        return r;
}

void ntbf__store_rollback(struct ntbf__store *s)
{
        s->depth = 0;
        if (!sqlite3_get_autocommit(s->db))
                exec(s, "ROLLBACK");
}

/* A write inside a transaction whose begin failed is refused; one of its own (no
 * transaction) forgets the last failed transaction's reason: its error is sqlite's. */
static bool write_refused(struct ntbf__store *s)
{
        if (s->depth)
                return s->why[0] != 0;
        s->why[0] = 0;
        return false;
}

int ntbf__store_put(struct ntbf__store *s, enum ntbf__table t, const char *key, const char *json)
{
        if (write_refused(s))
                return -EIO;
        sqlite3_stmt *st = s->put[t];
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, json, -1, SQLITE_STATIC);
        return step_done(st);
}

int ntbf__store_del(struct ntbf__store *s, enum ntbf__table t, const char *key)
{
        if (write_refused(s))
                return -EIO;
        sqlite3_stmt *st = s->del[t];
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        return step_done(st);
}

int ntbf__store_clear(struct ntbf__store *s, enum ntbf__table t)
{
        char sql[128];
        snprintf(sql, sizeof(sql), "DELETE FROM %s", table_names[t]);
        return exec(s, sql);
}

int ntbf__store_get(struct ntbf__store *s, enum ntbf__table t, const char *key, char **json)
{
        sqlite3_stmt *st = s->get[t];
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st), r = 0;
        if (rc == SQLITE_ROW) {
                const char *v = (const char *)sqlite3_column_text(st, 0);
                *json = strdup(v ? v : "");
                r = *json ? 0 : -ENOMEM;
        } else {
                r = rc == SQLITE_DONE ? NTBF_ENOTFOUND : -EIO;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}

int ntbf__store_each(struct ntbf__store *s, enum ntbf__table t,
                     int (*fn)(void *arg, const char *key, const char *json), void *arg)
{
        char sql[128];
        snprintf(sql, sizeof(sql), "SELECT k, v FROM %s ORDER BY rowid", table_names[t]);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        int r = 0, rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = fn(arg, (const char *)sqlite3_column_text(st, 0),
                       (const char *)sqlite3_column_text(st, 1));
                if (r)
                        break;
        }
        if (!r && rc != SQLITE_DONE)
                r = -EIO;
        sqlite3_finalize(st);
        return r;
}

int ntbf__store_res_put(struct ntbf__store *s, uint64_t seq, const struct ntbf__res_row *rows,
                        size_t n)
{
        if (write_refused(s))
                return -EIO;
        int r = ntbf__store_res_del(s, seq);
        for (size_t i = 0; i < n && !r; i++) {
                sqlite3_stmt *st = s->res_put;
                const struct ntbf__res_row *x = &rows[i];
                sqlite3_bind_int64(st, 1, (int64_t)seq);
                sqlite3_bind_text(st, 2, x->kind, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 3, x->object, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 4, x->what, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 5, x->first);
                sqlite3_bind_int64(st, 6, x->count);
                sqlite3_bind_int64(st, 7, (int64_t)x->addr);
                sqlite3_bind_int64(st, 8, (int64_t)x->size);
                sqlite3_bind_text(st, 9, x->dst_node, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 10, (int64_t)x->dst_addr);
                sqlite3_bind_text(st, 11, x->programmer, -1, SQLITE_STATIC);
                r = step_done(st);
        }
        return r;
}

int ntbf__store_res_del(struct ntbf__store *s, uint64_t seq)
{
        if (write_refused(s))
                return -EIO;
        sqlite3_bind_int64(s->res_del, 1, (int64_t)seq);
        return step_done(s->res_del);
}
