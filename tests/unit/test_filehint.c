/*
 * test_filehint.c - development mode's file hints (filehint.c): the
 * wrappers of open(), fopen() and the others are the C library's calls
 * (results, errno, created files' modes) and, once started, note the
 * first call a request was refused and count the others.  This program
 * links them as sandletd does, so its own calls go through them.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox/filehint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sandlet-filehint-XXXXXX");
    if (!mkdtemp(dir) || chmod(dir, 0755) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Before start, and after: the calls do what the C library's do. */
static void test_pass_through(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/made", dir);
    umask(022);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    close(fd);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    errno = 0;
    assert_int_equal(open(path, O_WRONLY | O_CREAT | O_EXCL, 0640), -1);
    assert_int_equal(errno, EEXIST);
    fd = openat(AT_FDCWD, path, O_RDONLY);
    assert_true(fd >= 0);
    close(fd);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4] = "";
    assert_int_equal(fread(buf, 1, 3, f), 3);
    assert_string_equal(buf, "abc");
    fclose(f);
    errno = 0;
    assert_null(fopen("/nonexistent/sandlet", "r"));
    assert_int_equal(errno, ENOENT);
    DIR *d = opendir(dir);
    assert_non_null(d);
    closedir(d);
    char sub[160], to[160];
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    snprintf(to, sizeof(to), "%s/moved", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(truncate(path, 1), 0);
    assert_int_equal(rename(path, to), 0);
    assert_int_equal(unlink(to), 0);
    fd = creat(path, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(unlink(path), 0);
}

/* Started, in a process that is refused (a file of mode 0, as nobody
 * when we are root): the first refused call is noted, the rest counted,
 * errno kept; begin forgets. */
static void test_notes_refusals(void **state)
{
    (void)state;
    char secret[128];
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    int fd = open(secret, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(secret, 0), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
            _exit(10);
        if (chdir(dir) < 0)
            _exit(11);
        sandlet_filehint_start(dir);
        sandlet_filehint h;
        sandlet_filehint_begin();
        if (sandlet_filehint_end(&h))
            _exit(12); /* nothing yet */
        errno = 0;
        if (open("secret", O_RDONLY) != -1 || errno != EACCES)
            _exit(13);
        if (fopen(secret, "w") != NULL || errno != EACCES)
            _exit(14);
        if (open("/nonexistent/x", O_RDONLY) != -1 || errno != ENOENT)
            _exit(15); /* not a refusal: not noted */
        if (!sandlet_filehint_end(&h))
            _exit(16);
        char want[160];
        snprintf(want, sizeof(want), "%s/secret", dir);
        if (strcmp(h.call, "open") != 0 || strcmp(h.path, want) != 0 || h.write || h.relative ||
            h.err != EACCES || h.more != 1)
            _exit(17);
        sandlet_filehint_begin();
        if (sandlet_filehint_end(&h))
            _exit(18);
        /* Relative to a descriptor: where it lies is not known. */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        if (dfd < 0 || openat(dfd, "secret", O_RDWR) != -1 || !sandlet_filehint_end(&h) ||
            !h.relative || !h.write || strcmp(h.path, "secret") != 0)
            _exit(19);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_through),
        cmocka_unit_test(test_notes_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
