/* ntbfab/diag.h: diagnostics (errors and warnings about an input file) collected in one run. */
#ifndef NTBFAB_DIAG_H
#define NTBFAB_DIAG_H

#include <stdarg.h>
#include <stdio.h>
#include "common.h"

NTBF_BEGIN_DECLS

enum ntbf_severity { NTBF_SEV_ERROR, NTBF_SEV_WARNING, NTBF_SEV_NOTE };

/* A position in an input file; line and column count from 1, 0 means unknown. */
struct ntbf_loc {
        uint32_t line;
        uint32_t col;
};

struct ntbf_diag {
        enum ntbf_severity severity;
        struct ntbf_loc loc;
        char *file; /* owned */
        char *msg;  /* owned: "what is wrong; what would fix it" */
};

struct ntbf_diags {
        struct ntbf_diag *v;
        size_t n, cap;
        size_t errors;
        /* Stop recording (but keep counting) past this many; 0 means the default of 1000. */
        size_t limit;
        size_t dropped;
};

NTBF_EXPORT void ntbf_diags_init(struct ntbf_diags *d);
NTBF_EXPORT void ntbf_diags_free(struct ntbf_diags *d);
/* Record one diagnostic. file may be NULL. Returns 0, or -ENOMEM (the diagnostic is then counted).
 */
NTBF_EXPORT int ntbf_diag_add(struct ntbf_diags *d, enum ntbf_severity sev, const char *file,
                              struct ntbf_loc loc, const char *fmt, ...) NTBF_PRINTF(5, 6);
/* The same with a va_list, for callers that wrap it. */
NTBF_EXPORT int ntbf_diag_vadd(struct ntbf_diags *d, enum ntbf_severity sev, const char *file,
                               struct ntbf_loc loc, const char *fmt, va_list ap) NTBF_PRINTF(5, 0);
/* Sort by file, line, column (stable), so a file's mistakes print in reading order. */
NTBF_EXPORT void ntbf_diags_sort(struct ntbf_diags *d);
/* Print in the compiler format "FILE:LINE:COL: error: message", one per line. */
NTBF_EXPORT void ntbf_diags_print(const struct ntbf_diags *d, FILE *out);
NTBF_EXPORT const char *ntbf_severity_name(enum ntbf_severity sev);

NTBF_END_DECLS

#endif
