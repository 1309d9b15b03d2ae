/* tools/draw.h: the fabric as a picture: Graphviz DOT, and SVG through Graphviz's dot. */
#ifndef NTBF_TOOLS_DRAW_H
#define NTBF_TOOLS_DRAW_H

#include <stdio.h>

#include "ntbfab/budget.h"
#include "ntbfab/path.h"

/*
 * t as an undirected Graphviz graph: each node a box of its CPU and memory, adapters and
 * devices; switches; every cable with its two ports. With s, each adapter and switch shows
 * its budgets (used/total); the hops of paths are drawn bold (red for cables).
 */
void draw_dot(FILE *f, const struct ntbf_topo *t, const struct ntbf_state *s,
              const struct ntbf_path *paths, size_t npaths);
/* Run Graphviz's dot on the DOT text to write file as SVG; 0, or -errno with why. */
int draw_svg(const char *dot_text, size_t len, const char *file, char *why, size_t whylen);

#endif
