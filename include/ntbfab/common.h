/* ntbfab/common.h: definitions every ntbfab header shares (export macro, limits, sentinels). */
#ifndef NTBFAB_COMMON_H
#define NTBFAB_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(NTBF_BUILDING_LIB) && defined(__GNUC__)
#define NTBF_EXPORT __attribute__((visibility("default")))
#else
#define NTBF_EXPORT
#endif

/* The declarations of every header have C linkage, for C++ programs too. */
#ifdef __cplusplus
#define NTBF_BEGIN_DECLS extern "C" {
#define NTBF_END_DECLS   }
#else
#define NTBF_BEGIN_DECLS
#define NTBF_END_DECLS
#endif

#if defined(__GNUC__)
#define NTBF_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define NTBF_PRINTF(fmt, args)
#endif

/* Longest object name (node, adapter, switch, device), without the terminating NUL. */
#define NTBF_NAME_MAX 31
/* "No object": an index field that refers to nothing. */
#define NTBF_NONE     UINT32_MAX

#define NTBF_KiB (UINT64_C(1) << 10)
#define NTBF_MiB (UINT64_C(1) << 20)
#define NTBF_GiB (UINT64_C(1) << 30)
#define NTBF_TiB (UINT64_C(1) << 40)

#endif
