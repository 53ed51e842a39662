/* test_config.c - rule configuration files: YAML and JSON, defaults, and
 * errors that name the file, line and key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_schema.h"

static char path[64];

static const char *write_tmp(const char *text)
{
    snprintf(path, sizeof(path), "/tmp/tw_cfg_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_yaml(void **st)
{
    (void)st;
    const char *p = write_tmp("# comment\n"
                              "semantics: reference\n"
                              "tick: 30s\n"
                              "lateness: 500ms\n"
                              "rules:\n"
                              "  - name: LowGPUUtilization\n"
                              "    parameters:\n"
                              "      threshold_p95: 60\n"
                              "      window: 100\n"
                              "  - name: Ceiling\n"
                              "    source: /x/ceiling.so\n"
                              "    rule_to_invoke: ceiling_rule\n"
                              "    semantics: fixed\n");
    tw_config *c;
    char err[512];
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_OK);
    assert_int_equal(c->job.semantics, TW_SEMANTICS_REFERENCE);
    assert_int_equal(c->job.tick_us, 30000000);
    assert_int_equal(c->job.lateness_us, 500000);
    assert_int_equal(c->nrules, 2);
    assert_string_equal(c->rules[0].rule, "LowGPUUtilization");
    assert_int_equal(c->rules[0].nparams, 2);
    assert_string_equal(c->rules[0].keys[1], "window");
    assert_string_equal(c->rules[0].values[1], "100");
    assert_false(c->rules[0].has_semantics);
    assert_null(c->rules[1].rule);
    assert_string_equal(c->rules[1].source, "/x/ceiling.so");
    assert_string_equal(c->rules[1].entry, "ceiling_rule");
    assert_true(c->rules[1].has_semantics);
    assert_int_equal(c->rules[1].semantics, TW_SEMANTICS_FIXED);
    tw_config_free(c);
    unlink(p);
}

static void test_json(void **st)
{
    (void)st;
    const char *p = write_tmp("{\"tick\": \"continuous\", \"rules\": "
                              "[{\"name\": \"CPUBottleneck\", "
                              "\"parameters\": {\"threshold\": 40}}]}");
    tw_config *c;
    char err[512];
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_OK);
    assert_int_equal(c->job.tick_us, 0);
    assert_string_equal(c->rules[0].rule, "CPUBottleneck");
    assert_string_equal(c->rules[0].values[0], "40");
    tw_config_free(c);
    unlink(p);
}

static void expect_error(const char *text, const char *want_line,
                         const char *want)
{
    const char *p = write_tmp(text);
    tw_config *c = NULL;
    char err[512];
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_ERR);
    assert_null(c);
    if (strstr(err, p) == NULL || strstr(err, want_line) == NULL ||
        strstr(err, want) == NULL)
        fail_msg("error '%s' lacks '%s' / '%s'", err, want_line, want);
    unlink(p);
}

static void test_errors(void **st)
{
    (void)st;
    expect_error("rules:\n  - name: A\n    paramters: {x: 1}\n",
                 ":3:", "unknown key 'paramters'");
    expect_error("tick: soon\nrules:\n  - name: A\n",
                 ":1:", "'soon' is not a duration");
    expect_error("semantics: exact\nrules:\n  - name: A\n",
                 ":1:", "'exact' is not 'fixed' or 'reference'");
    expect_error("rules: []\n", ":1:", "'rules' is empty");
    expect_error("kafka: [a]\n", ":1:", "'kafka' must be a mapping");
    expect_error("rules:\n  - name: A\n    actions: {type: email}\n",
                 ":3:", "key 'actions' of rule 'A' must be a list");
    expect_error("rules:\n  - parameters: {a: 1}\n", ":2:", "needs 'name'");
    expect_error("rules:\n  - name: A\n    parameters: {a: [1, 2]}\n",
                 ":3:", "parameter 'a' must be a plain value");
    expect_error("rules: [\n", ":", "did not find expected node content");
    /* rule names key results, alert ids and action ledgers: unique */
    expect_error("rules:\n  - name: A\n  - name: B\n  - name: A\n",
                 ":4:", "rule name 'A' is already used by the rule on line 2");
    expect_error("rules:\n  - name: LowGPUUtilization\n"
                 "  - rule: LowGPUUtilization\n",
                 ":3:", "give one of them its own 'name'");
    tw_config *ok;
    char ok_err[256];
    const char *two = write_tmp("rules:\n  - name: LowGPUUtilization\n"
                                "  - name: LowGPU50\n"
                                "    rule: LowGPUUtilization\n");
    assert_int_equal(tw_config_load(two, &ok, ok_err, sizeof(ok_err)), TW_OK);
    assert_int_equal(ok->nrules, 2);
    tw_config_free(ok);
    unlink(two);
    tw_config *c;
    char err[512];
    assert_int_equal(tw_config_load("/nonexistent.yaml", &c, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "/nonexistent.yaml: No such file"));
}

/* The daemon's sections and rule actions become flat settings that the
 * owning module interprets; `rules` may be absent (default rule set). */
static void test_settings(void **st)
{
    (void)st;
    const char *p = write_tmp("tick: 60s\n"
                              "kafka:\n"
                              "  brokers: localhost:9092\n"
                              "  properties:\n"
                              "    security.protocol: SASL_SSL\n"
                              "    sasl: {mechanism: PLAIN}\n"
                              "state:\n"
                              "  store: redis\n"
                              "  checkpoint_interval: 2s\n"
                              "  redis: {port: 6390, db: 3}\n");
    tw_config *c = NULL;
    char err[512];
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_OK);
    assert_int_equal(c->nrules, 0);
    assert_int_equal(c->kafka.n, 3);
    assert_int_equal(c->kafka.line, 3);
    const tw_setting *s =
        tw_settings_find(&c->kafka, "properties.sasl.mechanism");
    assert_non_null(s);
    assert_string_equal(s->value, "PLAIN");
    assert_int_equal(s->line, 6);
    assert_null(tw_settings_find(&c->kafka, "group"));
    /* typed values through the schema (config_schema.h) */
    assert_int_equal(tw_schema_check_settings(&c->state, TW_SECTION_STATE, NULL,
                                              err, sizeof(err)),
                     TW_OK);
    assert_int_equal(tw_schema_int(&c->state, TW_SECTION_STATE, "redis.port"),
                     6390);
    assert_int_equal(tw_schema_int(&c->state, TW_SECTION_STATE, "redis.db"), 3);
    assert_int_equal(tw_schema_duration_us(&c->state, TW_SECTION_STATE,
                                           "checkpoint_interval"),
                     2000000);
    assert_int_equal(tw_schema_check_settings(&c->kafka, TW_SECTION_KAFKA, NULL,
                                              err, sizeof(err)),
                     TW_OK);
    /* a key of another section is unknown, named with file and line */
    assert_int_equal(tw_schema_check_settings(&c->state, TW_SECTION_KAFKA, NULL,
                                              err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, ":8: state: key 'store': unknown key"));
    tw_config_free(c);
    unlink(p);

    p = write_tmp("rules:\n"
                  "  - name: CPUBottleneck\n"
                  "    actions:\n"
                  "      - type: email\n"
                  "        to: [a@example.com, b@example.com]\n"
                  "      - {type: stop_training}\n");
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_OK);
    assert_int_equal(c->nrules, 1);
    assert_int_equal(c->actions[0].n, 2);
    const tw_settings *a = &c->actions[0].items[0];
    assert_string_equal(a->what, "rule 'CPUBottleneck' action 1");
    assert_string_equal(tw_settings_find(a, "to")->value,
                        "a@example.com,b@example.com");
    assert_string_equal(
        tw_settings_find(&c->actions[0].items[1], "type")->value,
        "stop_training");
    tw_config_free(c);
    unlink(p);
}

static void test_durations(void **st)
{
    (void)st;
    int64_t us;
    assert_int_equal(tw_parse_duration_us("90", &us), TW_OK);
    assert_int_equal(us, 90000000);
    assert_int_equal(tw_parse_duration_us("2m", &us), TW_OK);
    assert_int_equal(us, 120000000);
    assert_int_equal(tw_parse_duration_us("1.5h", &us), TW_OK);
    assert_int_equal(us, 5400000000LL);
    assert_int_equal(tw_parse_duration_us("-1s", &us), TW_ERR);
    assert_int_equal(tw_parse_duration_us("5 parsecs", &us), TW_ERR);
    assert_int_equal(tw_parse_duration_us("7d", &us), TW_OK);
    assert_int_equal(us, 7 * 86400000000LL);
    /* past the range: refused, never an undefined double -> int64 */
    assert_int_equal(tw_parse_duration_us("36525d", &us), TW_OK);
    assert_int_equal(us, TW_DURATION_MAX_US);
    assert_int_equal(tw_parse_duration_us("36526d", &us), TW_ERR);
    assert_int_equal(tw_parse_duration_us("1e300s", &us), TW_ERR);
    assert_int_equal(tw_parse_duration_us("inf", &us), TW_ERR);
    assert_int_equal(tw_parse_duration_us("nan", &us), TW_ERR);
}

/* Load text; expect TW_ERR with every NULL-terminated fragment in err. */
static void expect_load_error(const char *text, ...)
{
    const char *p = write_tmp(text);
    tw_config *c = NULL;
    char err[512];
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_ERR);
    assert_null(c);
    va_list ap;
    va_start(ap, text);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
        if (strstr(err, want) == NULL)
            fail_msg("'%s' not in: %s", want, err);
    va_end(ap);
    unlink(p);
}

/* Depth limit, duplicate keys and secrets in a world-readable file. */
static void test_parser_limits(void **st)
{
    (void)st;
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 99);
    deep[199] = '\0';
    expect_load_error(deep, ":1: mappings and lists nested more than 64 deep",
                      NULL);
    expect_load_error("rules:\n  - name: A\n    name: B\n",
                      ":3: duplicate key 'name' (first on line 2)", NULL);
    expect_load_error("state:\n  redis.port: 1\n  redis: {port: 2}\n",
                      ":3: state: key 'redis.port' is given twice (first "
                      "on line 2)",
                      NULL);
    /* write_tmp's mkstemp file is 0600: a secret in it is fine */
    const char *secret = "kafka:\n  properties:\n    sasl.password: pw1\n";
    const char *p = write_tmp(secret);
    tw_config *c = NULL;
    char err[512];
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_OK);
    tw_config_free(c);
    assert_int_equal(chmod(p, 0644), 0);
    assert_int_equal(tw_config_load(p, &c, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, ":3: kafka: key 'properties.sasl.password': "
                                "holds a secret, and every user can read"));
    assert_null(strstr(err, "pw1"));
    unlink(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml),      cmocka_unit_test(test_json),
        cmocka_unit_test(test_errors),    cmocka_unit_test(test_settings),
        cmocka_unit_test(test_durations), cmocka_unit_test(test_parser_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
