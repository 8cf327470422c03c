/*
 * replay.c - runs a fuzz target over its seed corpus without libFuzzer,
 * so that make check (gcc, valgrind, the sanitizer build) checks every
 * target's invariants on the seeds and the targets keep compiling.
 *
 * The program is named replay_NAME and reads every file of
 * $SANDLET_SRCDIR/tests/fuzz/corpus/NAME (or of the directories and files
 * given as arguments), calling the target once per file, as libFuzzer
 * would; a violated invariant aborts.  It must stay a plain driver: what
 * is checked lives in the targets.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? 2 * cap : 4096;
            uint8_t *p = realloc(data, ncap);
            if (!p) {
                free(data);
                fclose(f);
                return -1;
            }
            data = p;
            cap = ncap;
        }
        size_t n = fread(data + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(data);
        return -1;
    }
    /* An exact-size copy, so that a read past the input is seen by ASan
     * and valgrind as it would be under libFuzzer. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(data);
        return -1;
    }
    if (len)
        memcpy(exact, data, len);
    free(data);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int run_path(const char *path, unsigned *count)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return run_file(path);
    }
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: cannot list %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.' && rc == 0) {
            char file[4096];
            int m = snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
            if (m < 0 || (size_t)m >= sizeof(file))
                rc = -1;
            else
                rc = run_path(file, count);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strncmp(base, "lt-", 3) == 0)
        base += 3; /* libtool's wrapper */
    const char *name = strncmp(base, "replay_", 7) == 0 ? base + 7 : base;
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    unsigned count = 0;
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc && rc == 0; i++)
            rc = run_path(argv[i], &count);
    } else {
        const char *src = getenv("SANDLET_SRCDIR");
        char dir[4096];
        int m = snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", src ? src : ".", name);
        if (m < 0 || (size_t)m >= sizeof(dir))
            return 1;
        rc = run_path(dir, &count);
    }
    if (rc < 0 || count == 0) {
        fprintf(stderr, "replay %s: failed (%u inputs)\n", name, count);
        return 1;
    }
    printf("replay %s: %u inputs, every invariant held\n", name, count);
    return 0;
}
