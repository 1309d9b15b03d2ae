/* ntbfab/units.h: sizes with units ("64KiB", "1G") and addresses, parsed and printed exactly. */
#ifndef NTBFAB_UNITS_H
#define NTBFAB_UNITS_H

#include "common.h"

NTBF_BEGIN_DECLS

/*
 * Parse a size: a decimal or 0x-hex integer with an optional binary unit:
 * K, KiB, M, MiB, G, GiB, T, TiB (all powers of 1024; case-insensitive K, k).
 * Decimal units (KB, MB, GB, TB) are refused as ambiguous.
 * Returns 0, or -EINVAL (why explains), or -ERANGE (overflow). why may be NULL.
 */
NTBF_EXPORT int ntbf_size_parse(const char *s, uint64_t *out, const char **why);
/* Exact human form: the largest binary unit that divides the value ("16 KiB", "1536 MiB", "100 B").
 */
NTBF_EXPORT const char *ntbf_size_fmt(uint64_t v, char *buf, size_t len);
/* Parse an unsigned integer (decimal or 0x-hex) with no unit. */
NTBF_EXPORT int ntbf_uint_parse(const char *s, uint64_t *out);

static inline bool ntbf_is_pow2(uint64_t v)
{
        return v && !(v & (v - 1));
}

static inline uint64_t ntbf_align_up(uint64_t v, uint64_t align)
{
        return (v + align - 1) & ~(align - 1);
}

static inline uint64_t ntbf_div_ceil(uint64_t a, uint64_t b)
{
        return a / b + (a % b != 0);
}

NTBF_END_DECLS

#endif
