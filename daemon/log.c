/* daemon/log.c: the daemon's log lines, with timestamp, node and level, to stderr, syslog or a
 * file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* The log is the daemon's top level: one per process, like stderr itself. */
static struct {
        char node[NTBF_NAME_MAX + 1];
        char path[PATH_MAX];
        int fd;
        unsigned sinks;
        bool journal; /* stderr is journald's stream: priority prefixes, no timestamp */
        enum ntbf__log_level level;
} lg = {"", "", -1, NTBF_LOG_STDERR, false, NTBF_LOG_INFO};

static const char *const names[] = {"error", "warn", "info", "debug"};
static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

int ntbf__log_level_parse(const char *s, enum ntbf__log_level *out)
{
        for (int i = 0; i < 4; i++)
                if (!strcmp(s, names[i])) {
                        *out = (enum ntbf__log_level)i;
                        return 0;
                }
        return -EINVAL;
}

int ntbf__log_sinks_parse(const char *s, unsigned *out)
{
        static const char *const sink[] = {"stderr", "syslog", "file"};
        unsigned v = 0;
        const char *p = s;
        while (*p) {
                size_t n = strcspn(p, ",");
                int k = -1;
                for (int i = 0; i < 3; i++)
                        if (strlen(sink[i]) == n && !strncmp(p, sink[i], n))
                                k = i;
                if (k < 0)
                        return -EINVAL;
                v |= 1u << k;
                p += n + (p[n] == ',');
        }
        if (!v)
                return -EINVAL;
        *out = v;
        return 0;
}

/* JOURNAL_STREAM is "DEV:INODE" of the stream journald gave as stdout/stderr. */
static bool stderr_is_journal(void)
{
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && !fstat(2, &st) &&
               (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static int open_file(void)
{
        int fd = open(lg.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
        if (fd < 0)
                return -errno;
        if (lg.fd >= 0)
                close(lg.fd);
        lg.fd = fd;
        return 0;
}

int ntbf__log_open(const char *node, unsigned sinks, const char *path, enum ntbf__log_level level)
{
        snprintf(lg.node, sizeof(lg.node), "%s", node ? node : "");
        lg.level = level;
        lg.sinks = sinks;
        lg.journal = (sinks & NTBF_LOG_STDERR) && stderr_is_journal();
        if (sinks & NTBF_LOG_SYSLOG)
                openlog("ntbfabd", LOG_PID | LOG_NDELAY, LOG_DAEMON); /* before dropping root */
        if ((sinks & NTBF_LOG_FILE) && path) {
                snprintf(lg.path, sizeof(lg.path), "%s", path);
                return open_file();
        }
        return 0;
}

int ntbf__log_reopen(void)
{
        return lg.path[0] && (lg.sinks & NTBF_LOG_FILE) ? open_file() : 0;
}

void ntbf__log_close(void)
{
        if (lg.fd >= 0)
                close(lg.fd);
        lg.fd = -1;
        if (lg.sinks & NTBF_LOG_SYSLOG)
                closelog();
}

bool ntbf__log_enabled(enum ntbf__log_level level)
{
        return level <= lg.level;
}

static void put(int fd, const char *line, size_t n)
{
        if (write(fd, line, n) < 0) {
                /* nothing sensible to do: the log is where failures go */
        }
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
        o += (size_t)snprintf(line + o, sizeof(line) - o, ".%03ldZ ", ts.tv_nsec / 1000000);
        size_t body = o; /* syslog and the journal stamp lines themselves */
        o += (size_t)snprintf(line + o, sizeof(line) - o, "%s %s: ", lg.node, names[level]);
        /* One event, one line: whatever a peer or client sent cannot break the format. */
        for (const char *p = msg; *p && o + 8 < sizeof(line); p++) {
                unsigned char c = (unsigned char)*p;
                if (c < 0x20 || c == 0x7f)
                        o += (size_t)snprintf(line + o, sizeof(line) - o, "\\x%02x", c);
                else
                        line[o++] = (char)c;
        }
        line[o] = 0;
        if (lg.sinks & NTBF_LOG_SYSLOG)
                syslog(prio[level], "%s", line + body);
        line[o++] = '\n';
        if ((lg.sinks & NTBF_LOG_STDERR) && lg.journal) {
                char pre[8];
                int n = snprintf(pre, sizeof(pre), "<%d>", prio[level]);
                char j[4200];
                memcpy(j, pre, (size_t)n);
                memcpy(j + n, line + body, o - body);
                put(2, j, (size_t)n + o - body);
        } else if (lg.sinks & NTBF_LOG_STDERR) {
                put(2, line, o);
        }
        if ((lg.sinks & NTBF_LOG_FILE) && lg.fd >= 0)
                put(lg.fd, line, o);
}
