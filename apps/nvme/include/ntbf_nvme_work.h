/* ntbf_nvme_work.h: I/O workloads: patterns, verification, histograms, path failover. */
#ifndef NTBF_NVME_WORK_H
#define NTBF_NVME_WORK_H

#include "ntbf_nvme.h"

/*
 * What the tool's read, write, verify and bench verbs run, and what the tests check data
 * with. A workload runs on one or more paths to the controller (article 6.3): each path is a
 * queue pair created in advance, reached through its own mapping of BAR0 and reaching the
 * data buffer at its own controller address. I/O goes to the first path that works; when a
 * command of a path expires or its BAR reads all ones, the path is marked failed and every
 * command still outstanding on it is submitted again on the next path. A command is only
 * reported complete when a completion for it arrived, so a write counted as done happened
 * (on one path or the other), and writing the same data twice to one block is harmless.
 */

/* Latency histogram: 64 sub-buckets per power of two (about 1% resolution). */
#define NTBF_NVME_HIST_SUB  64
#define NTBF_NVME_HIST_BINS (64 * NTBF_NVME_HIST_SUB)

struct ntbf_nvme_hist {
        uint64_t n, sum_ns, min_ns, max_ns;
        uint64_t bins[NTBF_NVME_HIST_BINS];
};

void ntbf_nvme_hist_add(struct ntbf_nvme_hist *h, uint64_t ns);
/* The value at quantile q (0..1): the upper bound of the bucket it falls in (min/max exact). */
uint64_t ntbf_nvme_hist_quantile(const struct ntbf_nvme_hist *h, double q);
void ntbf_nvme_hist_merge(struct ntbf_nvme_hist *into, const struct ntbf_nvme_hist *h);
/* Counts per power of two: out[e] holds the samples in [2^e, 2^(e+1)) (out[0]: 0 and 1). */
void ntbf_nvme_hist_pow2(const struct ntbf_nvme_hist *h, uint64_t out[64]);

struct ntbf_nvme_path {
        struct ntbf_nvme_qp *qp;
        volatile void *bar0; /* this path's mapping of BAR0: reads all ones when it is dead */
        uint64_t buf_io;     /* the data buffer as the controller reaches it on this path */
        void *buf;           /* this path's own data buffer (qd * bs bytes), or NULL: the job's */
        bool failed;
        uint64_t ios; /* commands completed on this path */
};

enum ntbf_nvme_pattern {
        NTBF_NVME_PAT_NONE = 0, /* whatever the buffer holds */
        NTBF_NVME_PAT_STREAM,   /* writes carry (seed, block, generation); reads check it */
};

struct ntbf_nvme_job {
        uint32_t bs;         /* bytes per command: a multiple of the block size */
        uint32_t qd;         /* commands in flight */
        bool random;         /* random blocks (else sequential, wrapping) */
        bool shuffle;        /* every unit of the range once per pass, in a random order that
                                depends only on seed (a write and a verify agree on it) */
        uint32_t read_pct;   /* 100: reads only, 0: writes only */
        uint64_t first;      /* first block of the range */
        uint64_t blocks;     /* blocks in the range (0: to the end of the namespace) */
        uint64_t ios;        /* stop after this many commands (0: by time) */
        uint64_t time_ns;    /* stop after this long (when ios is 0) */
        uint64_t seed;       /* random offsets and the pattern */
        uint64_t timeout_ns; /* a command outstanding this long has failed (0: 2 s) */
        enum ntbf_nvme_pattern pattern;
        uint32_t gen; /* pattern generation of writes; reads expect it */
        /* Sequential and shuffled writes visit each bs-sized unit of the range once when ios =
         * units. */
        uint32_t nap_ns;         /* sleep this long when a look finds nothing (0: spin) */
        void (*idle)(void *arg); /* called while waiting (tests poll a model) */
        void *idle_arg;
        /* Called for each command reported complete (status 0) or failed, may be NULL. */
        void (*done)(void *arg, bool write, uint64_t slba, uint32_t nlb, int status);
        void *done_arg;
};

struct ntbf_nvme_stats {
        uint64_t ios, reads, writes, bytes;
        uint64_t errors;     /* commands that completed with an NVMe error */
        uint64_t mismatches; /* reads whose data did not carry the expected pattern */
        uint64_t failovers;  /* paths given up during the run */
        uint64_t resubmitted;
        uint64_t elapsed_ns;
        struct ntbf_nvme_hist lat;
        int first_error; /* the first failure (status or -errno), 0 if none */
};

/*
 * Run job over paths[0..npaths) of namespace ns with the data buffer buf (qd * bs bytes,
 * the same memory on every path). Returns 0 when every command completed successfully;
 * -EIO when every path failed; the first NVMe status when commands failed.
 */
int ntbf_nvme_job_run(struct ntbf_nvme_path *paths, unsigned npaths, const struct ntbf_nvme_ns *ns,
                      void *buf, const struct ntbf_nvme_job *job, struct ntbf_nvme_stats *st);

/* The pattern of block lba of generation gen, bs bytes of blocks of 1 << shift. */
void ntbf_nvme_pattern_fill(uint8_t *p, uint64_t lba, uint32_t nlb, uint32_t shift, uint64_t seed,
                            uint32_t gen);
/* Blocks of p that do not carry the pattern: the first one's index, or -1. */
long ntbf_nvme_pattern_check(const uint8_t *p, uint64_t lba, uint32_t nlb, uint32_t shift,
                             uint64_t seed, uint32_t gen);

#endif
