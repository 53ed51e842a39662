/* test_action_config.c - each rule's `actions:` list is validated when the
 * actions are created: unknown type or key, missing url/to/phone/path,
 * bad prefix, phone, address, signal, durations and missing secrets are
 * errors naming file:line, the rule, the action and the key. */

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_credentials),
        cmocka_unit_test(test_valid_and_events),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
