/* daemon/log.h: the daemon's log: levels, one line per event, to stderr (the journal under
 * systemd), syslog and/or a file reopened on SIGHUP. */
#ifndef NTBF_DAEMON_LOG_H
#define NTBF_DAEMON_LOG_H

#include <stdbool.h>
#include "ntbfab/common.h"

enum ntbf__log_level { NTBF_LOG_ERROR, NTBF_LOG_WARN, NTBF_LOG_INFO, NTBF_LOG_DEBUG };

/* Where lines go (--log stderr,syslog,file). */
enum { NTBF_LOG_STDERR = 1, NTBF_LOG_SYSLOG = 2, NTBF_LOG_FILE = 4 };

/* Parse "error", "warn", "info", "debug"; -EINVAL otherwise. */
int ntbf__log_level_parse(const char *s, enum ntbf__log_level *out);
/* Parse a comma-separated list of stderr, syslog, file into NTBF_LOG_* bits; -EINVAL. */
int ntbf__log_sinks_parse(const char *s, unsigned *out);
/*
 * Start logging as node to sinks: NTBF_LOG_FILE appends to path (created 0640; path must
 * be given), NTBF_LOG_SYSLOG to syslog (facility daemon, ident ntbfabd), NTBF_LOG_STDERR
 * to stderr: with a timestamp, or with the priority prefix journald reads ("<6>") when
 * stderr is the journal's stream (JOURNAL_STREAM). Returns 0 or -errno (the file).
 */
int ntbf__log_open(const char *node, unsigned sinks, const char *path, enum ntbf__log_level level);
/* Open the file again (after logrotate moved it: SIGHUP). 0 or -errno; the old one stays. */
int ntbf__log_reopen(void);
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
