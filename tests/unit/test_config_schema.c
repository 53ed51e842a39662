/* test_config_schema.c - the configuration key table (config_schema.h):
 * its own consistency (every default passes its key's checks, no key twice,
 * action keys name real action types), the defaults the job library uses
 * without a file, the closest-key suggestion, and errors with FILE:LINE.
 * tests/integration/config_schema.sh ties the table to the README,
 * deploy/trainwatch.yaml and `config --sample`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config_schema.h"
#include "job.h"

static int is_scalar(tw_key_type t)
{
    return t != TW_TYPE_MAPPING && t != TW_TYPE_SECTION && t != TW_TYPE_ENTRIES;
}

static void test_table_consistent(void **st)
{
    (void)st;
    size_t n;
    const tw_key_spec *t = tw_schema_table(&n);
    assert_true(n > 60);
    const tw_key_spec *type = tw_schema_find(TW_SECTION_ACTION, "type");
    assert_non_null(type);
    for (size_t i = 0; i < n; i++) {
        const tw_key_spec *k = &t[i];
        char msg[256];
        if (k->doc == NULL || k->doc[0] == '\0')
            fail_msg("%s: no documentation", k->path);
        /* the default and the sample value pass the key's own checks */
        if (k->def != NULL &&
            tw_schema_check_value(k, k->def, msg, sizeof(msg)) != TW_OK)
            fail_msg("%s: default '%s': %s", k->path, k->def, msg);
        if (is_scalar(k->type) && k->def == NULL && k->example == NULL)
            fail_msg("%s: neither a default nor an example", k->path);
        /* each key once per section (find returns the first) */
        if (tw_schema_find(k->section, k->path) != k)
            fail_msg("%s: twice in section '%s'", k->path,
                     tw_section_name(k->section));
        /* action keys name action types that exist */
        for (const char *p = k->actions; p != NULL && *p;) {
            size_t m = strcspn(p, "|");
            char word[32];
            snprintf(word, sizeof(word), "%.*s", (int)m, p);
            char why[256];
            if (tw_schema_check_value(type, word, why, sizeof(why)) != TW_OK)
                fail_msg("%s: action type '%s': %s", k->path, word, why);
            p += m + (p[m] == '|');
        }
    }
    /* prefix keys: anything below properties., not properties itself */
    assert_non_null(
        tw_schema_find(TW_SECTION_KAFKA, "properties.sasl.mechanism"));
    assert_null(tw_schema_find(TW_SECTION_KAFKA, "properties"));
    assert_null(tw_schema_find(TW_SECTION_KAFKA, "propertiesx"));
}

/* Without a file the job library's defaults are the schema's. */
static void test_job_defaults(void **st)
{
    (void)st;
    tw_job_config jc;
    tw_job_config_default(&jc);
    assert_true(jc.tick_us ==
                tw_schema_duration_us(NULL, TW_SECTION_TOP, "tick"));
    assert_true(jc.lateness_us ==
                tw_schema_duration_us(NULL, TW_SECTION_TOP, "lateness"));
    assert_true(jc.idle_node_us ==
                tw_schema_duration_us(NULL, TW_SECTION_TOP, "idle_node"));
    assert_int_equal(jc.semantics, TW_SEMANTICS_FIXED);
    assert_string_equal(tw_schema_str(NULL, TW_SECTION_TOP, "semantics"),
                        "fixed");
}

static void test_closest(void **st)
{
    (void)st;
    assert_string_equal(tw_schema_closest(TW_SECTION_KAFKA, "grup", NULL),
                        "group");
    assert_string_equal(tw_schema_closest(TW_SECTION_STATE, "redis.hots", NULL),
                        "redis.host");
    assert_string_equal(tw_schema_closest(TW_SECTION_TOP, "latenes", NULL),
                        "lateness");
    /* only keys of the action's type are suggested */
    assert_string_equal(tw_schema_closest(TW_SECTION_ACTION, "urll", "webhook"),
                        "url");
    assert_null(tw_schema_closest(TW_SECTION_ACTION, "urll", "signal"));
    assert_null(tw_schema_closest(TW_SECTION_ENGINE, "zzzzzzzz", NULL));
}

static void test_check_settings(void **st)
{
    (void)st;
    tw_setting items[] = {{"job_idle", "7d", 3},
                          {"progress_interval", "0", 4},
                          {"on_data_loss", "skip", 5}};
    tw_settings e = {"cfg.yaml", "engine", 2, items, 3};
    char err[512];
    assert_int_equal(
        tw_schema_check_settings(&e, TW_SECTION_ENGINE, NULL, err, sizeof(err)),
        TW_OK);
    assert_true(tw_schema_duration_us(&e, TW_SECTION_ENGINE, "job_idle") ==
                7 * 86400 * 1000000LL);
    assert_true(tw_schema_duration_us(&e, TW_SECTION_ENGINE,
                                      "commit_interval") == 1000000);
    assert_string_equal(tw_schema_str(&e, TW_SECTION_ENGINE, "on_data_loss"),
                        "skip");
    assert_null(tw_schema_str(&e, TW_SECTION_ENGINE, "results_dir"));

    items[0].value = "0s"; /* below the key's bound */
    assert_int_equal(
        tw_schema_check_settings(&e, TW_SECTION_ENGINE, NULL, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "cfg.yaml:3: engine: key 'job_idle': '0s' is "
                                "shorter than 1us"));
    items[0].value = "1e300s";
    assert_int_equal(
        tw_schema_check_settings(&e, TW_SECTION_ENGINE, NULL, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "is not a duration"));
    assert_non_null(strstr(err, "36525d"));
    items[0].value = "10m";
    items[2].value = "drop";
    assert_int_equal(
        tw_schema_check_settings(&e, TW_SECTION_ENGINE, NULL, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "cfg.yaml:5: engine: key 'on_data_loss': "
                                "'drop' is not one of evaluate|skip"));

    tw_setting act[] = {
        {"type", "signal", 7}, {"pid", "1", 8}, {"repeat_after", "1h", 9}};
    tw_settings a = {"cfg.yaml", "rule 'X' action 1", 6, act, 2};
    assert_int_equal(tw_schema_check_settings(&a, TW_SECTION_ACTION, "signal",
                                              err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, ":8: rule 'X' action 1: key 'pid': 1 is "
                                "outside [2, 4194304]"));
    act[1].value = "1234";
    a.n = 3; /* repeat_after: notifications only */
    assert_int_equal(tw_schema_check_settings(&a, TW_SECTION_ACTION, "signal",
                                              err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, ":9: rule 'X' action 1: key 'repeat_after': "
                                "unknown key for type signal"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_consistent),
        cmocka_unit_test(test_job_defaults),
        cmocka_unit_test(test_closest),
        cmocka_unit_test(test_check_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
