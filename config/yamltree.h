/* config/yamltree.h: a YAML document as a compact tree of values with file positions (internal). */
#ifndef NTBF_CONFIG_YAMLTREE_H
#define NTBF_CONFIG_YAMLTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntbfab/diag.h"

#define NTBF__YT_NONE UINT32_MAX

/*
 * Limits that keep a hostile file from costing more than a few hundred MiB: the schema
 * nests 7 collections deep and a 1024-node cluster holds well under 100000 values.
 */
#define NTBF__YT_MAX_DEPTH  64
#define NTBF__YT_MAX_VALUES (UINT32_C(1) << 22)

enum ntbf__yt_kind {
        NTBF__YT_NULL, /* empty value, ~ or null (plain) */
        NTBF__YT_SCALAR,
        NTBF__YT_SEQ,
        NTBF__YT_MAP, /* children alternate key, value */
        NTBF__YT_BAD, /* stands for an alias: already reported, check nothing below it */
};

struct ntbf__yt_node {
        uint8_t kind;
        bool has_nul; /* scalar text holds a NUL (a "\0" escape) and is cut there */
        struct ntbf_loc loc;
        uint32_t text;  /* scalar: offset of its NUL-terminated text in doc->text */
        uint32_t len;   /* scalar: text bytes; seq: items; map: pairs */
        uint32_t first; /* seq/map: first child */
        uint32_t next;  /* next sibling in the parent */
};

struct ntbf__yt_doc {
        struct ntbf__yt_node *v;
        uint32_t n, cap;
        char *text;
        size_t tlen, tcap;
        uint32_t root; /* NTBF__YT_NONE: the file holds no document */
};

/*
 * Parse a YAML stream into doc. Syntax errors, anchors, aliases, tags, a second document
 * and the limits above are reported to diags as FILE:LINE:COL. Returns 0 when a tree was
 * built (reported mistakes may be inside it), NTBF_ECONFIG when the file could not be read
 * as YAML (no tree), or -ENOMEM. Free doc with ntbf__yt_free() in every case.
 */
int ntbf__yt_parse(struct ntbf__yt_doc *doc, const char *file, const char *buf, size_t len,
                   struct ntbf_diags *diags);
void ntbf__yt_free(struct ntbf__yt_doc *doc);

static inline const struct ntbf__yt_node *ntbf__yt_at(const struct ntbf__yt_doc *doc, uint32_t i)
{
        return &doc->v[i];
}

static inline const char *ntbf__yt_str(const struct ntbf__yt_doc *doc, uint32_t i)
{
        return doc->text + doc->v[i].text;
}

#endif
