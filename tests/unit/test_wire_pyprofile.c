/*
 * test_wire_pyprofile.c - the Python-profile reader of `pystats --job`
 * (engine/io/wire_pyprofile.h) on batches the hook's own encoder wrote
 * (the seeds tests/fuzz/corpus_gen_pyprofile.py puts in
 * tests/fuzz/corpus/wire): every field copied exactly, at any alignment;
 * each broken variant refused with a sentence naming the table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire_pyprofile.h"

/* tests/fuzz/corpus/wire/NAME, read whole into *len bytes at offset
 * `shift` of the returned block (to test unaligned input) */
static uint8_t *seed(const char *name, size_t shift, size_t *len)
{
    const char *src = getenv("TW_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/wire/%s",
             src != NULL ? src : TW_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(8192);
    assert_non_null(buf);
    *len = fread(buf + shift, 1, 8192 - shift, f);
    assert_true(*len > 0 && *len < 8192 - shift);
    fclose(f);
    return buf;
}

static tw_wire_status decode(const char *name, size_t shift,
                             tw_wire_pyprofiles **out, char *err, size_t n)
{
    size_t len;
    uint8_t *buf = seed(name, shift, &len);
    tw_wire_status st =
        tw_wire_decode_pyprofiles(buf + shift, len, out, err, n);
    free(buf); /* the result owns its copies */
    return st;
}

static void check_good(const tw_wire_pyprofiles *p)
{
    assert_string_equal(p->job, "job-1");
    assert_string_equal(p->node, "0-host");
    assert_int_equal(p->n, 2);
    const tw_wire_pyprofile *a = &p->items[0], *b = &p->items[1];
    assert_string_equal(a->profiler, "cprofile");
    assert_string_equal(a->timer, "total_time");
    assert_string_equal(a->mode, "TRAIN");
    assert_string_equal(b->mode, "EVAL");
    assert_string_equal(a->start_phase, "STEP_START");
    assert_string_equal(a->end_phase, "FORWARD_PASS_END");
    assert_string_equal(b->start_phase, "FORWARD_PASS_END");
    assert_int_equal(a->start_step, 3);
    assert_int_equal(b->end_step, 1);
    assert_int_equal(a->start_us, 1700000000000000LL);
    assert_int_equal(a->end_us, 1700000000002500LL);
    assert_int_equal(b->start_us, 1700000000009000LL);
    assert_int_equal(a->pid, 4242);
    assert_int_equal(a->functions_cut, 1);
    assert_int_equal(a->stats->nfuncs, 3);
    const tw_pstats_func *f = &a->stats->funcs[0];
    assert_string_equal(f->function, "fib");
    assert_string_equal(f->file, "work.py");
    assert_int_equal(f->line, 2);
    assert_int_equal(f->cc, 4);
    assert_int_equal(f->nc, 9756);
    assert_true(f->tt == 0.03 && f->ct == 0.038);
    assert_int_equal(f->ncallers, 0); /* callers are not copied */
    f = &b->stats->funcs[1];
    assert_string_equal(f->function, "<built-in method builtins.abs>");
    assert_string_equal(f->file, "~");
    assert_int_equal(f->line, 0);
    assert_true(f->tt == 0.0001);
    /* shared wire strings are copied once per profile */
    assert_ptr_equal(a->stats->funcs[0].file, a->stats->funcs[2].file);
}

static void test_good_any_alignment(void **state)
{
    (void)state;
    for (size_t shift = 0; shift < 8; shift++) {
        tw_wire_pyprofiles *p = NULL;
        char err[256] = "";
        assert_int_equal(decode("pyprofile.twm", shift, &p, err, sizeof(err)),
                         TW_WIRE_OK);
        check_good(p);
        tw_wire_pyprofiles_free(p);
    }
}

static void test_start_interval(void **state)
{
    (void)state;
    tw_wire_pyprofiles *p = NULL;
    char err[256] = "";
    assert_int_equal(decode("pyprofile.start.twm", 0, &p, err, sizeof(err)),
                     TW_WIRE_OK);
    assert_int_equal(p->n, 1);
    assert_string_equal(p->items[0].start_phase, "START");
    assert_string_equal(p->items[0].end_phase, "STEP_START");
    tw_wire_pyprofiles_free(p);
}

/* a batch without profiles decodes to none */
static void test_no_profiles(void **state)
{
    (void)state;
    tw_wire_pyprofiles *p = NULL;
    char err[256] = "";
    assert_int_equal(decode("framework.twm", 0, &p, err, sizeof(err)),
                     TW_WIRE_OK);
    assert_int_equal(p->n, 0);
    assert_null(p->items);
    tw_wire_pyprofiles_free(p);
}

static void refused(const char *name, tw_wire_status want, const char *says)
{
    tw_wire_pyprofiles *p = (tw_wire_pyprofiles *)1;
    char err[256] = "";
    tw_wire_status st = decode(name, 0, &p, err, sizeof(err));
    if (st != want || strstr(err, says) == NULL)
        fail_msg("%s: %s (%s), wanted %s with '%s'", name,
                 tw_wire_status_name(st), err, tw_wire_status_name(want), says);
    assert_null(p);
}

static void test_refused(void **state)
{
    (void)state;
    refused("pyprofile.nan.twm", TW_WIRE_BAD_VALUE,
            "python_profiles[0].functions[0] 'f': total_time nan");
    refused("pyprofile.calls.twm", TW_WIRE_BAD_VALUE,
            "'f': 5 primitive calls of 2 in all");
    /* found by fuzz_wire: a name cut short at an inner NUL */
    refused("pyprofile.nul.twm", TW_WIRE_BAD_VALUE,
            "functions[0] '': its name or file holds a NUL byte");
    refused("pyprofile.backwards.twm", TW_WIRE_BAD_VALUE,
            "python_profiles[0]: start_us 1700000000000000 and end_us "
            "1699999999999999 are not an interval");
    /* truncated: the gate's own diagnosis (wire.h) */
    refused("pyprofile.cut40.twm", TW_WIRE_VERIFY_FAILED, "verification");
    refused("pyprofile.cut400.twm", TW_WIRE_VERIFY_FAILED, "verification");
    refused("minimal.bad_identifier.twm", TW_WIRE_BAD_IDENTIFIER,
            "file identifier");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_any_alignment),
        cmocka_unit_test(test_start_interval),
        cmocka_unit_test(test_no_profiles),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
