/* daemon/jsonstrict.h: what json-c lets through and the daemon must not: checks on JSON text. */
#ifndef NTBF_DAEMON_JSONSTRICT_H
#define NTBF_DAEMON_JSONSTRICT_H

#include <stddef.h>

/*
 * json-c parses strictly but forgives four things the daemon refuses, all invisible once
 * parsed, so they are checked on the text (which must already parse as JSON):
 *   - UTF-8 that RFC 3629 forbids: overlong forms, surrogates, code points past U+10FFFF
 *     (json-c's UTF-8 check only looks at the bytes' shape) -> -EILSEQ;
 *   - a \u escape of a lone surrogate (json-c makes it U+FFFD silently) -> -EILSEQ;
 *   - a NUL (\u0000) in a member name (json-c keeps names as C strings: "fdid\u0000x"
 *     would become "fdid") -> -EINVAL;
 *   - an integer outside -2^63 .. 2^64-1 (json-c clamps it to the nearest bound, so
 *     18446744073709551616 would read as 18446744073709551615) -> -EINVAL.
 * Returns 0, or one of the above with a sentence in why.
 */
int ntbf__json_check(const char *text, size_t n, char *why, size_t whylen);

#endif
