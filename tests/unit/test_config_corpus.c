/* tests/unit/test_config_corpus.c: each tests/config-invalid file gives its .expected output. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ntbfab/backend.h"
#include "ntbfab/config.h"
#include "ntbfab/error.h"

/* Runs with the source root as working directory, so diagnostics name this relative path. */
#define CORPUS     "tests/config-invalid"
#define MIN_FILES  45
#define MAX_FILES  512
#define PATH_BYTES 256

static char *diagnostics_of(const char *path, int *ret)
{
        struct ntbf_diags d;
        struct ntbf_topo *t = NULL;
        ntbf_diags_init(&d);
        *ret = ntbf_config_load(path, &t, &d);
        if (t) {
                ntbf_topo_free(t);
                *ret = 0;
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ntbf_diags_print(&d, f);
        fclose(f);
        ntbf_diags_free(&d);
        return buf;
}

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return NULL;
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, n, m);
        fclose(m);
        fclose(f);
        return buf;
}

/*
 * The names of the backends come from their registry, not from copies: an .expected file
 * writes the loader's list of them ("sim, linux-ntb, ...") as @BACKENDS@.
 */
#define BACKENDS "@BACKENDS@"

static const char *backend_list(void)
{
        static char list[512];
        size_t o = 0;
        for (size_t i = 0; ntbf_backend_entry_at(i) && o < sizeof(list); i++)
                o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
                                      ntbf_backend_entry_at(i)->name);
        return list;
}

/* text with every from replaced by to (caller frees). */
static char *replace_all(const char *text, const char *from, const char *to)
{
        char *buf = NULL;
        size_t len = 0, n = strlen(from);
        FILE *m = open_memstream(&buf, &len);
        for (const char *p; (p = strstr(text, from)); text = p + n) {
                fwrite(text, 1, (size_t)(p - text), m);
                fputs(to, m);
        }
        fputs(text, m);
        fclose(m);
        return buf;
}

static void expected_path(const char *yaml, char *out)
{
        size_t n = strlen(yaml) - strlen(".yaml");
        snprintf(out, PATH_BYTES, "%.*s.expected", (int)n, yaml);
}

static void test_file(void **state)
{
        const char *path = *state;
        char exp[PATH_BYTES];
        int r;
        expected_path(path, exp);
        char *raw = slurp(exp);
        if (!raw)
                fail_msg("%s: missing %s (write it with: test_config_corpus --write)", path, exp);
        char *want = replace_all(raw, BACKENDS, backend_list());
        free(raw);
        char *got = diagnostics_of(path, &r);
        if (strcmp(got, want))
                fail_msg("%s: diagnostics differ\n--- expected\n%s--- got\n%s", path, want, got);
        if (r != NTBF_ECONFIG)
                fail_msg("%s: load returned %d, not NTBF_ECONFIG", path, r);
        free(want);
        free(got);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t list_corpus(char **files)
{
        DIR *dir = opendir(CORPUS);
        size_t n = 0;
        if (!dir)
                return 0;
        for (struct dirent *e; (e = readdir(dir)) != NULL && n < MAX_FILES;) {
                size_t len = strlen(e->d_name);
                if (len > 5 && len < 200 && !strcmp(e->d_name + len - 5, ".yaml")) {
                        files[n] = malloc(PATH_BYTES);
                        snprintf(files[n], PATH_BYTES, CORPUS "/%.200s", e->d_name);
                        n++;
                }
        }
        closedir(dir);
        qsort(files, n, sizeof(*files), cmp_str);
        return n;
}

/* --write: (re)write every .expected from the current output, to be reviewed by hand. */
static int write_expected(char **files, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                char exp[PATH_BYTES];
                int r;
                expected_path(files[i], exp);
                char *out = diagnostics_of(files[i], &r);
                char *got = replace_all(out, backend_list(), BACKENDS);
                free(out);
                FILE *f = fopen(exp, "w");
                if (!f || fputs(got, f) < 0 || fclose(f)) {
                        perror(exp);
                        return 1;
                }
                if (r != NTBF_ECONFIG)
                        fprintf(stderr, "%s: load returned %d, not NTBF_ECONFIG\n", files[i], r);
                free(got);
        }
        return 0;
}

int main(int argc, char **argv)
{
        char *files[MAX_FILES];
        size_t n = list_corpus(files);
        if (n < MIN_FILES) {
                fprintf(stderr, "%s: %zu files, expected at least %d (run from the source root)\n",
                        CORPUS, n, MIN_FILES);
                return 1;
        }
        int r;
        if (argc > 1 && !strcmp(argv[1], "--write")) {
                r = write_expected(files, n);
        } else {
                struct CMUnitTest *tests = calloc(n, sizeof(*tests));
                for (size_t i = 0; i < n; i++)
                        tests[i] = (struct CMUnitTest){.name = files[i] + strlen(CORPUS "/"),
                                                       .test_func = test_file,
                                                       .initial_state = files[i]};
                r = _cmocka_run_group_tests("config_corpus", tests, n, NULL, NULL);
                free(tests);
        }
        for (size_t i = 0; i < n; i++)
                free(files[i]);
        return r;
}
