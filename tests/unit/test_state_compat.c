/* Checkpoints written by earlier builds still restore: the fuzz_state seed
 * corpus (tests/fuzz/corpus/state/) holds every built-in rule's part of a
 * real job as stored by the build before the compact checkpoint forms
 * (end.rule.<k>.stored: fixed-width count maps "CMAP", StepOutlier
 * "SO01", plain rings) and by this one (compact-end.rule.<k>.stored:
 * "CMA2", "SO02", compact rings). Each must restore into a fresh job, save
 * again, and that save must restore too. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include "../fuzz/fuzz_state.h"

typedef struct saved {
    unsigned char *data;
    size_t len;
    char part[32];
} saved;

static int keep_part(void *ud, const char *part, const void *data, size_t len)
{
    saved *s = ud;
    if (strcmp(part, s->part) != 0)
        return TW_OK;
    free(s->data);
    s->data = malloc(len ? len : 1);
    if (s->data == NULL)
        return TW_ERR;
    memcpy(s->data, data, len);
    s->len = len;
    return TW_OK;
}

static void restore_ok(fuzz_state_setup *su, const char *file, const char *part,
                       const unsigned char *blob, size_t len, saved *out)
{
    tw_job *j = NULL;
    char err[1024];
    assert_int_equal(tw_job_new(FUZZ_STATE_JOB, &su->cfg, su->reg, su->specs,
                                su->nspecs, &j, err, sizeof(err)),
                     TW_OK);
    err[0] = '\0';
    int rc = tw_job_restore_part(j, part, blob, len, err, sizeof(err));
    if (rc != TW_OK)
        fail_msg("%s (%s): %s", file, part, err);
    if (out != NULL) {
        snprintf(out->part, sizeof(out->part), "%s", part);
        assert_int_equal(tw_job_save(j, 0, keep_part, out, err, sizeof(err)),
                         TW_OK);
        assert_non_null(out->data);
    }
    tw_job_free(j);
}

/* The seeds were written by a job of the 13 built-in rules of their day,
 * in the registry's (alphabetical) order: "rule <k> of 13" in each part's
 * header. The job here must have exactly those rules, in that order, or
 * every part is refused for naming another rule set. */
static const char *const seed_rules[] = {
    "BatchSize",          "CPUBottleneck",         "Dataloader",
    "GPUMemoryIncrease",  "IOBottleneck",          "LoadBalancing",
    "LowGPUUtilization",  "MaxInitializationTime", "OverallFrameworkMetrics",
    "OverallSystemUsage", "ProfilerReport",        "StepOutlier",
    "Straggler"};

static void seed_rule_set(fuzz_state_setup *su)
{
    size_t n = sizeof(seed_rules) / sizeof(seed_rules[0]);
    for (size_t i = 0; i < n; i++)
        su->specs[i] = (tw_rule_spec){.rule = seed_rules[i]};
    su->nspecs = n;
}

static void test_old_and_compact_parts_restore(void **st)
{
    (void)st;
    const char *src = getenv("TW_SOURCE_DIR");
    assert_non_null(src);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/state", src);
    fuzz_state_setup su;
    assert_int_equal(fuzz_state_setup_init(&su), 0);
    seed_rule_set(&su);
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t old_parts = 0, compact_parts = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        int compact = strncmp(name, "compact-", 8) == 0;
        const char *base = compact ? name + 8 : name;
        size_t n = strlen(base);
        if (strncmp(base, "end.rule.", 9) != 0 || n < 7 ||
            strcmp(base + n - 7, ".stored") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        unsigned char buf[1 << 16];
        size_t len = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        assert_true(len > 2 && len < sizeof(buf));
        assert_true(buf[0] > 0 && (buf[1] & 1) == 0); /* a stored rule part */
        char part[32];
        snprintf(part, sizeof(part), "rule.%zu",
                 (size_t)(buf[0] - 1) % su.nspecs);
        saved again = {0};
        restore_ok(&su, name, part, buf + 2, len - 2, &again);
        restore_ok(&su, name, part, again.data, again.len, NULL);
        free(again.data);
        if (compact)
            compact_parts++;
        else
            old_parts++;
    }
    closedir(d);
    assert_int_equal(old_parts, su.nspecs);
    assert_true(compact_parts > 0);
    tw_registry_free(su.reg);
}

/* A seed's whole stored value: as written, or sealed as fuzz_state.c does
 * (mode bit 0: a payload of version 1 + bits 1-2). */
static unsigned char *seed_blob(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char in[1 << 16];
    size_t n = fread(in, 1, sizeof(in), f);
    fclose(f);
    assert_true(n > 2 && n < sizeof(in));
    assert_int_equal(in[0], 0); /* a core part */
    size_t body = n - 2;
    unsigned char *blob = malloc(body + 20);
    assert_non_null(blob);
    if ((in[1] & 1) == 0) {
        memcpy(blob, in + 2, body);
        *len = body;
        return blob;
    }
    unsigned version = 1u + ((in[1] >> 1) & 3u);
    uint32_t crc = (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), in + 2, body);
    const uint64_t fields[4] = {0x434a5754u, version, body, crc};
    const int widths[4] = {4, 4, 8, 4}; /* magic, version + flags 0, ... */
    size_t at = 0;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < widths[k]; i++)
            blob[at++] = (unsigned char)(fields[k] >> (8 * i));
    memcpy(blob + 20, in + 2, body);
    *len = body + 20;
    return blob;
}

/* The core parts of every version in the corpus (version 2: mid.core,
 * end.core; version 4, compact buffered batches: v4-mid.core, v4-end.core)
 * restore, save again in this build's version, and that restores too. */
static void test_old_and_new_cores_restore(void **st)
{
    (void)st;
    const char *src = getenv("TW_SOURCE_DIR");
    assert_non_null(src);
    static const char *const seeds[] = {
        "mid.core.payload",    "end.core.payload",    "end.core.stored",
        "v4-mid.core.payload", "v4-end.core.payload", "v4-end.core.stored"};
    /* the version 2 seeds hold the 13 rules of their day, the version 4
     * ones the 31 built-in rules of theirs; a core part checks only the
     * count, so the first 31 of today's built-in set do */
    fuzz_state_setup old, now;
    assert_int_equal(fuzz_state_setup_init(&old), 0);
    seed_rule_set(&old);
    assert_int_equal(fuzz_state_setup_init(&now), 0);
    assert_true(now.nspecs >= 31);
    now.nspecs = 31;
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        fuzz_state_setup *su = strncmp(seeds[i], "v4-", 3) == 0 ? &now : &old;
        char path[4096];
        snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/state/%s", src,
                 seeds[i]);
        size_t len;
        unsigned char *blob = seed_blob(path, &len);
        saved again = {0};
        restore_ok(su, seeds[i], "core", blob, len, &again);
        assert_int_equal(again.data[4], 4); /* saved in version 4 */
        restore_ok(su, seeds[i], "core", again.data, again.len, NULL);
        free(again.data);
        free(blob);
    }
    tw_registry_free(old.reg);
    tw_registry_free(now.reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_old_and_compact_parts_restore),
        cmocka_unit_test(test_old_and_new_cores_restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
