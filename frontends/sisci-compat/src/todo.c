/* frontends/sisci-compat/src/todo.c: entry points not written yet (temporary). */
#include <stdlib.h>

#include "sx.h"

#define NI(err) do { if (err) *(err) = SCI_ERR_NOT_IMPLEMENTED; } while (0)


void SCIRegisterPCIeRequester(sci_desc_t sd, unsigned int a, unsigned int b, unsigned int df, unsigned int f, sci_error_t *e) { (void)sd; (void)a; (void)b; (void)df; (void)f; NI(e); }
void SCIUnregisterPCIeRequester(sci_desc_t sd, unsigned int a, unsigned int b, unsigned int df, unsigned int f, sci_error_t *e) { (void)sd; (void)a; (void)b; (void)df; (void)f; NI(e); }
