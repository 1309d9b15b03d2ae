/* daemon/log.h: the daemon's log: levels, one line per event, to stderr and DIR/log/NODE.log. */
#ifndef NTBF_DAEMON_LOG_H
#define NTBF_DAEMON_LOG_H

#include <stdbool.h>
#include "ntbfab/common.h"

enum ntbf__log_level { NTBF_LOG_ERROR, NTBF_LOG_WARN, NTBF_LOG_INFO, NTBF_LOG_DEBUG };

/* Parse "error", "warn", "info", "debug"; -EINVAL otherwise. */
int ntbf__log_level_parse(const char *s, enum ntbf__log_level *out);
/*
 * Start logging as node: lines go to stderr (when to_stderr) and are appended to path
 * (when not NULL; created 0640). Returns 0 or -errno (the file could not be opened).
 */
int ntbf__log_open(const char *node, const char *path, enum ntbf__log_level level, bool to_stderr);
void ntbf__log_close(void);
bool ntbf__log_enabled(enum ntbf__log_level level);
/* "2026-11-21T13:30:33.123Z NODE info: message" (control characters escaped). */
void ntbf__log(enum ntbf__log_level level, const char *fmt, ...) NTBF_PRINTF(2, 3);

#define LOG_E(...) ntbf__log(NTBF_LOG_ERROR, __VA_ARGS__)
#define LOG_W(...) ntbf__log(NTBF_LOG_WARN, __VA_ARGS__)
#define LOG_I(...) ntbf__log(NTBF_LOG_INFO, __VA_ARGS__)
#define LOG_D(...)                                                                                 \
        do {                                                                                       \
                if (ntbf__log_enabled(NTBF_LOG_DEBUG))                                             \
                        ntbf__log(NTBF_LOG_DEBUG, __VA_ARGS__);                                    \
        } while (0)

#endif
