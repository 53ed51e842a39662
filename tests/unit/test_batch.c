/* test_batch.c - tw_batch_samples_copy and tw_batch_shell_copy (batch.h):
 * the tight copy a job buffers holds the same samples and strings in less
 * memory, and batches with anything but samples are not copied. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "batch.h"

enum { NSERIES = 214 }; /* an 8-GPU, 96-core agent batch */

static tw_batch *agent_batch(void)
{
    tw_batch *b = tw_batch_new();
    assert_non_null(b);
    b->job = tw_arena_strdup(&b->arena, "job-1");
    b->node = tw_arena_strdup(&b->arena, "algo-17");
    b->file_path = tw_arena_strdup(&b->arena, "/data/1591160699.algo-17.json");
    b->seq = 42;
    b->file_ts_us = 1591160699000000;
    b->series = tw_arena_alloc(&b->arena, NSERIES * sizeof(*b->series));
    b->samples = tw_arena_alloc(&b->arena, NSERIES * sizeof(*b->samples));
    assert_non_null(b->series);
    assert_non_null(b->samples);
    for (size_t k = 0; k < NSERIES; k++) {
        char name[16];
        snprintf(name, sizeof(name), "cpu%zu", k);
        b->series[k] = (tw_batch_series){
            tw_arena_strdup(&b->arena, "cpu"), tw_arena_strdup(&b->arena, name),
            tw_arena_strdup(&b->arena, "CPUUtilization")};
        b->samples[k] = (tw_sample){.ts = 1591160699.5,
                                    .value = (double)k * 0.25,
                                    .series = (uint32_t)(1000 + k),
                                    .flags = k % 3 == 0};
    }
    b->nseries = b->nsamples = NSERIES;
    return b;
}

static void test_copy_is_tight_and_equal(void **st)
{
    (void)st;
    tw_batch *b = agent_batch();
    tw_batch *c = tw_batch_samples_copy(b);
    assert_non_null(c);
    assert_string_equal(c->job, b->job);
    assert_string_equal(c->node, b->node);
    assert_string_equal(c->file_path, b->file_path);
    assert_int_equal(c->seq, b->seq);
    assert_int_equal(c->file_ts_us, b->file_ts_us);
    assert_int_equal(c->nsamples, b->nsamples);
    assert_memory_equal(c->samples, b->samples,
                        b->nsamples * sizeof(*b->samples));
    assert_null(c->series);
    assert_int_equal(c->nseries, 0);
    /* one block of exactly what it holds, well under the original's */
    size_t want = NSERIES * sizeof(tw_sample) + 16 + 16 + 32;
    assert_int_equal(tw_arena_capacity(&c->arena), want);
    assert_true(tw_arena_capacity(&c->arena) * 2 <
                tw_arena_capacity(&b->arena));
    tw_batch_free(c);

    /* NULL strings stay NULL; no samples is fine */
    b->file_path = NULL;
    b->nsamples = 0;
    c = tw_batch_samples_copy(b);
    assert_non_null(c);
    assert_null(c->file_path);
    assert_int_equal(c->nsamples, 0);
    tw_batch_free(c);
    tw_batch_free(b);
}

static void test_not_samples_only(void **st)
{
    (void)st;
    tw_batch *b = agent_batch();
    b->nevents = 1;
    assert_null(tw_batch_samples_copy(b));
    b->nevents = 0;
    b->nmarkers = 1;
    assert_null(tw_batch_samples_copy(b));
    b->nmarkers = 0;
    b->ntensors = 1;
    assert_null(tw_batch_samples_copy(b));
    b->ntensors = 0;
    b->npython_profiles = 1;
    assert_null(tw_batch_samples_copy(b));
    tw_batch_free(b);
}

/* The shell of a packed batch: the strings and ids, `extra` bytes of the
 * same block for the caller, no samples. */
static void test_shell_copy(void **st)
{
    (void)st;
    tw_batch *b = agent_batch();
    uint8_t *at = NULL;
    tw_batch *c = tw_batch_shell_copy(b, 700, &at);
    assert_non_null(c);
    assert_non_null(at);
    memset(at, 0x5a, 700); /* writable, ASan checks the bounds */
    assert_string_equal(c->node, b->node);
    assert_string_equal(c->file_path, b->file_path);
    assert_int_equal(c->seq, b->seq);
    assert_int_equal(c->file_ts_us, b->file_ts_us);
    assert_null(c->samples);
    assert_int_equal(c->nsamples, 0);
    assert_int_equal(tw_arena_capacity(&c->arena), 704 + 16 + 16 + 32);
    tw_batch_free(c);
    c = tw_batch_shell_copy(b, 0, &at);
    assert_non_null(c);
    assert_null(at);
    tw_batch_free(c);
    b->nevents = 1;
    assert_null(tw_batch_shell_copy(b, 10, &at));
    tw_batch_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_is_tight_and_equal),
        cmocka_unit_test(test_not_samples_only),
        cmocka_unit_test(test_shell_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
