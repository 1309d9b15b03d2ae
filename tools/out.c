/* tools/out.c: tables, JSON and messages for the ntbfab tool. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ntbfab/units.h"

void cli_error(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("ntbfab: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

int cli_usage(const struct verb *v, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("ntbfab: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\nusage: ntbfab %s %s (see 'ntbfab %s --help')\n", v->name, v->args,
                v->name);
        va_end(ap);
        return EXIT_USAGE;
}

int cli_help(const struct verb *v)
{
        printf("usage: ntbfab %s %s\n\n%s\n%s", v->name, v->args, v->summary, v->help);
        return EXIT_OK;
}

bool cli_wants_help(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--"))
                        break;
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
                        return true;
        }
        return false;
}

void table_init(struct table *t, const char *const *headers, unsigned ncols)
{
        memset(t, 0, sizeof(*t));
        t->ncols = ncols;
        for (unsigned i = 0; i < ncols && i < 16; i++)
                t->hdr[i] = headers[i];
}

void table_right(struct table *t, unsigned col)
{
        t->right[col] = true;
}

void table_cell(struct table *t, const char *fmt, ...)
{
        unsigned n = t->nrows * t->ncols + t->cur;
        if (n >= t->cap) {
                unsigned cap = t->cap ? t->cap * 2 : 64;
                char **c = realloc(t->cells, cap * sizeof(*c));
                if (!c) {
                        cli_error("out of memory");
                        exit(EXIT_FAIL);
                }
                t->cells = c;
                t->cap = cap;
        }
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&t->cells[n], fmt, ap) < 0) {
                cli_error("out of memory");
                exit(EXIT_FAIL);
        }
        va_end(ap);
        if (++t->cur == t->ncols) {
                t->cur = 0;
                t->nrows++;
        }
}

void table_print(struct table *t, FILE *f, unsigned indent)
{
        size_t w[16] = {0};
        for (unsigned c = 0; c < t->ncols; c++)
                w[c] = strlen(t->hdr[c]);
        for (unsigned r = 0; r < t->nrows; r++)
                for (unsigned c = 0; c < t->ncols; c++) {
                        size_t l = strlen(t->cells[r * t->ncols + c]);
                        if (l > w[c])
                                w[c] = l;
                }
        for (int row = -1; row < (int)t->nrows; row++) {
                fprintf(f, "%*s", (int)indent, "");
                for (unsigned c = 0; c < t->ncols; c++) {
                        const char *s = row < 0 ? t->hdr[c] : t->cells[row * t->ncols + c];
                        bool last = c + 1 == t->ncols;
                        if (t->right[c])
                                fprintf(f, "%*s%s", (int)w[c], s, last ? "" : "  ");
                        else if (last)
                                fprintf(f, "%s", s);
                        else
                                fprintf(f, "%-*s  ", (int)w[c], s);
                }
                fputc('\n', f);
        }
}

void table_free(struct table *t)
{
        unsigned n = t->nrows * t->ncols + t->cur;
        for (unsigned i = 0; i < n; i++)
                free(t->cells[i]);
        free(t->cells);
        memset(t, 0, sizeof(*t));
}

void progress_start(struct progress *p, bool wanted)
{
        p->on = wanted && isatty(STDOUT_FILENO);
        p->shown = false;
}

void progress_show(struct progress *p, const char *fmt, ...)
{
        if (!p->on)
                return;
        va_list ap;
        va_start(ap, fmt);
        fputs("\r\033[K", stdout);
        vprintf(fmt, ap);
        va_end(ap);
        fflush(stdout);
        p->shown = true;
}

void progress_end(struct progress *p)
{
        if (p->on && p->shown) {
                fputs("\r\033[K", stdout);
                fflush(stdout);
        }
        p->shown = false;
}

void json_print(struct json_object *o)
{
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
}

struct json_object *json_u64(uint64_t v)
{
        return json_object_new_uint64(v);
}

struct json_object *json_str(const char *s)
{
        return s ? json_object_new_string(s) : NULL;
}

struct json_object *json_diag(const struct ntbf_diag *d)
{
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "file", json_str(d->file));
        json_object_object_add(o, "line", d->loc.line ? json_u64(d->loc.line) : NULL);
        json_object_object_add(o, "column", d->loc.col ? json_u64(d->loc.col) : NULL);
        json_object_object_add(o, "severity", json_str(ntbf_severity_name(d->severity)));
        json_object_object_add(o, "message", json_str(d->msg));
        return o;
}

struct json_object *json_path(const struct ntbf_topo *t, const struct ntbf_path *p)
{
        char buf[160];
        struct json_object *o = json_object_new_object(), *hops = json_object_new_array();
        json_object_object_add(o, "from",
                               json_str(ntbf_endpoint_name(t, p->from, buf, sizeof(buf))));
        json_object_object_add(o, "to", json_str(ntbf_endpoint_name(t, p->to, buf, sizeof(buf))));
        json_object_object_add(o, "latency_ns", json_u64(p->latency_ns));
        json_object_object_add(o, "read_round_trip_ns", json_u64(2ull * p->latency_ns));
        for (uint32_t i = 0; i < p->nhops; i++) {
                const struct ntbf_hop *h = &p->hops[i];
                struct json_object *j = json_object_new_object();
                json_object_object_add(j, "kind", json_str(ntbf_hop_kind_name(h->kind)));
                json_object_object_add(j, "name", json_str(ntbf_hop_name(t, h, buf, sizeof(buf))));
                json_object_object_add(j, "in_port",
                                       h->in_port == NTBF_NONE ? NULL : json_u64(h->in_port));
                json_object_object_add(j, "out_port",
                                       h->out_port == NTBF_NONE ? NULL : json_u64(h->out_port));
                json_object_object_add(j, "latency_ns", json_u64(h->latency_ns));
                json_object_array_add(hops, j);
        }
        json_object_object_add(o, "hops", hops);
        return o;
}

const char *fmt_size(uint64_t v, char *buf, size_t len)
{
        return ntbf_size_fmt(v, buf, len);
}

const char *fmt_size_approx(uint64_t v, char *buf, size_t len)
{
        static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double x = (double)v;
        unsigned u = 0;
        while (u < 5 && x >= 1024) {
                x /= 1024;
                u++;
        }
        if (u == 0 || x == (double)(uint64_t)x)
                snprintf(buf, len, "%.0f %s", x, unit[u]);
        else
                snprintf(buf, len, "%.1f %s", x, unit[u]);
        return buf;
}

void print_path(const struct ntbf_topo *t, const struct ntbf_path *p, unsigned indent)
{
        static const char *const hdr[] = {"#", "hop", "kind", "latency"};
        struct table tb;
        table_init(&tb, hdr, 4);
        table_right(&tb, 0);
        table_right(&tb, 3);
        for (uint32_t i = 0; i < p->nhops; i++) {
                char name[160];
                const struct ntbf_hop *h = &p->hops[i];
                table_cell(&tb, "%u", i + 1);
                table_cell(&tb, "%s", ntbf_hop_name(t, h, name, sizeof(name)));
                table_cell(&tb, "%s", ntbf_hop_kind_name(h->kind));
                table_cell(&tb, "%u ns", h->latency_ns);
        }
        table_print(&tb, stdout, indent);
        table_free(&tb);
        printf("%*smodeled latency: %u ns one way (a posted write), %u ns read round trip\n",
               (int)indent, "", p->latency_ns, 2 * p->latency_ns);
}
