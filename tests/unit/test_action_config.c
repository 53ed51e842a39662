/* test_action_config.c - each rule's `actions:` list is validated when the
 * actions are created: unknown type or key, missing url/to/phone/path,
 * bad prefix, phone, address, signal, durations and missing secrets are
 * errors naming file:line, the rule, the action and the key; the capture
 * action's keys reach its callback typed. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "action_test_util.h"

static int setup(void **st)
{
    (void)st;
    setenv("AWS_ACCESS_KEY_ID", "AKIDCFG", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "cfgSECRETkey", 1);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("NOT_SET_ANYWHERE");
    return 0;
}

/* "rules: [R with this one action]" must fail with all of `want` (NULL-
 * ended) in the message. */
static void expect_error(const char *action, ...)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "rules:\n"
             "  - name: LowGPUUtilization\n"
             "    actions:\n"
             "      - type: webhook\n"
             "        url: http://127.0.0.1:9/\n"
             "      - %s\n",
             action);
    tw_config *c = tu_config(text);
    tw_actions *a = NULL;
    char err[512] = "";
    int rc = tw_actions_new(c, NULL, &a, err, sizeof(err));
    tw_config_free(c);
    if (rc == TW_OK) {
        tw_actions_free(a);
        fail_msg("accepted: %s", action);
    }
    assert_null(a);
    va_list ap;
    va_start(ap, action);
    const char *w;
    while ((w = va_arg(ap, const char *)) != NULL)
        if (strstr(err, w) == NULL)
            fail_msg("error '%s' lacks '%s'", err, w);
    va_end(ap);
    /* every message names the file, the line, the rule and the action */
    assert_non_null(strstr(err, "/tmp/tw_act_cfg_"));
    assert_non_null(strstr(err, ":6: rule 'LowGPUUtilization' action 2"));
}

static void test_errors(void **st)
{
    (void)st;
    expect_error("{type: pager}", "key 'type'", "unknown action type 'pager'",
                 NULL);
    expect_error("{url: 'http://x/'}", "missing key 'type'", NULL);
    expect_error("{type: webhook}", "missing key 'url'", "type webhook", NULL);
    expect_error("{type: webhook, url: 'ftp://x/'}", "key 'url'",
                 "not an http:// or https:// URL", NULL);
    expect_error("{type: webhook, url: 'http://x/', hmac_secret_env: "
                 "NOT_SET_ANYWHERE}",
                 "key 'hmac_secret_env'", "'NOT_SET_ANYWHERE' is not set",
                 NULL);
    expect_error("{type: webhook, url: 'http://x/', colour: red}",
                 "key 'colour'", "unknown key", NULL);
    expect_error("{type: email, smtp_url: 'smtp://h'}", "missing key 'to'",
                 NULL);
    expect_error("{type: email, to: [ops@example.com]}",
                 "missing key 'smtp_url'", NULL);
    expect_error("{type: email, to: [ops@example.com, not-an-address], "
                 "smtp_url: 'smtp://h'}",
                 "key 'to'", "'not-an-address' is not an e-mail address", NULL);
    expect_error("{type: email, to: [a@b.com], smtp_url: 'http://h'}",
                 "key 'smtp_url'", NULL);
    expect_error("{type: sms}", "missing key 'phone'", NULL);
    expect_error("{type: sms, phone: '5555550100'}", "key 'phone'",
                 "not an E.164 number", NULL);
    expect_error("{type: sms, phone: '+1234567890123456'}", "key 'phone'",
                 NULL);
    expect_error("{type: stop_training, training_job_prefix: 'my_job'}",
                 "key 'training_job_prefix'",
                 "'my_job' is not a job name "
                 "prefix",
                 NULL);
    expect_error("{type: stop_training, endpoint: 'localhost:80'}",
                 "key 'endpoint'", NULL);
    expect_error("{type: stop_training, credentials_file: /nonexistent/creds}",
                 "key 'credentials_file'",
                 "cannot read credentials file "
                 "/nonexistent/creds",
                 NULL);
    expect_error("{type: stop_training, repeat_after: 30m}",
                 "key 'repeat_after'", "unknown key", NULL);
    expect_error("{type: signal, signal: TERM}",
                 "exactly one of 'pid' and "
                 "'pid_file'",
                 NULL);
    expect_error("{type: signal, pid: 1234, signal: BOOM}", "key 'signal'",
                 "'BOOM' is not a signal", NULL);
    expect_error("{type: signal, pid: 1}", "key 'pid'", NULL);
    expect_error("{type: stop_file}", "missing key 'path'", NULL);
    expect_error("{type: webhook, url: 'http://x/', timeout: soon}",
                 "key 'timeout'", "not a duration", NULL);
    expect_error("{type: webhook, url: 'http://x/', retries: 1000}",
                 "key 'retries'", NULL);
    expect_error("{type: webhook, url: 'http://x/', backoff: 10s, "
                 "backoff_max: 1s}",
                 "key 'backoff_max'", NULL);
    expect_error("{type: email, to: [a@b.com], smtp_url: 'smtp://h', "
                 "password_env: AWS_SECRET_ACCESS_KEY}",
                 "key 'password_env'", "needs key 'username'", NULL);
}

/* No credentials anywhere: a clear error that names both ways to give
 * them. A credentials file profile works and its secret is not echoed. */
static void test_credentials(void **st)
{
    (void)st;
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-creds", 1);
    expect_error("{type: sms, phone: '+15555550100'}", "no AWS credentials",
                 "AWS_ACCESS_KEY_ID", "credentials_file", NULL);

    char path[64];
    snprintf(path, sizeof(path), "/tmp/tw_act_creds_XXXXXX");
    int fd = mkstemp(path);
    const char *ini = "[default]\naws_access_key_id = AKIDDEF\n"
                      "aws_secret_access_key = defSECRET\n"
                      "[ci]\naws_access_key_id=AKIDCI\n";
    assert_int_equal(write(fd, ini, strlen(ini)), (ssize_t)strlen(ini));
    close(fd);
    char action[256];
    snprintf(action, sizeof(action),
             "{type: stop_training, credentials_file: '%s', profile: ci}",
             path);
    expect_error(action, "key 'credentials_file'", "profile [ci]", NULL);
    char text[512];
    snprintf(text, sizeof(text),
             "rules:\n  - name: R\n    actions:\n"
             "      - {type: stop_training, credentials_file: '%s'}\n",
             path);
    tw_config *c = tu_config(text);
    tw_actions *a = NULL;
    char err[512];
    assert_int_equal(tw_actions_new(c, NULL, &a, err, sizeof(err)), TW_OK);
    assert_int_equal(tw_actions_count(a, 0), 1);
    assert_int_equal(tw_actions_count(a, 1), 0);
    tw_actions_free(a);
    tw_config_free(c);
    unlink(path);
    setup(NULL);
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
}

/* Valid configurations of every type load; events for rules without
 * actions and malformed events are handled. */
static void test_valid_and_events(void **st)
{
    (void)st;
    setenv("PW", "pw", 1);
    tw_config *c = tu_config(
        "rules:\n"
        "  - name: A\n"
        "    actions:\n"
        "      - {type: stop_training, training_job_prefix: my-Job-1, "
        "region: eu-central-1}\n"
        "      - {type: webhook, url: 'https://hooks.example.com/x', "
        "timeout: 2s, retries: 0, backoff: 100ms, backoff_max: 1s, "
        "repeat_after: 1h}\n"
        "      - {type: signal, pid: 4242, signal: SIGUSR1}\n"
        "      - {type: stop_file, path: /tmp/stop}\n"
        "      - {type: email, to: a@example.com, smtp_url: "
        "'smtps://mail.example.com:465', use_tls: true, username: u, "
        "password_env: PW}\n"
        "      - {type: sms, phone: '+15555550100'}\n"
        "  - name: B\n");
    tw_actions *a = NULL;
    char err[512];
    if (tw_actions_new(c, NULL, &a, err, sizeof(err)) != TW_OK)
        fail_msg("%s", err);
    assert_int_equal(tw_actions_count(a, 0), 6);
    assert_int_equal(tw_actions_count(a, 1), 0);
    tw_action_event ev = {.job_id = "j", .rule_index = 1};
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK); /* no actions */
    ev.rule_index = 2;
    assert_int_equal(tw_actions_fire(a, &ev), TW_ERR);
    ev.rule_index = 0;
    ev.job_id = NULL;
    assert_int_equal(tw_actions_fire(a, &ev), TW_ERR);
    tw_actions_free(a);
    tw_config_free(c);
}

/* What the capture callback saw (the action worker thread writes it;
 * the test reads it after tw_actions_drain has joined that thread). */
typedef struct capture_seen {
    int calls;
    char request_id[128], rule[64], topic[64];
    int ranks[4];
    size_t nranks;
    int steps, trace, stacks;
    int64_t duration_us, wait_us, min_interval_us;
} capture_seen;

static int capture_fn(void *ud, const tw_capture_request *r, char *msg,
                      size_t msglen)
{
    capture_seen *s = ud;
    s->calls++;
    snprintf(s->request_id, sizeof(s->request_id), "%s", r->request_id);
    snprintf(s->rule, sizeof(s->rule), "%s", r->rule);
    snprintf(s->topic, sizeof(s->topic), "%s", r->topic);
    s->nranks = r->nranks < 4 ? r->nranks : 4;
    for (size_t i = 0; i < s->nranks; i++)
        s->ranks[i] = r->ranks[i];
    s->steps = r->steps;
    s->trace = r->trace;
    s->stacks = r->stacks;
    s->duration_us = r->duration_us;
    s->wait_us = r->wait_us;
    s->min_interval_us = r->min_interval_us;
    snprintf(msg, msglen, "queued");
    /* the second call is refused as rate limited */
    return s->calls == 1 ? 1 : 0;
}

/* capture: keys validated; the callback gets the typed request once per
 * alert id (the ledger), a rate-limited one counts as deduplicated. */
static void test_capture(void **st)
{
    (void)st;
    expect_error("{type: capture, ranks: [0, x]}", "key 'ranks'",
                 "'x' is not a rank", NULL);
    expect_error("{type: capture, ranks: [1, 1]}", "rank 1 listed twice", NULL);
    expect_error("{type: capture, what: [trace, heap]}", "key 'what'",
                 "'heap' is not trace or stacks", NULL);
    expect_error("{type: capture, steps: 3, duration: 10s}", "key 'duration'",
                 "give 'steps' or 'duration', not both", NULL);
    expect_error("{type: capture, steps: 0}", "key 'steps'", NULL);
    expect_error("{type: capture, url: 'http://x/'}", "key 'url'", NULL);

    tw_config *c = tu_config("rules:\n"
                             "  - name: A\n"
                             "    actions:\n"
                             "      - {type: capture, ranks: [0, 3], steps: "
                             "7, what: [stacks], wait: 30s, min_interval: "
                             "1m, topic: ctl}\n"
                             "      - {type: capture, duration: 2s}\n");
    capture_seen seen = {0};
    tw_actions_options opt = {.capture = capture_fn, .capture_ud = &seen};
    tw_actions *a = NULL;
    char err[512];
    if (tw_actions_new(c, &opt, &a, err, sizeof(err)) != TW_OK)
        fail_msg("%s", err);
    assert_true(tw_actions_has_type(a, 0, TW_ACTION_CAPTURE));
    const char *topics[4];
    assert_int_equal(tw_actions_capture_topics(a, topics, 4), 2);
    assert_string_equal(topics[0], "ctl");
    assert_string_equal(topics[1], "trainwatch.control");
    tw_action_event ev = {.job_id = "j", .rule_index = 0, .alert_id = "abc"};
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK);
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK); /* same alert id */
    assert_int_equal(tw_actions_drain(a, tw_actions_now_ms() + 5000), TW_OK);
    assert_int_equal(seen.calls, 2); /* one per action, the repeat not */
    tw_action_counters k;
    tw_actions_get_counters(a, &k);
    const tw_action_type_counters *t = &k.type[TW_ACTION_CAPTURE];
    assert_int_equal(t->fired, 4);
    assert_int_equal(t->succeeded, 1);
    assert_int_equal(t->deduplicated, 3); /* 2 by the ledger, 1 rate limit */
    /* the second action's request (the last call) */
    assert_string_equal(seen.request_id, "abc-2");
    assert_string_equal(seen.rule, "A");
    assert_string_equal(seen.topic, "trainwatch.control");
    assert_int_equal(seen.nranks, 0);
    assert_int_equal(seen.duration_us, 2000000);
    assert_true(seen.trace && seen.stacks);
    assert_int_equal(seen.wait_us, 120000000);
    assert_int_equal(seen.min_interval_us, 600000000);
    tw_actions_free(a);
    tw_config_free(c);

    /* the first action's typed fields */
    c = tu_config("rules:\n"
                  "  - name: A\n"
                  "    actions:\n"
                  "      - {type: capture, ranks: [0, 3], steps: 7, what: "
                  "[stacks], wait: 30s, min_interval: 1m, topic: ctl}\n");
    memset(&seen, 0, sizeof(seen));
    if (tw_actions_new(c, &opt, &a, err, sizeof(err)) != TW_OK)
        fail_msg("%s", err);
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK);
    assert_int_equal(tw_actions_drain(a, tw_actions_now_ms() + 5000), TW_OK);
    assert_int_equal(seen.calls, 1);
    assert_string_equal(seen.request_id, "abc-1");
    assert_string_equal(seen.topic, "ctl");
    assert_int_equal(seen.nranks, 2);
    assert_int_equal(seen.ranks[0], 0);
    assert_int_equal(seen.ranks[1], 3);
    assert_int_equal(seen.steps, 7);
    assert_int_equal(seen.duration_us, 0);
    assert_true(!seen.trace && seen.stacks);
    assert_int_equal(seen.wait_us, 30000000);
    assert_int_equal(seen.min_interval_us, 60000000);
    tw_actions_free(a);
    tw_config_free(c);

    /* without a capture callback (eval): skipped, never an error */
    c = tu_config("rules:\n  - name: A\n    actions:\n"
                  "      - {type: capture}\n");
    if (tw_actions_new(c, NULL, &a, err, sizeof(err)) != TW_OK)
        fail_msg("%s", err);
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK);
    assert_int_equal(tw_actions_drain(a, tw_actions_now_ms() + 5000), TW_OK);
    tw_actions_get_counters(a, &k);
    assert_int_equal(k.type[TW_ACTION_CAPTURE].skipped, 1);
    tw_actions_free(a);
    tw_config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_credentials),
        cmocka_unit_test(test_valid_and_events),
        cmocka_unit_test(test_capture),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
