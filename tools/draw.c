/* tools/draw.c: the fabric as a Graphviz graph (ntbfab topology --dot, --svg). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "draw.h"
#include "ntbfab/units.h"

/* Graphviz ids: n3 (node 3), a7 (adapter 7), s1 (switch 1), d4 (device 4). */

/* Text for a DOT string: quotes and backslashes escaped (names never hold either). */
static void esc(FILE *f, const char *s)
{
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        fputc('\\', f);
                fputc(*s, f);
        }
}

/* The budget rows of one object (adapter or switch), as label lines. */
static void budget_lines(FILE *f, const struct ntbf_budget_row *rows, size_t nrows, bool sw,
                         uint32_t obj)
{
        for (size_t i = 0; i < nrows; i++) {
                const struct ntbf_budget_row *r = &rows[i];
                bool is_sw = r->kind == NTBF_BUDGET_SWITCH_RID || r->kind == NTBF_BUDGET_MCAST;
                if (r->obj != obj || is_sw != sw || r->kind == NTBF_BUDGET_RANGE)
                        continue;
                if (r->kind == NTBF_BUDGET_WINDOW) {
                        char u[32], t[32];
                        fprintf(f, "\\nwindow %s of %s", ntbf_size_fmt(r->used, u, sizeof(u)),
                                ntbf_size_fmt(r->total, t, sizeof(t)));
                } else {
                        fprintf(f, "\\n%s %" PRIu64 "/%" PRIu64, ntbf_budget_kind_name(r->kind),
                                r->used, r->total);
                }
        }
}

/* Whether a path uses a link, an adapter or a switch: drawn bold. */
static bool on_path(const struct ntbf_path *p, size_t np, enum ntbf_hop_kind kind, uint32_t obj)
{
        for (size_t i = 0; i < np; i++)
                for (uint32_t h = 0; h < p[i].nhops; h++)
                        if (p[i].hops[h].kind == kind && p[i].hops[h].obj == obj)
                                return true;
        return false;
}

/* Past this many nodes a node is one box, adapters named on its cables (a radial layout). */
#define DRAW_COMPACT_NODES 16

static void port_id(FILE *f, const struct ntbf_topo *t, const struct ntbf_port_ref *r, bool compact)
{
        if (r->kind == NTBF_PORT_SWITCH)
                fprintf(f, "s%u", r->obj);
        else if (compact)
                fprintf(f, "n%u", t->adapters[r->obj].node);
        else
                fprintf(f, "a%u", r->obj);
}

/* A port's label: its number, with the adapter's name in compact pictures. */
static void port_label(FILE *f, const struct ntbf_topo *t, const struct ntbf_port_ref *r,
                       bool compact)
{
        if (compact && r->kind == NTBF_PORT_ADAPTER) {
                esc(f, t->adapters[r->obj].name);
                fprintf(f, ".");
        }
        fprintf(f, "%u", r->port);
}

/* A big cluster: one box per node (its id, adapters' budgets), switches, cables. */
static void draw_compact_nodes(FILE *f, const struct ntbf_topo *t,
                               const struct ntbf_budget_row *rows, size_t nrows,
                               const struct ntbf_path *paths, size_t npaths)
{
        for (uint32_t n = 0; n < t->nnodes; n++) {
                const struct ntbf_node *nd = &t->nodes[n];
                fprintf(f,
                        "  n%u [shape=box, style=\"rounded,filled\", fillcolor=\"#d6eaf8\", "
                        "label=\"",
                        n);
                esc(f, nd->name);
                fprintf(f, " (%u)", nd->id);
                for (uint32_t i = 0; i < nd->nadapters && nrows; i++) {
                        fprintf(f, "\\n");
                        esc(f, t->adapters[nd->adapters[i]].name);
                        budget_lines(f, rows, nrows, false, nd->adapters[i]);
                }
                uint32_t lent = 0;
                for (uint32_t i = 0; i < nd->ndevices; i++)
                        lent += t->devices[nd->devices[i]].lend;
                if (nd->ndevices)
                        fprintf(f, "\\n%u device%s, %u lent", nd->ndevices,
                                nd->ndevices == 1 ? "" : "s", lent);
                fprintf(f, "\"%s];\n",
                        on_path(paths, npaths, NTBF_HOP_ROOT, n) ? ", penwidth=3" : "");
        }
}

void draw_dot(FILE *f, const struct ntbf_topo *t, const struct ntbf_state *s,
              const struct ntbf_path *paths, size_t npaths)
{
        static const char *const hl = "color=\"#c0392b\", penwidth=3";
        struct ntbf_budget_row *rows = NULL;
        size_t nrows = 0;
        if (s) {
                nrows = ntbf_budget_rows(s, NULL, 0);
                rows = calloc(nrows ? nrows : 1, sizeof(*rows));
                if (rows)
                        ntbf_budget_rows(s, rows, nrows);
                else
                        nrows = 0;
        }
        fprintf(f, "graph \"");
        esc(f, t->name);
        fprintf(f, "\" {\n  graph [fontname=\"Helvetica\", fontsize=11, rankdir=LR, "
                   "nodesep=0.25, ranksep=0.6, label=\"cluster ");
        esc(f, t->name);
        fprintf(f,
                " (%u node%s, %u switch%s, %u link%s)\", labelloc=t];\n"
                "  node [fontname=\"Helvetica\", fontsize=10];\n"
                "  edge [fontname=\"Helvetica\", fontsize=9];\n",
                t->nnodes, t->nnodes == 1 ? "" : "s", t->nswitches, t->nswitches == 1 ? "" : "es",
                t->nlinks, t->nlinks == 1 ? "" : "s");
        bool compact = t->nnodes > DRAW_COMPACT_NODES;
        if (compact) {
                fprintf(f, "  graph [layout=twopi, overlap=false, ranksep=2.2%s];\n",
                        t->nswitches ? ", root=s0" : "");
                draw_compact_nodes(f, t, rows, nrows, paths, npaths);
        }
        for (uint32_t n = 0; n < t->nnodes && !compact; n++) {
                const struct ntbf_node *nd = &t->nodes[n];
                fprintf(f, "  subgraph \"cluster_n%u\" {\n    label=\"", n);
                esc(f, nd->name);
                fprintf(f, " (id %u)\\n", nd->id);
                esc(f, nd->address);
                fprintf(f, "\"; style=rounded; color=\"#2c3e50\";\n");
                /* The host itself: its CPU and memory. */
                fprintf(f,
                        "    n%u [shape=box, style=filled, fillcolor=\"#ecf0f1\", label=\"CPU, "
                        "RAM\"%s];\n",
                        n, on_path(paths, npaths, NTBF_HOP_ROOT, n) ? ", penwidth=3" : "");
                for (uint32_t i = 0; i < nd->nadapters; i++) {
                        uint32_t a = nd->adapters[i];
                        const struct ntbf_adapter *ad = &t->adapters[a];
                        char w[32];
                        fprintf(f,
                                "    a%u [shape=box, style=\"rounded,filled\", "
                                "fillcolor=\"#d6eaf8\", label=\"",
                                a);
                        esc(f, ad->name);
                        /* Several windows (windows:): their count and total. */
                        uint64_t bytes = ad->p.window;
                        if (ad->p.nwindows) {
                                bytes = 0;
                                for (uint32_t k = 0; k < ad->p.nwindows; k++)
                                        bytes += ad->p.windows[k].size;
                        }
                        fprintf(f, "\\n%s, %s", ad->p.model, ntbf_size_fmt(bytes, w, 32));
                        if (ad->p.nwindows > 1)
                                fprintf(f, " in %u windows", ad->p.nwindows);
                        budget_lines(f, rows, nrows, false, a);
                        fprintf(f, "\"%s];\n    n%u -- a%u [color=\"#7f8c8d\"%s];\n",
                                on_path(paths, npaths, NTBF_HOP_ADAPTER, a) ? ", penwidth=3" : "",
                                n, a,
                                on_path(paths, npaths, NTBF_HOP_ADAPTER, a) ? ", penwidth=3" : "");
                }
                for (uint32_t i = 0; i < nd->ndevices; i++) {
                        uint32_t d = nd->devices[i];
                        const struct ntbf_device *dv = &t->devices[d];
                        fprintf(f, "    d%u [shape=note, style=filled, fillcolor=\"%s\", label=\"",
                                d, dv->lend ? "#d5f5e3" : "#fdfefe");
                        esc(f, dv->name);
                        fprintf(f,
                                "\\n%02x:%02x.%x class %06x%s\"];\n    n%u -- d%u "
                                "[color=\"#7f8c8d\"%s];\n",
                                dv->bus, dv->dev, dv->fn, dv->class_code, dv->lend ? ", lent" : "",
                                n, d,
                                on_path(paths, npaths, NTBF_HOP_DEVICE, d) ? ", penwidth=3" : "");
                }
                fprintf(f, "  }\n");
        }
        for (uint32_t i = 0; i < t->nswitches; i++) {
                const struct ntbf_switch *sw = &t->switches[i];
                fprintf(f, "  s%u [shape=hexagon, style=filled, fillcolor=\"#fdebd0\", label=\"",
                        i);
                esc(f, sw->name);
                fprintf(f, "\\n%s, %u ports", sw->p.model, sw->p.ports);
                budget_lines(f, rows, nrows, true, i);
                fprintf(f, "\"%s];\n",
                        on_path(paths, npaths, NTBF_HOP_SWITCH, i) ? ", penwidth=3" : "");
        }
        for (uint32_t l = 0; l < t->nlinks; l++) {
                const struct ntbf_link *k = &t->links[l];
                fprintf(f, "  ");
                port_id(f, t, &k->end[0], compact);
                fprintf(f, " -- ");
                port_id(f, t, &k->end[1], compact);
                fprintf(f, " [taillabel=\"");
                port_label(f, t, &k->end[0], compact);
                fprintf(f, "\", headlabel=\"");
                port_label(f, t, &k->end[1], compact);
                fprintf(f, "\"");
                if (k->latency_ns)
                        fprintf(f, ", label=\"%u ns\"", k->latency_ns);
                if (on_path(paths, npaths, NTBF_HOP_LINK, l))
                        fprintf(f, ", %s", hl);
                fprintf(f, "];\n");
        }
        /* Each path, named on its first hop's side. */
        for (size_t i = 0; i < npaths; i++)
                fprintf(f, "  // path %zu: %" PRIu32 " hops, %" PRIu32 " ns one way\n", i + 1,
                        paths[i].nhops, paths[i].latency_ns);
        fprintf(f, "}\n");
        free(rows);
}

int draw_svg(const char *dot_text, size_t len, const char *file, char *why, size_t whylen)
{
        int in[2];
        if (pipe(in)) {
                snprintf(why, whylen, "pipe: %s", strerror(errno));
                return -errno;
        }
        pid_t pid = fork();
        if (pid < 0) {
                snprintf(why, whylen, "fork: %s", strerror(errno));
                close(in[0]);
                close(in[1]);
                return -errno;
        }
        if (pid == 0) {
                dup2(in[0], 0);
                close(in[0]);
                close(in[1]);
                execlp("dot", "dot", "-Tsvg", "-o", file, (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        size_t off = 0;
        while (off < len) {
                ssize_t n = write(in[1], dot_text + off, len - off);
                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        close(in[1]);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
                snprintf(why, whylen,
                         "Graphviz's dot is not installed; install it (apt-get install graphviz) "
                         "or write the graph with --dot and draw it elsewhere");
                return -ENOENT;
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
                snprintf(why, whylen, "dot could not write %s (exit status %d)", file,
                         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
                return -EIO;
        }
        return 0;
}
