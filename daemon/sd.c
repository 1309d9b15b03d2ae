/* daemon/sd.c: systemd's readiness notification and socket activation, through libsystemd. */
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "host.h"

void ntbf__host_notify_ready(const char *status)
{
        sd_notifyf(0, "READY=1\nSTATUS=%s\nMAINPID=%lu", status, (unsigned long)getpid());
}

void ntbf__host_notify_status(const char *status)
{
        sd_notifyf(0, "STATUS=%s", status);
}

void ntbf__host_notify_stopping(void)
{
        sd_notify(0, "STOPPING=1");
}

void ntbf__host_notify_reloading(void)
{
        /* A log reopen is no reload of the configuration: only say so in the status. */
        sd_notify(0, "STATUS=reopened the log file");
}

int ntbf__host_inherited_socket(void)
{
        int n = sd_listen_fds(1);
        for (int i = 0; i < n; i++)
                if (sd_is_socket_unix(SD_LISTEN_FDS_START + i, SOCK_STREAM, 1, NULL, 0) > 0)
                        return SD_LISTEN_FDS_START + i;
        return -1;
}
