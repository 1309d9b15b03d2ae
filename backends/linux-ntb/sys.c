/* backends/linux-ntb/sys.c: the system calls of the linux-ntb backend on a real host. */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lntb.h"

static int sys_open(const char *path, int flags)
{
        return open(path, flags);
}

static int sys_ioctl(int fd, unsigned long req, void *arg)
{
        return ioctl(fd, req, arg);
}

const struct lntb_sys lntb_sys_libc = {
    .root = "",
    .open = sys_open,
    .close = close,
    .ioctl = sys_ioctl,
    .mmap = mmap,
    .munmap = munmap,
    .read = read,
    .dup = dup,
};

const struct lntb_sys *lntb_sys_current = &lntb_sys_libc;
