/* ntbfab/error.h: error codes (negative errno values plus ntbfab's own) and their sentences. */
#ifndef NTBFAB_ERROR_H
#define NTBFAB_ERROR_H

#include <errno.h>
#include "common.h"

NTBF_BEGIN_DECLS

/*
 * Every ntbfab function that can fail returns 0 or a negative code: either -errno
 * or one of the NTBF_E* codes below, which live outside the errno range.
 * X(name, value, sentence)
 */
#define NTBF_ERRNO_MAP(X)                                                                          \
        X(NOPATH, -4000, "no path between the endpoints")                                          \
        X(NOSPC_BUDGET, -4001, "a hardware budget is exhausted")                                   \
        X(CONFIG, -4002, "the cluster configuration is invalid")                                   \
        X(UNREACHABLE, -4003, "the address cannot be reached")                                     \
        X(UNPROGRAMMED, -4004, "the address hits an unprogrammed translation entry")               \
        X(NORID, -4005, "the requester ID is missing from a requester table on the route")         \
        X(LINKDOWN, -4006, "a link on the route is down")                                          \
        X(ADDRLIMIT, -4007, "the address is beyond the requester's addressing limit")              \
        X(IOMMU_FAULT, -4008, "the IOMMU has no mapping for the address")                          \
        X(NOTFOUND, -4009, "no such object")                                                       \
        X(EXISTS, -4010, "the object already exists")                                              \
        X(BUSY, -4011, "the object is in use")                                                     \
        X(PROTO, -4012, "malformed or unexpected message")                                         \
        X(AUTH, -4013, "message authentication failed")                                            \
        X(UNSUPPORTED, -4014, "the hardware does not support this operation")

enum {
#define NTBF_E_ENUM(name, value, text) NTBF_E##name = (value),
        NTBF_ERRNO_MAP(NTBF_E_ENUM)
#undef NTBF_E_ENUM
};

/* A sentence describing any ntbfab or errno code ("" never; unknown codes get a generic text). */
NTBF_EXPORT const char *ntbf_strerror(int err);
/* The symbolic name ("NTBF_ENOPATH", "ENOMEM", ...) of a code. */
NTBF_EXPORT const char *ntbf_err_name(int err);

NTBF_END_DECLS

#endif
