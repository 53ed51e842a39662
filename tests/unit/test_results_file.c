/* test_results_file.c - results file names and the results writer
 * (results_file.h): the name mapping (examples, decoding back to the id,
 * long ids cut with a hash, never inside an escape), writes (bytes, no
 * temporary file left), the same results again (no new file), other
 * results of the same id (a ~v<n> file, the first untouched), a folder,
 * FIFO or dangling link under the name (a version, never waited on), a
 * path too long for the names (an error, not a truncated path), a write
 * into a folder that is gone (held, one failure counted, backoff doubling
 * to its cap, landed by a retry once the folder is back, a retry forced
 * at INT64_MAX), results of one id kept in order while held, and a
 * writer freed with results held. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "results_file.h"

/* ---- names -------------------------------------------------------------- */

/* A digit of an escape (upper case); -1 for anything else. */
static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int is_lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* The id a name that was not cut stands for, into out; -1 when the name
 * is not one tw_results_file_name writes. */
static int decode(const char *name, char *out, size_t len)
{
    size_t o = 0;
    if (strcmp(name, "~") == 0) {
        out[0] = '\0';
        return 0;
    }
    for (const char *p = name; *p != '\0'; p++) {
        if (o + 1 >= len || *p == '~')
            return -1;
        if (*p != '%') {
            out[o++] = *p;
            continue;
        }
        if (hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
            out[o++] = (char)(hexval(p[1]) * 16 + hexval(p[2]));
            p += 2;
        } else {
            return -1;
        }
    }
    out[o] = '\0';
    return 0;
}

static void expect_name(const char *id, const char *want)
{
    char name[TW_RESULTS_NAME_LEN];
    tw_results_file_name(id, name);
    assert_string_equal(name, want);
}

static void name_examples(void **state)
{
    (void)state;
    expect_name("job-1.run_2", "job-1.run_2"); /* as they always were */
    expect_name("col/x", "col%2Fx");
    expect_name("col_x", "col_x");
    expect_name("col%2Fx", "col%252Fx");
    expect_name("", "~");
    expect_name("~", "%7E");
    expect_name(".", "%2E");
    expect_name("..", "%2E.");
    expect_name(".hidden", "%2Ehidden");
    expect_name("a b\xc3\xa9", "a%20b%C3%A9");
    expect_name("x.json", "x.json");
}

/* Random ids of 0..60 bytes from a small alphabet that stresses the
 * escapes: distinct ids give distinct names, and each decodes back. */
static void name_injective(void **state)
{
    (void)state;
    static const char alpha[] = "a_.%2F/-~\x01\xff";
    enum { N = 3000 };
    char(*ids)[64] = calloc(N, 64);
    char(*names)[TW_RESULTS_NAME_LEN] = calloc(N, TW_RESULTS_NAME_LEN);
    assert_non_null(ids);
    assert_non_null(names);
    unsigned seed = 17;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t len = (seed >> 16) % 61;
        for (size_t k = 0; k < len; k++) {
            seed = seed * 1103515245u + 12345u;
            ids[i][k] = alpha[(seed >> 16) % (sizeof(alpha) - 1)];
        }
        ids[i][len] = '\0';
        tw_results_file_name(ids[i], names[i]);
        char back[64];
        assert_int_equal(decode(names[i], back, sizeof(back)), 0);
        assert_string_equal(back, ids[i]);
        assert_true(names[i][0] != '.');
        assert_null(strchr(names[i], '/'));
    }
    for (int i = 0; i < N; i++)
        for (int k = i + 1; k < N; k++)
            if (strcmp(ids[i], ids[k]) != 0)
                assert_string_not_equal(names[i], names[k]);
    free(ids);
    free(names);
}

static void name_long_ids(void **state)
{
    (void)state;
    char id[400], name[TW_RESULTS_NAME_LEN], name2[TW_RESULTS_NAME_LEN];
    /* exactly TW_RESULTS_NAME_MAX bytes: kept whole */
    memset(id, 'a', TW_RESULTS_NAME_MAX);
    id[TW_RESULTS_NAME_MAX] = '\0';
    tw_results_file_name(id, name);
    assert_string_equal(name, id);
    /* one more: cut, "~h" and 16 hex digits */
    memset(id, 'a', TW_RESULTS_NAME_MAX + 1);
    id[TW_RESULTS_NAME_MAX + 1] = '\0';
    tw_results_file_name(id, name);
    assert_int_equal(strlen(name), TW_RESULTS_NAME_MAX);
    assert_memory_equal(name + TW_RESULTS_NAME_MAX - 18, "~h", 2);
    for (size_t i = TW_RESULTS_NAME_MAX - 16; i < TW_RESULTS_NAME_MAX; i++)
        assert_true(is_lower_hex(name[i]));
    /* differing past the cut: other hashes */
    id[TW_RESULTS_NAME_MAX] = 'b';
    tw_results_file_name(id, name2);
    assert_string_not_equal(name, name2);
    assert_memory_equal(name, name2, TW_RESULTS_NAME_MAX - 18);
    /* 3-byte escapes all along: the cut never splits one, so the part
     * before "~h" decodes */
    for (int shift = 0; shift < 3; shift++) {
        memset(id, 'a', (size_t)shift);
        memset(id + shift, '/', 300);
        id[shift + 300] = '\0';
        tw_results_file_name(id, name);
        size_t len = strlen(name);
        assert_true(len <= TW_RESULTS_NAME_MAX);
        assert_memory_equal(name + len - 18, "~h", 2);
        name[len - 18] = '\0';
        char back[300];
        assert_int_equal(decode(name, back, sizeof(back)), 0);
        assert_true(strlen(back) > 0);
        assert_memory_equal(back, id, strlen(back)); /* the id's start */
    }
}

/* ---- the writer --------------------------------------------------------- */

typedef struct fx {
    char dir[64];
    tw_results_writer *w;
} fx;

static int fx_setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/tw_results_file_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char err[256];
    if (tw_results_writer_new(f->dir, &f->w, err, sizeof(err)) != TW_OK)
        fail_msg("tw_results_writer_new: %s", err);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    fx *f = *state;
    tw_results_writer_free(f->w);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s %s.away", f->dir, f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static tw_results_stats stats(const fx *f)
{
    tw_results_stats s;
    tw_results_get_stats(f->w, &s);
    return s;
}

/* File `name` of the folder holds exactly `want` and a newline. */
static void expect_file(const fx *f, const char *name, const char *want)
{
    char path[256], buf[4096];
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    FILE *in = fopen(path, "rb");
    if (in == NULL)
        fail_msg("%s: missing", path);
    size_t n = fread(buf, 1, sizeof(buf) - 1, in);
    fclose(in);
    buf[n] = '\0';
    size_t wl = strlen(want);
    assert_int_equal(n, wl + 1);
    assert_memory_equal(buf, want, wl);
    assert_int_equal(buf[wl], '\n');
}

/* Entries of the folder (temporary files included). */
static int entries(const fx *f)
{
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static int put(fx *f, const char *id, const char *json, int64_t now)
{
    return tw_results_put(f->w, id, json, strlen(json), now);
}

static void writes_file(void **state)
{
    fx *f = *state;
    assert_int_equal(put(f, "col/x", "{\"job\": \"col/x\"}", 0), TW_OK);
    expect_file(f, "col%2Fx.json", "{\"job\": \"col/x\"}");
    assert_int_equal(entries(f), 1); /* no temporary file left */
    tw_results_stats s = stats(f);
    assert_int_equal(s.written, 1);
    assert_int_equal(s.failures, 0);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.pending_bytes, 0);
    assert_false(tw_results_pending_job(f->w, "col/x"));
    assert_int_equal(tw_results_next_retry_us(f->w), INT64_MAX);
}

static void same_bytes_again(void **state)
{
    fx *f = *state;
    assert_int_equal(put(f, "j", "{\"a\": 1}", 0), TW_OK);
    assert_int_equal(put(f, "j", "{\"a\": 1}", 0), TW_OK);
    assert_int_equal(entries(f), 1);
    expect_file(f, "j.json", "{\"a\": 1}");
    assert_int_equal(stats(f).written, 2);
    assert_int_equal(stats(f).versions, 0);
}

static void other_bytes_versioned(void **state)
{
    fx *f = *state;
    assert_int_equal(put(f, "j", "{\"a\": 1}", 0), TW_OK);
    assert_int_equal(put(f, "j", "{\"a\": 2}", 0), TW_OK);
    assert_int_equal(put(f, "j", "{\"a\": 3}", 0), TW_OK);
    assert_int_equal(put(f, "j", "{\"a\": 2}", 0), TW_OK); /* = ~v2 */
    expect_file(f, "j.json", "{\"a\": 1}");
    expect_file(f, "j~v2.json", "{\"a\": 2}");
    expect_file(f, "j~v3.json", "{\"a\": 3}");
    assert_int_equal(entries(f), 3);
    assert_int_equal(stats(f).written, 4);
    assert_int_equal(stats(f).versions, 3);
}

/* Something that is not a regular file under the name (a folder, a FIFO,
 * a dangling link): never replaced, never waited on. */
static void name_taken(void **state)
{
    fx *f = *state;
    char path[256];
    snprintf(path, sizeof(path), "%s/d.json", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/p.json", f->dir);
    assert_int_equal(mkfifo(path, 0644), 0);
    snprintf(path, sizeof(path), "%s/l.json", f->dir);
    assert_int_equal(symlink("/nonexistent/x", path), 0);
    assert_int_equal(put(f, "d", "{}", 0), TW_OK);
    assert_int_equal(put(f, "p", "{}", 0), TW_OK);
    assert_int_equal(put(f, "l", "{}", 0), TW_OK);
    expect_file(f, "d~v2.json", "{}");
    expect_file(f, "p~v2.json", "{}");
    expect_file(f, "l~v2.json", "{}");
    assert_int_equal(stats(f).versions, 3);
}

/* A folder whose path leaves no room for the names: an error naming it,
 * not a file written under a truncated path. */
static void path_too_long(void **state)
{
    (void)state;
    tw_results_writer *w = NULL;
    char dir[PATH_MAX], err[64];
    memset(dir, 'd', sizeof(dir) - 1);
    dir[0] = '/';
    dir[sizeof(dir) - 1] = '\0';
    assert_int_equal(tw_results_writer_new(dir, &w, err, sizeof(err)), TW_OK);
    FILE *log = tmpfile();
    assert_non_null(log);
    tw_log_set_stream(log);
    assert_int_equal(tw_results_put(w, "j", "{}", 2, 0), TW_RESULTS_HELD);
    tw_results_stats s;
    tw_results_get_stats(w, &s);
    assert_int_equal(s.failures, 1);
    tw_results_writer_free(w); /* its ERROR: lost */
    tw_log_set_stream(NULL);
    rewind(log);
    char line[8192] = "";
    assert_non_null(fgets(line, sizeof(line), log));
    fclose(log);
    assert_non_null(strstr(line, "WARN"));
    /* (the errno text is past the 2048 bytes a log line keeps) */
    assert_non_null(strstr(line, "results not written (name a file in /ddd"));
}

static void replace_by_file(const fx *f)
{
    char away[128];
    snprintf(away, sizeof(away), "%s.away", f->dir);
    assert_int_equal(rename(f->dir, away), 0);
    int fd = open(f->dir, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static void put_back(const fx *f)
{
    char away[128];
    snprintf(away, sizeof(away), "%s.away", f->dir);
    assert_int_equal(unlink(f->dir), 0);
    assert_int_equal(rename(away, f->dir), 0);
}

static void held_retried_with_backoff(void **state)
{
    fx *f = *state;
    const int64_t t0 = 5000000;
    replace_by_file(f);
    assert_int_equal(put(f, "j", "{\"a\": 1}", t0), TW_RESULTS_HELD);
    tw_results_stats s = stats(f);
    assert_int_equal(s.failures, 1);
    assert_int_equal(s.retries, 0);
    assert_int_equal(s.pending, 1);
    assert_int_equal(s.pending_bytes, strlen("{\"a\": 1}") + 1);
    assert_true(tw_results_pending_job(f->w, "j"));
    assert_false(tw_results_pending_job(f->w, "k"));
    /* not before its backoff */
    assert_int_equal(tw_results_retry(f->w, t0 + 99999), 1);
    assert_int_equal(stats(f).failures, 1);
    /* the backoff doubles from 100 ms to its 30 s cap */
    int64_t now = t0, wait = TW_RESULTS_BACKOFF_MIN_US;
    for (int i = 0; i < 12; i++) {
        assert_int_equal(tw_results_next_retry_us(f->w), now + wait);
        now += wait;
        assert_int_equal(tw_results_retry(f->w, now), 1);
        wait = wait * 2 > TW_RESULTS_BACKOFF_MAX_US ? TW_RESULTS_BACKOFF_MAX_US
                                                    : wait * 2;
    }
    assert_int_equal(wait, TW_RESULTS_BACKOFF_MAX_US);
    assert_int_equal(stats(f).failures, 13);
    assert_int_equal(stats(f).retries, 12);
    put_back(f);
    now = tw_results_next_retry_us(f->w);
    assert_int_equal(tw_results_retry(f->w, now), 0);
    s = stats(f);
    assert_int_equal(s.written, 1);
    assert_int_equal(s.retries, 13);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.pending_bytes, 0);
    assert_false(tw_results_pending_job(f->w, "j"));
    expect_file(f, "j.json", "{\"a\": 1}");
    assert_int_equal(entries(f), 1);
}

/* now_us = INT64_MAX tries every held result (before exiting), and the
 * next attempt's time saturates instead of overflowing. */
static void retry_forced(void **state)
{
    fx *f = *state;
    replace_by_file(f);
    assert_int_equal(put(f, "j", "{}", 0), TW_RESULTS_HELD);
    assert_int_equal(tw_results_retry(f->w, INT64_MAX), 1);
    assert_int_equal(stats(f).failures, 2);
    assert_int_equal(tw_results_next_retry_us(f->w), INT64_MAX);
    put_back(f);
    assert_int_equal(tw_results_retry(f->w, INT64_MAX), 0);
    expect_file(f, "j.json", "{}");
}

/* Two results of one id while the first is held: the second waits for
 * it, and they land in order (the first as j.json). */
static void held_in_order(void **state)
{
    fx *f = *state;
    replace_by_file(f);
    assert_int_equal(put(f, "j", "{\"a\": 1}", 0), TW_RESULTS_HELD);
    assert_int_equal(put(f, "j", "{\"a\": 2}", 0), TW_RESULTS_HELD);
    assert_int_equal(put(f, "k", "{\"b\": 1}", 0), TW_RESULTS_HELD);
    assert_int_equal(stats(f).failures, 2); /* j's second was not tried */
    put_back(f);
    assert_int_equal(tw_results_retry(f->w, INT64_MAX / 2), 0);
    expect_file(f, "j.json", "{\"a\": 1}");
    expect_file(f, "j~v2.json", "{\"a\": 2}");
    expect_file(f, "k.json", "{\"b\": 1}");
    assert_int_equal(stats(f).written, 3);
}

/* Freed with results held: they are named in an ERROR, and nothing leaks
 * (valgrind). */
static void freed_while_held(void **state)
{
    fx *f = *state;
    replace_by_file(f);
    assert_int_equal(put(f, "j", "{}", 0), TW_RESULTS_HELD);
    FILE *log = tmpfile();
    assert_non_null(log);
    tw_log_set_stream(log);
    tw_results_writer_free(f->w);
    f->w = NULL;
    tw_log_set_stream(NULL);
    rewind(log);
    char line[1024] = "";
    assert_non_null(fgets(line, sizeof(line), log));
    fclose(log);
    assert_non_null(strstr(line, "ERROR"));
    assert_non_null(strstr(line, "job j: results never written"));
    put_back(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(name_examples),
        cmocka_unit_test(name_injective),
        cmocka_unit_test(name_long_ids),
        cmocka_unit_test_setup_teardown(writes_file, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(same_bytes_again, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(other_bytes_versioned, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(name_taken, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(path_too_long, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(held_retried_with_backoff, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(retry_forced, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(held_in_order, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(freed_while_held, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
