/* daemon/log.c: the daemon's log lines, with timestamp, node and level. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* The log is the daemon's top level: one per process, like stderr itself. */
static struct {
        char node[NTBF_NAME_MAX + 1];
        int fd;
        enum ntbf__log_level level;
        bool to_stderr;
} lg = {"", -1, NTBF_LOG_INFO, true};

static const char *const names[] = {"error", "warn", "info", "debug"};

int ntbf__log_level_parse(const char *s, enum ntbf__log_level *out)
{
        for (int i = 0; i < 4; i++)
                if (!strcmp(s, names[i])) {
                        *out = (enum ntbf__log_level)i;
                        return 0;
                }
        return -EINVAL;
}

int ntbf__log_open(const char *node, const char *path, enum ntbf__log_level level, bool to_stderr)
{
        snprintf(lg.node, sizeof(lg.node), "%s", node ? node : "");
        lg.level = level;
        lg.to_stderr = to_stderr;
        if (path) {
                int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
                if (fd < 0)
                        return -errno;
                if (lg.fd >= 0)
                        close(lg.fd);
                lg.fd = fd;
        }
        return 0;
}

void ntbf__log_close(void)
{
        if (lg.fd >= 0)
                close(lg.fd);
        lg.fd = -1;
}

bool ntbf__log_enabled(enum ntbf__log_level level)
{
        return level <= lg.level;
}

void ntbf__log(enum ntbf__log_level level, const char *fmt, ...)
{
        if (level > lg.level)
                return;
        char msg[2048], line[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        size_t o = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
        o += (size_t)snprintf(line + o, sizeof(line) - o, ".%03ldZ %s %s: ", ts.tv_nsec / 1000000,
                              lg.node, names[level]);
        /* One event, one line: whatever a peer or client sent cannot break the format. */
        for (const char *p = msg; *p && o + 8 < sizeof(line); p++) {
                unsigned char c = (unsigned char)*p;
                if (c < 0x20 || c == 0x7f)
                        o += (size_t)snprintf(line + o, sizeof(line) - o, "\\x%02x", c);
                else
                        line[o++] = (char)c;
        }
        line[o++] = '\n';
        if (lg.to_stderr && write(2, line, o) < 0) {
                /* nothing sensible to do: the log is where failures go */
        }
        if (lg.fd >= 0 && write(lg.fd, line, o) < 0) {
        }
}
