/* backends/polltimer.h: the event fd of a backend whose hardware raises no events: a timer. */
#ifndef NTBF_BACKENDS_POLLTIMER_H
#define NTBF_BACKENDS_POLLTIMER_H

/*
 * Some fabrics tell a process nothing when their state changes (ivshmem-plain has no
 * interrupts, SISCI reports no link events to a process). Their event_fd is a periodic
 * timer: the owner's loop wakes every period and process_events looks at the state.
 */

/* *fd, made at the first call (*fd < 0 until then): a non-blocking timer that fires every ms
 * milliseconds. Returns the fd, or -errno when none could be made (*fd stays -1). */
int ntbf__polltimer_fd(int *fd, unsigned ms);
/* Consume the expirations the timer holds (process_events), so that it wakes the loop again
 * only at its next period. A negative fd is ignored. */
void ntbf__polltimer_drain(int fd);

#endif
