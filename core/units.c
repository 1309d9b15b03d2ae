/* core/units.c: size and integer parsing and exact size formatting. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ntbfab/units.h"

static int parse_digits(const char **ps, uint64_t *out)
{
        const char *s = *ps;
        uint64_t v = 0;
        unsigned base = 10;
        if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                base = 16;
                s += 2;
        }
        const char *start = s;
        for (;; s++) {
                unsigned d;
                if (*s >= '0' && *s <= '9')
                        d = (unsigned)(*s - '0');
                else if (base == 16 && isxdigit((unsigned char)*s))
                        d = (unsigned)(tolower((unsigned char)*s) - 'a' + 10);
                else if (*s == '_' && s != start && s[1] && isxdigit((unsigned char)s[1]))
                        continue; /* digit separators: 1_000_000 */
                else
                        break;
                if (v > (UINT64_MAX - d) / base)
                        return -ERANGE;
                v = v * base + d;
        }
        if (s == start)
                return -EINVAL;
        *ps = s;
        *out = v;
        return 0;
}

int ntbf_uint_parse(const char *s, uint64_t *out)
{
        if (!s)
                return -EINVAL;
        uint64_t v;
        int r = parse_digits(&s, &v);
        if (r)
                return r;
        if (*s)
                return -EINVAL;
        *out = v;
        return 0;
}

int ntbf_size_parse(const char *s, uint64_t *out, const char **why)
{
        const char *ignored;
        const char **w = why ? why : &ignored;
        if (!s || !*s) {
                *w = "empty size";
                return -EINVAL;
        }
        const char *p = s;
        uint64_t v;
        int r = parse_digits(&p, &v);
        if (r == -ERANGE) {
                *w = "the number is too large";
                return r;
        }
        if (r) {
                *w = "a size is a number with an optional unit (4096, 64KiB, 2MiB, 1GiB)";
                return r;
        }
        while (*p == ' ')
                p++;
        unsigned shift = 0;
        if (*p) {
                static const struct {
                        const char *name;
                        unsigned shift;
                } units[] = {
                    {"b", 0},  {"k", 10},   {"kib", 10}, {"m", 20},   {"mib", 20},
                    {"g", 30}, {"gib", 30}, {"t", 40},   {"tib", 40},
                };
                static const char *const decimal[] = {"kb", "mb", "gb", "tb"};
                bool found = false;
                for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                        if (!strcasecmp(p, units[i].name)) {
                                shift = units[i].shift;
                                found = true;
                                break;
                        }
                }
                if (!found) {
                        for (size_t i = 0; i < 4; i++) {
                                if (!strcasecmp(p, decimal[i])) {
                                        *w = "decimal units (KB, MB, GB, TB) are ambiguous; write "
                                             "KiB, MiB, GiB or TiB (powers of 1024)";
                                        return -EINVAL;
                                }
                        }
                        *w = "unknown unit; use K/KiB, M/MiB, G/GiB or T/TiB";
                        return -EINVAL;
                }
        }
        if (shift && v > (UINT64_MAX >> shift)) {
                *w = "the size is too large";
                return -ERANGE;
        }
        *out = v << shift;
        return 0;
}

const char *ntbf_size_fmt(uint64_t v, char *buf, size_t len)
{
        static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
        unsigned u = 0;
        while (u < 6 && v && (v & 1023) == 0) {
                v >>= 10;
                u++;
        }
        snprintf(buf, len, "%llu %s", (unsigned long long)v, unit[u]);
        return buf;
}
