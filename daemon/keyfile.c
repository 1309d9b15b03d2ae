/* daemon/keyfile.c: creating and reading the cluster key file. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keyfile.h"
#include "ntbfab/error.h"

int ntbf__key_generate(const char *path, char *why, size_t whylen)
{
        if (sodium_init() < 0) {
                snprintf(why, whylen, "libsodium cannot initialize");
                return -EIO;
        }
        uint8_t key[NTBF_KEY_BYTES];
        char hex[2 * NTBF_KEY_BYTES + 2];
        randombytes_buf(key, sizeof(key));
        sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
        sodium_memzero(key, sizeof(key));
        size_t n = strlen(hex);
        hex[n++] = '\n';
        /* O_EXCL: a key in use is never replaced by accident (daemons would stop trusting
         * each other); 0600 from the start, so no window where others can read it. */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                int e = errno;
                if (e == EEXIST) {
                        snprintf(why, whylen,
                                 "%s already exists; a key file is never overwritten (remove it "
                                 "first if you really mean to replace the cluster key)",
                                 path);
                        return NTBF_EEXISTS;
                }
                snprintf(why, whylen, "cannot create %s: %s", path, strerror(e));
                return -e;
        }
        int r = 0;
        if (fchmod(fd, 0600) < 0 || write(fd, hex, n) != (ssize_t)n || fsync(fd) < 0) {
                r = -errno;
                snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
                unlink(path);
        }
        sodium_memzero(hex, sizeof(hex));
        close(fd);
        return r;
}

int ntbf__key_read(const char *path, uint8_t key[NTBF_KEY_BYTES], char *why, size_t whylen)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a FIFO: no wait */
        if (fd < 0) {
                int e = errno;
                snprintf(why, whylen, "cannot open the cluster key %s: %s%s", path, strerror(e),
                         e == ENOENT ? "; create one with 'ntbfab keygen FILE'" : "");
                return -e;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                snprintf(why, whylen, "the cluster key %s is not a regular file", path);
                return -EINVAL;
        }
        if (st.st_mode & 077) {
                close(fd);
                snprintf(why, whylen,
                         "the cluster key %s is accessible by group or others (mode %04o); run "
                         "'chmod 600 %s'",
                         path, (unsigned)(st.st_mode & 07777), path);
                return -EACCES;
        }
        char buf[2 * NTBF_KEY_BYTES + 3];
        ssize_t n = read(fd, buf, sizeof(buf));
        close(fd);
        if (n > 0 && buf[n - 1] == '\n')
                n--;
        size_t got = 0;
        int r = 0;
        if (n != 2 * NTBF_KEY_BYTES ||
            sodium_hex2bin(key, NTBF_KEY_BYTES, buf, (size_t)n, NULL, &got, NULL) ||
            got != NTBF_KEY_BYTES) {
                snprintf(why, whylen,
                         "the cluster key %s does not hold 64 hex digits; create a key with "
                         "'ntbfab keygen FILE'",
                         path);
                r = NTBF_EPROTO;
        }
        sodium_memzero(buf, sizeof(buf));
        return r;
}
