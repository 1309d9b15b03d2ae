/* backends/polltimer.c: the event fd of a backend whose hardware raises no events: a timer. */
#include <errno.h>
#include <stdint.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "polltimer.h"

int ntbf__polltimer_fd(int *fd, unsigned ms)
{
        if (*fd >= 0)
                return *fd;
        int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (t < 0)
                return -errno;
        struct timespec period = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        struct itimerspec it = {period, period};
        if (timerfd_settime(t, 0, &it, NULL)) {
                int r = -errno;
                close(t);
                return r;
        }
        *fd = t;
        return t;
}

void ntbf__polltimer_drain(int fd)
{
        uint64_t ticks;
        if (fd >= 0)
                while (read(fd, &ticks, sizeof(ticks)) == sizeof(ticks))
                        ;
}
