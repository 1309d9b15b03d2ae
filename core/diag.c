/* core/diag.c: collecting, ordering and printing diagnostics. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ntbfab/diag.h"

#define DIAG_DEFAULT_LIMIT 1000

void ntbf_diags_init(struct ntbf_diags *d)
{
        memset(d, 0, sizeof(*d));
}

void ntbf_diags_free(struct ntbf_diags *d)
{
        for (size_t i = 0; i < d->n; i++) {
                free(d->v[i].file);
                free(d->v[i].msg);
        }
        free(d->v);
        memset(d, 0, sizeof(*d));
}

const char *ntbf_severity_name(enum ntbf_severity sev)
{
        switch (sev) {
        case NTBF_SEV_ERROR:
                return "error";
        case NTBF_SEV_WARNING:
                return "warning";
        default:
                return "note";
        }
}

int ntbf_diag_vadd(struct ntbf_diags *d, enum ntbf_severity sev, const char *file,
                   struct ntbf_loc loc, const char *fmt, va_list ap)
{
        size_t limit = d->limit ? d->limit : DIAG_DEFAULT_LIMIT;
        if (sev == NTBF_SEV_ERROR)
                d->errors++;
        if (d->n >= limit) {
                d->dropped++;
                return 0;
        }
        if (d->n == d->cap) {
                size_t cap = d->cap ? d->cap * 2 : 16;
                struct ntbf_diag *v = realloc(d->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                d->v = v;
                d->cap = cap;
        }
        char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0)
                return -ENOMEM;
        char *f = file ? strdup(file) : NULL;
        if (file && !f) {
                free(msg);
                return -ENOMEM;
        }
        d->v[d->n++] = (struct ntbf_diag){.severity = sev, .loc = loc, .file = f, .msg = msg};
        return 0;
}

int ntbf_diag_add(struct ntbf_diags *d, enum ntbf_severity sev, const char *file,
                  struct ntbf_loc loc, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = ntbf_diag_vadd(d, sev, file, loc, fmt, ap);
        va_end(ap);
        return r;
}

static int diag_cmp(const struct ntbf_diag *a, const struct ntbf_diag *b)
{
        int c = strcmp(a->file ? a->file : "", b->file ? b->file : "");
        if (c)
                return c;
        if (a->loc.line != b->loc.line)
                return a->loc.line < b->loc.line ? -1 : 1;
        if (a->loc.col != b->loc.col)
                return a->loc.col < b->loc.col ? -1 : 1;
        return 0;
}

void ntbf_diags_sort(struct ntbf_diags *d)
{
        /* Insertion sort: stable, and diagnostic lists are short and mostly ordered already. */
        for (size_t i = 1; i < d->n; i++) {
                struct ntbf_diag x = d->v[i];
                size_t j = i;
                while (j > 0 && diag_cmp(&d->v[j - 1], &x) > 0) {
                        d->v[j] = d->v[j - 1];
                        j--;
                }
                d->v[j] = x;
        }
}

void ntbf_diags_print(const struct ntbf_diags *d, FILE *out)
{
        for (size_t i = 0; i < d->n; i++) {
                const struct ntbf_diag *g = &d->v[i];
                if (g->file && g->loc.line)
                        fprintf(out, "%s:%u:%u: ", g->file, g->loc.line, g->loc.col);
                else if (g->file)
                        fprintf(out, "%s: ", g->file);
                fprintf(out, "%s: %s\n", ntbf_severity_name(g->severity), g->msg);
        }
        if (d->dropped)
                fprintf(out, "note: %zu more diagnostics not shown\n", d->dropped);
}
