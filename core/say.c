/* core/say.c: the one helper that fills a caller's "why" buffer with a sentence. */
#include <stdarg.h>
#include <stdio.h>

#include "say.h"

void ntbf__say(char *why, size_t len, const char *fmt, ...)
{
        if (!why || !len)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
}
