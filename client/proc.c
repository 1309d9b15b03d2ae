/* client/proc.c: whether a process (a daemon, the device host) is still alive. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

bool ntbf__pid_alive(int pid)
{
        if (pid <= 0 || kill(pid, 0))
                return false;
        char p[64], buf[512];
        snprintf(p, sizeof(p), "/proc/%d/stat", pid);
        FILE *f = fopen(p, "r");
        if (!f)
                return true; /* it exists (kill said so); no /proc to say more */
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        char *rp = strrchr(buf, ')');
        if (!(rp && rp[1] == ' ' && rp[2] == 'Z'))
                return true;
        /* A zombie leader whose other threads are still exiting still holds its files (and
         * a daemon's node lock): it is gone only when it is the last thread. */
        snprintf(p, sizeof(p), "/proc/%d/status", pid);
        f = fopen(p, "r");
        int threads = 1;
        while (f && fgets(buf, sizeof(buf), f))
                if (!strncmp(buf, "Threads:", 8))
                        threads = atoi(buf + 8);
        if (f)
                fclose(f);
        return threads > 1;
}
