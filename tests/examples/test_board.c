/*
 * test_board.c - the bulletin board example under the in-process harness,
 * on a fresh temporary directory: create by form, read in batches of ten
 * remembered by the session, delete, and refusal of everything a client
 * could use to leave the directory.  It must never touch the build tree's
 * own message directory.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sandlet/test.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fixture {
    char dir[64];
    sl_test *t;
} fixture;

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/sandlet-board-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    const char *b = getenv("SANDLET_BUILDDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/examples/board/.libs/board.so", b ? b : ".");
    const char *params[] = {"dir", f->dir, NULL};
    f->t = sl_test_load(path, params);
    *state = f;
    return f->t ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sl_test_free(f->t);
    remove_dir(f->dir);
    free(f);
    return 0;
}

/* Posts a message; returns its id from the Location header, or -1. */
static long post(sl_test *t, const char *author, const char *subject, const char *text)
{
    sl_test_request *rq = sl_test_request_new(t, "POST", "/board");
    sl_test_request_form(rq, "action", "post");
    sl_test_request_form(rq, "author", author);
    sl_test_request_form(rq, "subject", subject);
    sl_test_request_form(rq, "text", text);
    sl_test_response *r = sl_test_run(rq);
    sl_test_request_free(rq);
    if (!r || sl_test_status(r) != 201)
        return -1;
    const char *loc = sl_test_header(r, "Location");
    const char *p = loc ? strstr(loc, "id=") : NULL;
    return p ? strtol(p + 3, NULL, 10) : -1;
}

static int count_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void test_create_read_delete(void **state)
{
    fixture *f = *state;
    sl_test *t = f->t;
    assert_int_equal(post(t, "Ada", "Hello <all>", "first line\nsecond & last"), 1);
    assert_int_equal(post(t, "Bob", "Re: hello", "hi"), 2);
    assert_int_equal(count_files(f->dir), 2);
    char path[512];
    snprintf(path, sizeof(path), "%s/1.msg", f->dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);

    sl_test_response *r = sl_test_get(t, "/board?action=show&id=1");
    assert_int_equal(sl_test_status(r), 200);
    assert_non_null(strstr(sl_test_body_str(r), "#1 Hello &lt;all&gt;"));
    assert_non_null(strstr(sl_test_body_str(r), "first line\nsecond &amp; last"));

    r = sl_test_post_form(t, "/board", "action=delete&id=1");
    assert_int_equal(sl_test_status(r), 200);
    assert_int_equal(count_files(f->dir), 1);
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/board", "action=delete&id=1")), 404);
    assert_int_equal(sl_test_status(sl_test_get(t, "/board?action=show&id=1")), 404);
    /* Ids are never reused while higher ones exist. */
    assert_int_equal(post(t, "Cy", "again", "x"), 3);
}

static void test_batches_of_ten(void **state)
{
    fixture *f = *state;
    sl_test *t = f->t;
    char subject[32];
    for (int i = 1; i <= 23; i++) {
        snprintf(subject, sizeof(subject), "subject %d", i);
        assert_int_equal(post(t, "Ada", subject, "text"), i);
    }
    sl_test_response *r = sl_test_get(t, "/board?action=read");
    assert_int_equal(sl_test_status(r), 200);
    const char *b = sl_test_body_str(r);
    assert_non_null(strstr(b, "#1 subject 1<"));
    assert_non_null(strstr(b, "#10 subject 10<"));
    assert_null(strstr(b, "#11 "));
    assert_non_null(strstr(b, "10 shown"));
    assert_string_equal(sl_test_session_str(t, "last"), "10");

    r = sl_test_get(t, "/board?action=read");
    b = sl_test_body_str(r);
    assert_null(strstr(b, "#10 "));
    assert_non_null(strstr(b, "#11 subject 11<"));
    assert_non_null(strstr(b, "#20 subject 20<"));
    assert_string_equal(sl_test_session_str(t, "last"), "20");

    /* A message deleted before it was read is skipped. */
    assert_int_equal(sl_test_status(sl_test_post_form(t, "/board", "action=delete&id=22")), 200);
    r = sl_test_get(t, "/board?action=read");
    b = sl_test_body_str(r);
    assert_non_null(strstr(b, "#21 subject 21<"));
    assert_null(strstr(b, "#22 "));
    assert_non_null(strstr(b, "#23 subject 23<"));
    assert_non_null(strstr(b, "2 shown"));
    assert_string_equal(sl_test_session_str(t, "last"), "23");

    r = sl_test_get(t, "/board?action=read");
    assert_non_null(strstr(sl_test_body_str(r), "No new messages."));

    r = sl_test_get(t, "/board?action=read&from=0");
    assert_non_null(strstr(sl_test_body_str(r), "#1 subject 1<"));
    assert_string_equal(sl_test_session_str(t, "last"), "10");

    /* Another client (empty jar) starts from the beginning. */
    sl_test_jar_clear(t);
    r = sl_test_get(t, "/board?action=read&from=15");
    b = sl_test_body_str(r);
    assert_non_null(strstr(b, "#16 subject 16<"));
    assert_null(strstr(b, "#15 "));
}

static void test_refuses_what_could_escape(void **state)
{
    fixture *f = *state;
    sl_test *t = f->t;
    assert_int_equal(post(t, "Ada", "kept", "this one stays"), 1);
    static const char *const bad_ids[] = {
        "action=delete&id=..%2F..%2Fetc%2Fpasswd",
        "action=delete&id=1.msg",
        "action=delete&id=-1",
        "action=delete&id=01",
        "action=delete&id=1%2F",
        "action=delete&id=9999999999999",
        "action=delete&id=+1",
        "action=delete&id=",
        "action=delete",
    };
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++)
        assert_int_equal(sl_test_status(sl_test_post_form(t, "/board", bad_ids[i])), 400);
    assert_int_equal(sl_test_status(sl_test_get(t, "/board?action=show&id=..%2F1")), 400);
    assert_int_equal(sl_test_status(sl_test_get(t, "/board?action=read&from=x")), 400);
    assert_int_equal(count_files(f->dir), 1);

    /* Missing, too long, or control characters in a field. */
    char big[4100];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(post(t, "", "s", "t"), -1);
    assert_int_equal(post(t, "a\nb", "s", "t"), -1);
    assert_int_equal(post(t, "a", "s\r", "t"), -1);
    assert_int_equal(post(t, "a", "s", big), -1);
    assert_int_equal(post(t, "a", "s", "bell\a"), -1);
    assert_int_equal(count_files(f->dir), 1);
    /* Deleting through GET is not offered. */
    assert_int_equal(sl_test_status(sl_test_get(t, "/board?action=delete&id=1")), 400);
    assert_int_equal(count_files(f->dir), 1);
}

static void test_init_needs_an_absolute_dir(void **state)
{
    (void)state;
    const char *b = getenv("SANDLET_BUILDDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/examples/board/.libs/board.so", b ? b : ".");
    const char *relative[] = {"dir", "messages", NULL};
    assert_null(sl_test_load(path, relative));
    assert_null(sl_test_load(path, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_read_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batches_of_ten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_what_could_escape, setup, teardown),
        cmocka_unit_test(test_init_needs_an_absolute_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
