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
#include <zstd.h>
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

/* A part's stored value from a "<name>.stored" seed (two selector bytes,
 * then the value); the caller frees. */
static unsigned char *stored_seed(const char *name, size_t *len)
{
    const char *src = getenv("TW_SOURCE_DIR");
    assert_non_null(src);
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/state/%s.stored", src,
             name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("%s: cannot open", path);
    static unsigned char in[1 << 16];
    size_t n = fread(in, 1, sizeof(in), f);
    fclose(f);
    assert_true(n > 2 && n < sizeof(in));
    unsigned char *blob = malloc(n - 2);
    assert_non_null(blob);
    memcpy(blob, in + 2, n - 2);
    *len = n - 2;
    return blob;
}

/* Every part a save writes (data NULL: removed). */
typedef struct parts {
    char name[64][48];
    unsigned char *data[64];
    size_t len[64];
    size_t n;
} parts;

static int keep_all(void *ud, const char *part, const void *data, size_t len)
{
    parts *p = ud;
    if (p->n == 64)
        return TW_ERR;
    snprintf(p->name[p->n], sizeof(p->name[0]), "%s", part);
    p->data[p->n] = NULL;
    if (data != NULL) {
        p->data[p->n] = malloc(len ? len : 1);
        if (p->data[p->n] == NULL)
            return TW_ERR;
        memcpy(p->data[p->n], data, len);
    }
    p->len[p->n++] = len;
    return TW_OK;
}

static void parts_free(parts *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->data[i]);
    p->n = 0;
}

static int has_part(const parts *p, const char *name, int removed)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->name[i], name) == 0 && (p->data[i] == NULL) == removed)
            return 1;
    return 0;
}

/* A part's payload (inflated when its header says zstd), malloc'd. */
static unsigned char *payload_of(const unsigned char *d, size_t len, size_t *n)
{
    assert_true(len >= 20);
    unsigned char *p;
    if (d[6] == 1) {
        unsigned long long raw = ZSTD_getFrameContentSize(d + 20, len - 20);
        assert_true(raw < ((unsigned long long)1 << 30));
        p = malloc((size_t)raw + 1);
        assert_non_null(p);
        assert_int_equal(ZSTD_decompress(p, (size_t)raw, d + 20, len - 20),
                         raw);
        *n = (size_t)raw;
        return p;
    }
    p = malloc(len - 20 + 1);
    assert_non_null(p);
    memcpy(p, d + 20, len - 20);
    *n = len - 20;
    return p;
}

/* A segmented checkpoint of the engine before state snapshots (version 5:
 * the seg5- seeds, fuzz_state.h's prelude: "core", "dict.1", "windows",
 * "chunks.1", the filler rule everywhere) restores; its next save writes
 * the windows and rules as a state snapshot ("state.<id>.0") and removes
 * "windows" and the rules' parts; what it wrote restores, and saves the
 * same bytes again. */
static void test_segmented_v5_restores(void **st)
{
    (void)st;
    fuzz_state_setup su;
    assert_int_equal(fuzz_state_setup_init(&su), 0);
    static const char *const v5[] = {"core", "dict.1", "windows", "chunks.1"};
    tw_job *j = fuzz_state_segmented_job(&su);
    assert_non_null(j);
    char err[1024];
    for (size_t i = 0; i < 4; i++) {
        char seed[32];
        snprintf(seed, sizeof(seed), "seg5-%s", v5[i]);
        size_t len;
        unsigned char *blob = stored_seed(seed, &len);
        if (i == 0)
            assert_int_equal(blob[4], 5); /* a version 5 core */
        if (tw_job_restore_part(j, v5[i], blob, len, err, sizeof(err)) != TW_OK)
            fail_msg("%s: %s", seed, err);
        free(blob);
    }
    assert_int_equal(tw_job_restore_end(j, err, sizeof(err)), TW_OK);
    parts first = {0};
    assert_int_equal(tw_job_save(j, 0, keep_all, &first, err, sizeof(err)),
                     TW_OK);
    assert_true(has_part(&first, "windows", 1));
    assert_true(has_part(&first, "rule.0", 1));
    assert_true(has_part(&first, "state.1.0", 0));
    assert_true(has_part(&first, "core", 0));
    tw_job_free(j);

    /* what it wrote, in the load order, into a fresh job */
    j = fuzz_state_segmented_job(&su);
    assert_non_null(j);
    static const char *const v6[] = {"core", "dict.1", "chunks.1", "state.1.0"};
    for (size_t k = 0; k < 4; k++)
        for (size_t i = 0; i < first.n; i++)
            if (strcmp(first.name[i], v6[k]) == 0 && first.data[i] != NULL &&
                tw_job_restore_part(j, v6[k], first.data[i], first.len[i], err,
                                    sizeof(err)) != TW_OK)
                fail_msg("restore %s: %s", v6[k], err);
    assert_int_equal(tw_job_restore_end(j, err, sizeof(err)), TW_OK);
    parts again = {0};
    assert_int_equal(tw_job_save(j, 0, keep_all, &again, err, sizeof(err)),
                     TW_OK);
    size_t compared = 0;
    for (size_t i = 0; i < again.n; i++) {
        if (again.data[i] == NULL || strncmp(again.name[i], "state.", 6) == 0)
            continue; /* the snapshot's id moves on: compared below */
        for (size_t k = 0; k < first.n; k++)
            if (strcmp(first.name[k], again.name[i]) == 0) {
                if (strcmp(again.name[i], "core") != 0 &&
                    (first.len[k] != again.len[i] ||
                     memcmp(first.data[k], again.data[i], again.len[i]) != 0))
                    fail_msg("part %s differs after restore", again.name[i]);
                compared++;
            }
    }
    assert_true(compared >= 2);
    /* the snapshot itself: the same bytes after the slice's header */
    const unsigned char *s1 = NULL, *s2 = NULL;
    size_t l1 = 0, l2 = 0;
    for (size_t i = 0; i < first.n; i++)
        if (strcmp(first.name[i], "state.1.0") == 0)
            s1 = first.data[i], l1 = first.len[i];
    for (size_t i = 0; i < again.n; i++)
        if (strcmp(again.name[i], "state.2.0") == 0)
            s2 = again.data[i], l2 = again.len[i];
    assert_non_null(s1);
    assert_non_null(s2);
    /* stored compressed (header flag 1) when large: compare the payloads */
    unsigned char *p1 = payload_of(s1, l1, &l1), *p2 = payload_of(s2, l2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(p1 + 1, p2 + 1, l1 - 1); /* past the slice's id */
    free(p1);
    free(p2);
    parts_free(&first);
    parts_free(&again);
    tw_job_free(j);
    tw_registry_free(su.reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_old_and_compact_parts_restore),
        cmocka_unit_test(test_old_and_new_cores_restore),
        cmocka_unit_test(test_segmented_v5_restores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
