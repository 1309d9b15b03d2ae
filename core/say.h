/* core/say.h: write a sentence into a caller's "why" buffer (internal to ntbfab). */
#ifndef NTBF_CORE_SAY_H
#define NTBF_CORE_SAY_H

#include <stddef.h>

#include "ntbfab/common.h"

/* Format into why[len] when why is not NULL and len is not 0; nothing otherwise. */
void ntbf__say(char *why, size_t len, const char *fmt, ...) NTBF_PRINTF(3, 4);

#endif
