/* tests/integration/sisci_compat/sxc.h: what every program of the SISCI compatibility suite
 * defines for itself, the way SISCI programs do (their own NO_FLAGS, an exit-on-error macro). */
#ifndef SXC_H
#define SXC_H

#include <sisci_api.h>
#include <stdio.h>
#include <stdlib.h>

#define NO_FLAGS    0
#define NO_CALLBACK NULL
#define NO_ARG      NULL
#define ADAPTER_NO  0

/* Call fn(args..., &error); on an error, say which call, what it returned, and exit 1. */
#define TRY(fn, ...)                                                                               \
        do {                                                                                       \
                sci_error_t try_err_;                                                              \
                fn(__VA_ARGS__, &try_err_);                                                        \
                if (try_err_ != SCI_ERR_OK) {                                                      \
                        fprintf(stderr, "%s:%d: %s: %s (0x%x)\n", __FILE__, __LINE__, #fn,         \
                                SCIGetErrorString(try_err_), (unsigned)try_err_);                  \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)

/* A check of what a program saw: exit 1 with the line when it does not hold. */
#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                            \
                        fprintf(stderr, __VA_ARGS__);                                              \
                        fprintf(stderr, "\n");                                                     \
                        exit(1);                                                                   \
                }                                                                                  \
        } while (0)

#endif
