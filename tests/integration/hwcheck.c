/* tests/integration/hwcheck.c: the fabric's tables read back, against the daemons' records. */
#include <inttypes.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "hwcheck.h"
#include "ntbfab/sim.h"

struct vec {
        char **v;
        size_t n, cap;
};

static void push(struct vec *x, char *s)
{
        if (x->n == x->cap) {
                x->cap = x->cap ? 2 * x->cap : 256;
                x->v = realloc(x->v, x->cap * sizeof(*x->v));
        }
        x->v[x->n++] = s;
}

static void pushf(struct vec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pushf(struct vec *x, const char *fmt, ...)
{
        char *s;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) >= 0)
                push(x, s);
        va_end(ap);
}

static int cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort and drop duplicates. */
static void uniq(struct vec *x)
{
        qsort(x->v, x->n, sizeof(*x->v), cmp);
        size_t o = 0;
        for (size_t i = 0; i < x->n; i++) {
                if (o && !strcmp(x->v[o - 1], x->v[i])) {
                        free(x->v[i]);
                        continue;
                }
                x->v[o++] = x->v[i];
        }
        x->n = o;
}

void hwc_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

char **hwc_records(struct dfx *f, size_t *n)
{
        struct vec x = {0};
        for (uint32_t nd = 0; nd < f->t->nnodes; nd++) {
                char path[600];
                snprintf(path, sizeof(path), "%s/state/%s.db", f->dir, f->t->nodes[nd].name);
                sqlite3 *db;
                if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
                        sqlite3_close(db);
                        continue;
                }
                sqlite3_busy_timeout(db, 5000);
                sqlite3_stmt *st;
                if (sqlite3_prepare_v2(db, "SELECT k FROM programmed", -1, &st, NULL) ==
                    SQLITE_OK) {
                        while (sqlite3_step(st) == SQLITE_ROW)
                                push(&x, strdup((const char *)sqlite3_column_text(st, 0)));
                        sqlite3_finalize(st);
                }
                sqlite3_close(db);
        }
        uniq(&x);
        *n = x.n;
        return x.v;
}

static const char *ad_name(const struct ntbf_topo *t, uint32_t a, char *buf, size_t len)
{
        snprintf(buf, len, "%s.%s", t->nodes[t->adapters[a].node].name, t->adapters[a].name);
        return buf;
}

/* The lines of ntbf_sim_hw_state one recorded entry implies. */
static void expect(const struct ntbf_topo *t, const struct ntbf__ent *e, struct vec *x)
{
        char a[160], b[160];
        switch (e->kind) {
        case NTBF_ENT_SLOT:
                if (e->group != NTBF_NONE)
                        pushf(x, "slot %s %u group %u 0x%" PRIx64, ad_name(t, e->obj, a, sizeof(a)),
                              e->slot, e->group, e->addr);
                else
                        pushf(x, "slot %s %u to %s 0x%" PRIx64, ad_name(t, e->obj, a, sizeof(a)),
                              e->slot, ad_name(t, e->dst_adapter, b, sizeof(b)), e->addr);
                break;
        case NTBF_ENT_RID:
                pushf(x, "rid %s %s %04x/%04x", ad_name(t, e->obj, a, sizeof(a)),
                      t->nodes[e->rid.node].name, (unsigned)(e->rid.rid & e->rid.mask),
                      (unsigned)e->rid.mask);
                break;
        case NTBF_ENT_SWRID:
                pushf(x, "swrid %s %s %04x/%04x", t->switches[e->obj].name,
                      t->nodes[e->rid.node].name, (unsigned)(e->rid.rid & e->rid.mask),
                      (unsigned)e->rid.mask);
                break;
        case NTBF_ENT_MCAST:
                pushf(x, "mcast %s %u 0x%" PRIx64 " 0x%" PRIx64, ad_name(t, e->obj, a, sizeof(a)),
                      e->group, e->addr, e->len);
                break;
        case NTBF_ENT_IOMMU:
                for (uint64_t o = 0; o < e->len; o += 4096)
                        pushf(x, "iommu %s 0x%" PRIx64 " 0x%" PRIx64, t->nodes[e->obj].name,
                              e->addr + o, e->phys + o);
                break;
        case NTBF_ENT_DEVISO:
        case NTBF_ENT_DEVMAP: {
                const struct ntbf_device *d = &t->devices[e->obj];
                for (uint32_t fn = 0; fn < ntbf_device_nfuncs(d); fn++) {
                        snprintf(a, sizeof(a), "%s.%s.%u", t->nodes[d->node].name, d->name, fn);
                        if (e->kind == NTBF_ENT_DEVISO)
                                pushf(x, "deviso %s", a);
                        else
                                for (uint64_t o = 0; o < e->len; o += 4096)
                                        pushf(x, "devmap %s 0x%" PRIx64 " 0x%" PRIx64, a,
                                              e->addr + o, e->addr + o);
                }
                break;
        }
        default:
                break;
        }
}

bool hwc_matches(struct dfx *f, bool iommu_pages_of_clients, char *why, size_t len)
{
        size_t nr;
        char **recs = hwc_records(f, &nr);
        struct vec want = {0};
        for (size_t i = 0; i < nr; i++) {
                struct ntbf__ent e;
                if (ntbf__ent_parse(f->t, recs[i], &e)) {
                        snprintf(why, len, "a record is not an entry: %s", recs[i]);
                        hwc_free(recs, nr);
                        return false;
                }
                expect(f->t, &e, &want);
        }
        hwc_free(recs, nr);
        uniq(&want);
        char **have;
        size_t nh;
        if (ntbf_sim_hw_state(f->b, &have, &nh)) {
                snprintf(why, len, "cannot read the fabric's state");
                hwc_free(want.v, want.n);
                return false;
        }
        size_t o = 0, i = 0, k = 0, diffs = 0;
        o += (size_t)snprintf(why, len, "hardware differs from the records:");
        while (i < want.n || k < nh) {
                int c = i == want.n ? 1 : k == nh ? -1 : strcmp(want.v[i], have[k]);
                if (!c) {
                        i++, k++;
                        continue;
                }
                if (c > 0 && iommu_pages_of_clients && !strncmp(have[k], "iommu ", 6)) {
                        k++;
                        continue;
                }
                diffs++;
                if (o < len)
                        o += (size_t)snprintf(why + o, len - o, "\n  %s %s",
                                              c < 0 ? "recorded, not in hardware:"
                                                    : "in hardware, recorded nowhere:",
                                              c < 0 ? want.v[i] : have[k]);
                if (c < 0)
                        i++;
                else
                        k++;
        }
        hwc_free(want.v, want.n);
        ntbf_sim_hw_state_free(have, nh);
        if (!diffs)
                snprintf(why, len, "hardware equals the records");
        return diffs == 0;
}
