/* daemon/sd_none.c: the systemd functions of host.h where libsystemd is not linked (builds
 * without it, the VM tier's static daemon): nothing to notify, no inherited socket. */
#include "host.h"

void ntbf__host_notify_ready(const char *status)
{
        (void)status;
}

void ntbf__host_notify_status(const char *status)
{
        (void)status;
}

void ntbf__host_notify_stopping(void)
{
}

void ntbf__host_notify_reloading(void)
{
}

int ntbf__host_inherited_socket(void)
{
        return -1;
}
