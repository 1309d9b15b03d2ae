/* tools/cli.h: shared pieces of the ntbfab command-line tool (verbs, output, exit codes). */
#ifndef NTBF_TOOLS_CLI_H
#define NTBF_TOOLS_CLI_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>

#include "ntbfab/budget.h"
#include "ntbfab/diag.h"
#include "ntbfab/path.h"
#include "ntbfab/topology.h"

/* Exit status (nvme-cli, switchtec and cxl conventions). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

struct verb {
        const char *name;
        const char *args;    /* usage after the verb */
        const char *summary; /* one line */
        const char *help;    /* the rest of `ntbfab VERB --help` */
        int (*run)(int argc, char **argv);
};

extern const struct verb verbs_model[];
extern const size_t verbs_model_count;
extern const struct verb verbs_switchtec[];
extern const size_t verbs_switchtec_count;

/* Errors: "ntbfab: error: ..." on stderr, one line. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A usage error for verb v: prints the message and a pointer to --help; returns EXIT_USAGE. */
int cli_usage(const struct verb *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_help(const struct verb *v);
/* Handle --help/-h anywhere in argv: returns true if help was printed. */
bool cli_wants_help(int argc, char **argv);

/* Load and validate a cluster file (YAML + budget baseline); prints diagnostics unless quiet. */
int cli_load(const char *path, struct ntbf_topo **t, struct ntbf_state **s, bool quiet);

/* Aligned text tables. */
struct table {
        unsigned ncols;
        const char *hdr[16];
        bool right[16];
        char **cells; /* nrows * ncols */
        unsigned nrows, cap, cur;
};
void table_init(struct table *t, const char *const *headers, unsigned ncols);
void table_right(struct table *t, unsigned col);
void table_cell(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void table_print(struct table *t, FILE *f, unsigned indent);
void table_free(struct table *t);

/* JSON output. */
void json_print(struct json_object *o);
struct json_object *json_u64(uint64_t v);
struct json_object *json_str(const char *s);
struct json_object *json_diag(const struct ntbf_diag *d);
struct json_object *json_path(const struct ntbf_topo *t, const struct ntbf_path *p);

/*
 * Progress of something that can take seconds (up, down): one line on the terminal,
 * rewritten in place and erased at the end; nothing when stdout is not a terminal or the
 * output is JSON (wanted false).
 */
struct progress {
        bool on, shown;
};
void progress_start(struct progress *p, bool wanted);
void progress_show(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void progress_end(struct progress *p);

/* Human output helpers. */
const char *fmt_size(uint64_t v, char *buf, size_t len);
/* For address spaces whose size is not a round number: "256.0 TiB". */
const char *fmt_size_approx(uint64_t v, char *buf, size_t len);
void print_path(const struct ntbf_topo *t, const struct ntbf_path *p, unsigned indent);

#endif
