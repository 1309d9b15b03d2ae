/* client/proc.h: process liveness for the tools and tests that supervise daemons (internal). */
#ifndef NTBF_CLIENT_PROC_H
#define NTBF_CLIENT_PROC_H

#include <stdbool.h>

/* Whether pid is a live process; a zombie counts as dead once its last thread is gone. */
bool ntbf__pid_alive(int pid);

#endif
