/* daemon/keyfile.h: the cluster key file (32 random bytes in hex, mode 0600; docs/peer.md). */
#ifndef NTBF_DAEMON_KEYFILE_H
#define NTBF_DAEMON_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#define NTBF_KEY_BYTES 32

/*
 * Create path with a fresh random key (libsodium's randombytes), mode 0600. Never
 * overwrites: NTBF_EEXISTS if the file exists. why gets a sentence saying what to do.
 */
int ntbf__key_generate(const char *path, char *why, size_t whylen);
/*
 * Read the key. Refused (-EACCES) when the file is readable or writable by group or
 * others, NTBF_EPROTO when it does not hold exactly 64 hex digits (and a newline).
 */
int ntbf__key_read(const char *path, uint8_t key[NTBF_KEY_BYTES], char *why, size_t whylen);

#endif
