/* daemon/jsonstrict.c: strict UTF-8, NUL-free member names and 64-bit integers in JSON text. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "jsonstrict.h"

/* Bytes of the well-formed UTF-8 sequence at s (RFC 3629, table 3-7 of Unicode), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        size_t len;
        unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
        if (c >= 0xc2 && c <= 0xdf) {
                len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
                len = 3;
                if (c == 0xe0)
                        lo = 0xa0; /* overlong below */
                else if (c == 0xed)
                        hi = 0x9f; /* surrogates above */
        } else if (c >= 0xf0 && c <= 0xf4) {
                len = 4;
                if (c == 0xf0)
                        lo = 0x90; /* overlong below */
                else if (c == 0xf4)
                        hi = 0x8f; /* past U+10FFFF above */
        } else {
                return 0; /* 0x80-0xc1 (continuation, overlong), 0xf5-0xff */
        }
        if (n < len || s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < len; i++)
                if (s[i] < 0x80 || s[i] > 0xbf)
                        return 0;
        return len;
}

static int hex4(const char *s, unsigned *v)
{
        *v = 0;
        for (int i = 0; i < 4; i++) {
                char c = s[i];
                unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                             : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                             : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                    : 16u;
                if (d > 15)
                        return -1;
                *v = *v << 4 | d;
        }
        return 0;
}

/* Whether the integer digits d[0..n) (no sign, no leading zeros) exceed limit. */
static bool beyond(const char *d, size_t n, const char *limit)
{
        size_t ln = strlen(limit);
        return n > ln || (n == ln && memcmp(d, limit, n) > 0);
}

int ntbf__json_check(const char *text, size_t n, char *why, size_t whylen)
{
        const unsigned char *s = (const unsigned char *)text;
        size_t i = 0;
        while (i < n) {
                unsigned char c = s[i];
                if (c == '"') {
                        bool nul = false;
                        for (i++; i < n && s[i] != '"';) {
                                if (s[i] != '\\') {
                                        size_t k = utf8_len(s + i, n - i);
                                        if (!k) {
                                                snprintf(why, whylen,
                                                         "byte 0x%02x at offset %zu does not start "
                                                         "well-formed UTF-8 (overlong, surrogate "
                                                         "or past U+10FFFF)",
                                                         s[i], i);
                                                return -EILSEQ;
                                        }
                                        i += k;
                                        continue;
                                }
                                unsigned cp, lo;
                                if (i + 1 >= n || s[i + 1] != 'u') {
                                        i += 2;
                                        continue;
                                }
                                if (i + 6 > n || hex4(text + i + 2, &cp))
                                        return snprintf(why, whylen, "bad \\u escape"), -EILSEQ;
                                i += 6;
                                if (cp == 0)
                                        nul = true;
                                if (cp >= 0xdc00 && cp <= 0xdfff)
                                        return snprintf(why, whylen,
                                                        "\\u escape of a lone low surrogate"),
                                               -EILSEQ;
                                if (cp >= 0xd800 && cp <= 0xdbff) {
                                        if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u' ||
                                            hex4(text + i + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                                                return snprintf(why, whylen,
                                                                "\\u escape of a lone high "
                                                                "surrogate"),
                                                       -EILSEQ;
                                        i += 6;
                                }
                        }
                        i++; /* the closing quote */
                        size_t k = i;
                        while (k < n &&
                               (s[k] == ' ' || s[k] == '\t' || s[k] == '\r' || s[k] == '\n'))
                                k++;
                        if (nul && k < n && s[k] == ':') {
                                snprintf(why, whylen, "a member name holds a NUL character");
                                return -EINVAL;
                        }
                        continue;
                }
                if (c == '-' || (c >= '0' && c <= '9')) {
                        bool neg = c == '-';
                        size_t d = neg ? i + 1 : i, e = d;
                        while (e < n && s[e] >= '0' && s[e] <= '9')
                                e++;
                        bool integer = !(e < n && (s[e] == '.' || s[e] == 'e' || s[e] == 'E'));
                        if (integer &&
                            beyond(text + d, e - d,
                                   neg ? "9223372036854775808" : "18446744073709551615")) {
                                snprintf(why, whylen,
                                         "the integer %s%.*s%s is outside the 64-bit range "
                                         "(-2^63 .. 2^64-1)",
                                         neg ? "-" : "", (int)(e - d > 24 ? 24 : e - d), text + d,
                                         e - d > 24 ? "..." : "");
                                return -EINVAL;
                        }
                        i = e;
                        while (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == '+' ||
                                         s[i] == '-' || (s[i] >= '0' && s[i] <= '9')))
                                i++;
                        continue;
                }
                i++;
        }
        return 0;
}
