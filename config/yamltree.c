/* config/yamltree.c: libyaml events into a compact tree, refusing what clusters never need. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "ntbfab/error.h"
#include "yamltree.h"

struct open {
        uint32_t node, last;
};

struct builder {
        struct ntbf__yt_doc *doc;
        const char *file;
        struct ntbf_diags *diags;
        struct open stack[NTBF__YT_MAX_DEPTH];
        unsigned depth;
        unsigned docs;
        int err;
};

static struct ntbf_loc mark_loc(yaml_mark_t m)
{
        struct ntbf_loc l;
        l.line = m.line >= UINT32_MAX ? UINT32_MAX : (uint32_t)m.line + 1;
        l.col = m.column >= UINT32_MAX ? UINT32_MAX : (uint32_t)m.column + 1;
        return l;
}

static void report(struct builder *b, struct ntbf_loc loc, const char *fmt, ...) NTBF_PRINTF(3, 4);

static void report(struct builder *b, struct ntbf_loc loc, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        if (ntbf_diag_vadd(b->diags, NTBF_SEV_ERROR, b->file, loc, fmt, ap))
                b->err = -ENOMEM;
        va_end(ap);
}

static uint32_t add_node(struct builder *b, uint8_t kind, yaml_mark_t mark)
{
        struct ntbf__yt_doc *d = b->doc;
        if (d->n == d->cap) {
                uint32_t cap = d->cap ? d->cap * 2 : 256;
                struct ntbf__yt_node *v = realloc(d->v, (size_t)cap * sizeof(*v));
                if (!v) {
                        b->err = -ENOMEM;
                        return NTBF__YT_NONE;
                }
                d->v = v;
                d->cap = cap;
        }
        struct ntbf__yt_node *n = &d->v[d->n];
        memset(n, 0, sizeof(*n));
        n->kind = kind;
        n->loc = mark_loc(mark);
        n->first = n->next = NTBF__YT_NONE;
        return d->n++;
}

static int add_text(struct builder *b, uint32_t node, const unsigned char *s, size_t len)
{
        struct ntbf__yt_doc *d = b->doc;
        /* Offsets are 32-bit; inputs are capped at 64 MiB long before this could overflow. */
        if (len >= UINT32_MAX - d->tlen - 1)
                return -ERANGE;
        if (d->tlen + len + 1 > d->tcap) {
                size_t cap = d->tcap ? d->tcap : 4096;
                while (cap < d->tlen + len + 1)
                        cap *= 2;
                char *t = realloc(d->text, cap);
                if (!t) {
                        b->err = -ENOMEM;
                        return -ENOMEM;
                }
                d->text = t;
                d->tcap = cap;
        }
        memcpy(d->text + d->tlen, s, len);
        d->text[d->tlen + len] = 0;
        d->v[node].text = (uint32_t)d->tlen;
        d->v[node].len = (uint32_t)len;
        d->v[node].has_nul = memchr(s, 0, len) != NULL;
        d->tlen += len + 1;
        return 0;
}

/* Link a finished-or-opened value into its parent (or make it the root). */
static void attach(struct builder *b, uint32_t node)
{
        struct ntbf__yt_doc *d = b->doc;
        if (b->depth == 0) {
                d->root = node;
                return;
        }
        struct open *o = &b->stack[b->depth - 1];
        if (o->last == NTBF__YT_NONE)
                d->v[o->node].first = node;
        else
                d->v[o->last].next = node;
        o->last = node;
        d->v[o->node].len++;
}

static bool is_null(const yaml_event_t *ev)
{
        if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        const char *s = (const char *)ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        return n == 0 || (n == 1 && s[0] == '~') ||
               (n == 4 &&
                (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

/* Anchors and tags change what a value means in ways a cluster file never needs. */
static void refuse_decorations(struct builder *b, yaml_mark_t mark, const yaml_char_t *anchor,
                               const yaml_char_t *tag)
{
        if (anchor)
                report(b, mark_loc(mark),
                       "anchors and aliases (&name, *name) are not supported; write the value out "
                       "in full");
        if (tag)
                report(b, mark_loc(mark),
                       "YAML tags (!!str, !name) are not supported; remove the tag, every value "
                       "is read as plain text");
}

/* Line and column of a byte offset, for reader errors that libyaml reports by offset only. */
static struct ntbf_loc offset_loc(const char *buf, size_t len, size_t off)
{
        struct ntbf_loc l = {1, 1};
        if (off > len)
                off = len;
        for (size_t i = 0; i < off; i++) {
                unsigned char c = (unsigned char)buf[i];
                if (c == '\n') {
                        l.line++;
                        l.col = 1;
                } else if ((c & 0xc0) != 0x80) {
                        l.col++; /* columns count characters, as libyaml's marks do */
                }
        }
        return l;
}

/* The byte at a 0-based line and character column, or 0. */
static char char_at(const char *buf, size_t len, size_t line, size_t col)
{
        size_t i = 0;
        for (; i < len && line; i++)
                if (buf[i] == '\n')
                        line--;
        for (; i < len; i++) {
                if (((unsigned char)buf[i] & 0xc0) == 0x80)
                        continue;
                if (!col--)
                        return buf[i];
        }
        return 0;
}

static void report_syntax(struct builder *b, const yaml_parser_t *p, const char *buf, size_t len)
{
        const char *problem = p->problem ? p->problem : "unknown error";
        if (p->error == YAML_READER_ERROR) {
                struct ntbf_loc l = offset_loc(buf, len, p->problem_offset);
                if (p->problem_value >= 0)
                        report(b, l,
                               "the file is not YAML text: %s (0x%02x); a cluster file is UTF-8 "
                               "text, check that this is the right file",
                               problem, (unsigned)p->problem_value);
                else
                        report(b, l,
                               "the file is not YAML text: %s; a cluster file is UTF-8 text, "
                               "check that this is the right file",
                               problem);
                return;
        }
        struct ntbf_loc l = mark_loc(p->problem_mark);
        const char *fix = "check the indentation, quotes and brackets here";
        if (char_at(buf, len, p->problem_mark.line, p->problem_mark.column) == '\t')
                fix = "YAML indents with spaces, not tabs: replace the tab";
        if (p->context) {
                struct ntbf_loc c = mark_loc(p->context_mark);
                report(b, l, "YAML syntax error: %s (%s that starts at line %u, column %u); %s",
                       problem, p->context, c.line, c.col, fix);
        } else {
                report(b, l, "YAML syntax error: %s; %s", problem, fix);
        }
}

/* Handle one event. Returns 1 to go on, 0 at the end, NTBF_ECONFIG to stop with no tree. */
static int on_event(struct builder *b, const yaml_event_t *ev)
{
        struct ntbf__yt_doc *d = b->doc;
        uint32_t node;
        switch (ev->type) {
        case YAML_DOCUMENT_START_EVENT:
                if (++b->docs > 1) {
                        report(b, mark_loc(ev->start_mark),
                               "the file holds a second YAML document; a cluster file is one "
                               "document, remove this '---' and what follows or merge it");
                        return 0;
                }
                return 1;
        case YAML_SCALAR_EVENT:
                refuse_decorations(b, ev->start_mark, ev->data.scalar.anchor, ev->data.scalar.tag);
                break;
        case YAML_ALIAS_EVENT:
                report(b, mark_loc(ev->start_mark),
                       "anchors and aliases (&name, *name) are not supported; write the value out "
                       "in full");
                break;
        case YAML_SEQUENCE_START_EVENT:
                refuse_decorations(b, ev->start_mark, ev->data.sequence_start.anchor,
                                   ev->data.sequence_start.tag);
                break;
        case YAML_MAPPING_START_EVENT:
                refuse_decorations(b, ev->start_mark, ev->data.mapping_start.anchor,
                                   ev->data.mapping_start.tag);
                break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
                if (b->depth)
                        b->depth--;
                return 1;
        case YAML_STREAM_END_EVENT:
                return 0;
        default:
                return 1;
        }
        if (d->n >= NTBF__YT_MAX_VALUES) {
                report(b, mark_loc(ev->start_mark),
                       "the file holds more than %u values; a cluster file is far smaller, check "
                       "that this is the right file",
                       (unsigned)NTBF__YT_MAX_VALUES);
                return NTBF_ECONFIG;
        }
        if (ev->type == YAML_SCALAR_EVENT) {
                node = add_node(b, is_null(ev) ? NTBF__YT_NULL : NTBF__YT_SCALAR, ev->start_mark);
                if (node == NTBF__YT_NONE)
                        return -ENOMEM;
                int r = add_text(b, node, ev->data.scalar.value, ev->data.scalar.length);
                if (r == -ERANGE) {
                        report(b, mark_loc(ev->start_mark),
                               "the file holds more text than a cluster file can; check that "
                               "this is the right file");
                        return NTBF_ECONFIG;
                }
                if (r)
                        return r;
                attach(b, node);
                return 1;
        }
        if (ev->type == YAML_ALIAS_EVENT) {
                node = add_node(b, NTBF__YT_BAD, ev->start_mark);
                if (node == NTBF__YT_NONE)
                        return -ENOMEM;
                attach(b, node);
                return 1;
        }
        if (b->depth == NTBF__YT_MAX_DEPTH) {
                /* Stop here: libyaml's own stacks grow with depth, so skipping is no cheaper. */
                report(b, mark_loc(ev->start_mark),
                       "the file nests lists and mappings more than %d levels deep; a cluster "
                       "file needs at most 7, check that this is the right file",
                       NTBF__YT_MAX_DEPTH);
                return NTBF_ECONFIG;
        }
        node = add_node(b, ev->type == YAML_SEQUENCE_START_EVENT ? NTBF__YT_SEQ : NTBF__YT_MAP,
                        ev->start_mark);
        if (node == NTBF__YT_NONE)
                return -ENOMEM;
        attach(b, node);
        b->stack[b->depth++] = (struct open){node, NTBF__YT_NONE};
        return 1;
}

int ntbf__yt_parse(struct ntbf__yt_doc *doc, const char *file, const char *buf, size_t len,
                   struct ntbf_diags *diags)
{
        struct builder b = {.doc = doc, .file = file, .diags = diags};
        memset(doc, 0, sizeof(*doc));
        doc->root = NTBF__YT_NONE;
        yaml_parser_t p;
        if (!yaml_parser_initialize(&p))
                return -ENOMEM;
        yaml_parser_set_input_string(&p, (const unsigned char *)(buf ? buf : ""), buf ? len : 0);
        int r = 1;
        while (r == 1) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&p, &ev)) {
                        if (p.error == YAML_MEMORY_ERROR) {
                                r = -ENOMEM;
                        } else {
                                report_syntax(&b, &p, buf, len);
                                r = NTBF_ECONFIG;
                        }
                        break;
                }
                r = on_event(&b, &ev);
                yaml_event_delete(&ev);
                if (b.err)
                        r = b.err;
        }
        yaml_parser_delete(&p);
        if (r == 0 && b.err)
                r = b.err;
        if (r == NTBF_ECONFIG)
                doc->root = NTBF__YT_NONE;
        return r;
}

void ntbf__yt_free(struct ntbf__yt_doc *doc)
{
        free(doc->v);
        free(doc->text);
        memset(doc, 0, sizeof(*doc));
        doc->root = NTBF__YT_NONE;
}
