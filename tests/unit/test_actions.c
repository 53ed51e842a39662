/* test_actions.c - actions against real loopback servers started here:
 * SageMaker StopTrainingJob / ListTrainingJobs and SNS Publish with SigV4
 * (the HTTP recorder recomputes the signature), webhook with HMAC, SMTP
 * (aiosmtpd, with AUTH), signal and stop file; retries with backoff, a dead
 * port, permanent errors, once semantics, repeat_after, a ledger callback,
 * drain at a deadline. Every test checks that no secret reached the log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "action_test_util.h"
#include "alert.h"
#include "run_actions.h"

#define AKID "AKIDTESTEXAMPLE01"
#define AWS_SECRET "wJalrSECRETsecretKEY0000"
#define AWS_TOKEN "TOKENsessionSECRET1111"
#define HOOK_SECRET "hmacSECRETvalue2222"
#define SMTP_PASS "smtpPASSsecret3333"

static char log_path[64];
static FILE *log_file;

static int group_setup(void **st)
{
    (void)st;
    setenv("AWS_ACCESS_KEY_ID", AKID, 1);
    setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET, 1);
    setenv("AWS_SESSION_TOKEN", AWS_TOKEN, 1);
    setenv("HOOK_SECRET", HOOK_SECRET, 1);
    setenv("SMTP_PASS", SMTP_PASS, 1);
    snprintf(log_path, sizeof(log_path), "/tmp/tw_act_log_XXXXXX");
    int fd = mkstemp(log_path);
    if (fd < 0)
        return -1;
    log_file = fdopen(fd, "w");
    setvbuf(log_file, NULL, _IOLBF, 0);
    tw_log_set_stream(log_file);
    tw_log_set_level(TW_LOG_DEBUG);
    return 0;
}

static int group_teardown(void **st)
{
    (void)st;
    tw_log_set_stream(NULL);
    fclose(log_file);
    unlink(log_path);
    return 0;
}

/* No secret in anything logged so far; the log does record attempts. */
static void assert_log_clean(void)
{
    fflush(log_file);
    char *s = tu_read_file(log_path);
    const char *secrets[] = {AWS_SECRET, AWS_TOKEN, HOOK_SECRET, SMTP_PASS};
    for (size_t i = 0; i < 4; i++)
        if (strstr(s, secrets[i]) != NULL)
            fail_msg("secret %zu appears in the log", i);
    assert_non_null(strstr(s, "action "));
    free(s);
}

static tw_actions *new_actions(const tw_config *c, tw_actions_options *opt)
{
    tw_actions *a = NULL;
    char err[512];
    if (tw_actions_new(c, opt, &a, err, sizeof(err)) != TW_OK)
        fail_msg("tw_actions_new: %s", err);
    return a;
}

static void fire(tw_actions *a, const char *job, size_t rule, int64_t t_us)
{
    tw_action_event ev = {.job_id = job,
                          .rule_index = rule,
                          .alert_id = "alert-1",
                          .finding = "GPU utilization p95 below 70%",
                          .report = "/reports/job/profiler-report.html",
                          .time_us = t_us};
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK);
}

static void finish(tw_actions *a)
{
    assert_int_equal(tw_actions_drain(a, tw_actions_now_ms() + 30000), TW_OK);
    tw_actions_free(a);
    assert_log_clean();
}

static tw_action_type_counters counters(tw_actions *a, tw_action_type t)
{
    tw_action_counters c;
    tw_actions_get_counters(a, &c);
    return c.type[t];
}

/* "YYYYMMDD" of the request's X-Amz-Date, checked against today (UTC). */
static void assert_scope(json_t *rec, const char *region, const char *service)
{
    const char *amzdate = rec_header(rec, "x-amz-date");
    assert_non_null(amzdate);
    char today[16], yesterday[16];
    time_t now = time(NULL), y = now - 86400;
    struct tm tm;
    strftime(today, sizeof(today), "%Y%m%d", gmtime_r(&now, &tm));
    strftime(yesterday, sizeof(yesterday), "%Y%m%d", gmtime_r(&y, &tm));
    assert_true(strncmp(amzdate, today, 8) == 0 ||
                strncmp(amzdate, yesterday, 8) == 0);
    char want[256];
    snprintf(want, sizeof(want),
             "AWS4-HMAC-SHA256 Credential=" AKID "/%.8s/%s/%s/aws4_request,",
             amzdate, region, service);
    const char *auth = rec_header(rec, "authorization");
    assert_non_null(auth);
    assert_true(strncmp(auth, want, strlen(want)) == 0);
    assert_true(json_is_true(json_object_get(rec, "sigv4_ok")));
    assert_string_equal(rec_header(rec, "x-amz-security-token"), AWS_TOKEN);
}

static int n_succeeded(const tw_action_counters *c, void *ud)
{
    const int *want = ud; /* {type, n} */
    return c->type[want[0]].succeeded + c->type[want[0]].failed +
               c->type[want[0]].skipped >=
           (uint64_t)want[1];
}

static void wait_final(tw_actions *a, tw_action_type t, int n)
{
    int want[2] = {t, n};
    tu_wait_counters(a, n_succeeded, want, "final outcomes");
}

/* ---- StopTrainingJob --------------------------------------------------- */

static void test_stop_training_sigv4(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--aws-secret", AWS_SECRET, NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: LowGPUUtilization\n"
             "    actions:\n"
             "      - type: stop_training\n"
             "        region: us-west-2\n"
             "        endpoint: http://127.0.0.1:%d\n"
             "  - name: CPUBottleneck\n"
             "    actions:\n"
             "      - {type: stop_training, region: us-west-2, "
             "endpoint: 'http://127.0.0.1:%d/'}\n",
             s.port, s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c); /* the actions keep their own copies */
    fire(a, "job-42", 0, 1000);
    wait_final(a, TW_ACTION_STOP_TRAINING, 1);
    fire(a, "job-42", 1, 2000); /* another rule, same job: once per job */
    fire(a, "job-42", 0, 3000);
    fire(a, "job-43", 1, 4000);
    wait_final(a, TW_ACTION_STOP_TRAINING, 2);
    tu_wait_counters(a, tu_idle, NULL, "idle");
    tw_action_type_counters k = counters(a, TW_ACTION_STOP_TRAINING);
    assert_int_equal(k.fired, 4);
    assert_int_equal(k.succeeded, 2);
    assert_int_equal(k.deduplicated, 2);
    assert_int_equal(k.attempts, 2);

    json_t *recs = srv_records(&s);
    assert_int_equal(json_array_size(recs), 2);
    const char *jobs[] = {"job-42", "job-43"};
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(recs, i);
        assert_string_equal(rec_str(r, "method"), "POST");
        assert_string_equal(rec_str(r, "path"), "/");
        assert_string_equal(rec_header(r, "x-amz-target"),
                            "SageMaker.StopTrainingJob");
        assert_string_equal(rec_header(r, "content-type"),
                            "application/x-amz-json-1.1");
        assert_scope(r, "us-west-2", "sagemaker");
        json_t *body = json_loads(rec_str(r, "body"), 0, NULL);
        assert_non_null(body);
        assert_int_equal(json_object_size(body), 1);
        assert_string_equal(
            json_string_value(json_object_get(body, "TrainingJobName")),
            jobs[i]);
        json_decref(body);
    }
    json_decref(recs);
    srv_stop(&s);
    finish(a);
}

/* Prefix: ListTrainingJobs, then stop the one InProgress job whose name
 * starts with it; two matches stop nothing (RULES.md §5). */
static void test_stop_training_prefix(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--aws-secret", AWS_SECRET, "--list-jobs",
              "pa-7,pb-1,pb-2,xpa-1", NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: A\n"
             "    actions: [{type: stop_training, training_job_prefix: pa, "
             "endpoint: 'http://127.0.0.1:%d'}]\n"
             "  - name: B\n"
             "    actions: [{type: stop_training, training_job_prefix: pb, "
             "endpoint: 'http://127.0.0.1:%d'}]\n",
             s.port, s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    fire(a, "j1", 0, 1);
    fire(a, "j2", 1, 1);
    wait_final(a, TW_ACTION_STOP_TRAINING, 2);
    tw_action_type_counters k = counters(a, TW_ACTION_STOP_TRAINING);
    assert_int_equal(k.succeeded, 1);
    assert_int_equal(k.skipped, 1);
    json_t *recs = srv_records(&s);
    assert_int_equal(json_array_size(recs), 3);
    int lists = 0, stops = 0;
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(recs, i);
        json_t *body = json_loads(rec_str(r, "body"), 0, NULL);
        assert_true(json_is_true(json_object_get(r, "sigv4_ok")));
        if (strcmp(rec_header(r, "x-amz-target"),
                   "SageMaker.ListTrainingJobs") == 0) {
            lists++;
            assert_string_equal(
                json_string_value(json_object_get(body, "StatusEquals")),
                "InProgress");
        } else {
            stops++;
            assert_string_equal(rec_header(r, "x-amz-target"),
                                "SageMaker.StopTrainingJob");
            assert_string_equal(
                json_string_value(json_object_get(body, "TrainingJobName")),
                "pa-7");
        }
        json_decref(body);
    }
    assert_int_equal(lists, 2);
    assert_int_equal(stops, 1);
    json_decref(recs);
    srv_stop(&s);
    finish(a);
}

/* ---- SNS Publish ------------------------------------------------------ */

static char *form_get(const char *body, const char *key)
{
    size_t kn = strlen(key);
    for (const char *p = body; p && *p;) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        if (n > kn && strncmp(p, key, kn) == 0 && p[kn] == '=') {
            int outlen = 0;
            char *v = curl_easy_unescape(NULL, p + kn + 1, (int)(n - kn - 1),
                                         &outlen);
            char *copy = strdup(v);
            curl_free(v);
            return copy;
        }
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

static void assert_form(const char *body, const char *key, const char *want)
{
    char *v = form_get(body, key);
    if (v == NULL)
        fail_msg("form field %s missing in %s", key, body);
    assert_string_equal(v, want);
    free(v);
}

static void test_sms_sns_publish(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--aws-secret", AWS_SECRET, NULL);
    char cfg[1024];
    snprintf(
        cfg, sizeof(cfg),
        "rules:\n"
        "  - name: LowGPUUtilization\n"
        "    actions:\n"
        "      - type: sms\n"
        "        phone: '+15555550100'\n"
        "        topic_arn: arn:aws:sns:eu-west-1:123456789012:SMDebugRules\n"
        "        region: eu-west-1\n"
        "        endpoint: http://127.0.0.1:%d\n",
        s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    fire(a, "job-sms", 0, 5);
    wait_final(a, TW_ACTION_SMS, 1);
    assert_int_equal(counters(a, TW_ACTION_SMS).succeeded, 1);
    json_t *recs = srv_records(&s);
    assert_int_equal(json_array_size(recs), 1);
    json_t *r = json_array_get(recs, 0);
    assert_string_equal(rec_str(r, "method"), "POST");
    assert_string_equal(rec_str(r, "path"), "/");
    assert_non_null(strstr(rec_header(r, "content-type"),
                           "application/x-www-form-urlencoded"));
    assert_scope(r, "eu-west-1", "sns");
    const char *body = rec_str(r, "body");
    assert_form(body, "Action", "Publish");
    assert_form(body, "TopicArn",
                "arn:aws:sns:eu-west-1:123456789012:SMDebugRules");
    assert_form(body, "Subject", "SMDebugRule:LowGPUUtilization fired");
    assert_form(body, "MessageAttributes.entry.1.Value.StringValue",
                "+15555550100");
    char *msg = form_get(body, "Message");
    assert_non_null(msg);
    assert_non_null(strstr(msg, "LowGPUUtilization"));
    assert_non_null(strstr(msg, "job-sms"));
    assert_non_null(strstr(msg, "GPU utilization p95 below 70%"));
    assert_non_null(strstr(msg, "/reports/job/profiler-report.html"));
    free(msg);
    json_decref(recs);
    srv_stop(&s);
    finish(a);
}

/* The daemon's texts from a typed alert (run_actions.c): the SMS is the
 * rule, the job, the worst node and the finding's summary, cut to 160
 * bytes at a character boundary. */
static void test_run_actions_sms_from_finding(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--aws-secret", AWS_SECRET, NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: CPUBottleneck\n"
             "    actions:\n"
             "      - type: sms\n"
             "        phone: '+15555550100'\n"
             "        region: eu-west-1\n"
             "        endpoint: http://127.0.0.1:%d\n",
             s.port);
    tw_config *c = tu_config(cfg);
    tw_registry *reg = tw_registry_new();
    tw_job *probe = NULL;
    tw_run_actions *ra = NULL;
    char err[512];
    if (tw_job_new("(check)", &c->job, reg, c->rules, c->nrules, &probe, err,
                   sizeof(err)) != TW_OK ||
        tw_run_actions_new(c, probe, NULL, &ra, err, sizeof(err)) != TW_OK)
        fail_msg("setup: %s", err);
    tw_alert_facts f = {.kind = TW_ALERT_FINDING,
                        .rule = "CPUBottleneck",
                        .status = TW_STATUS_ISSUES_FOUND,
                        .scan = 3,
                        .end_us = 1700000240000000,
                        .job_start_us = 1700000000000000,
                        .violations = 9,
                        .datapoints = 12,
                        .has_finding = 1};
    snprintf(f.finding.names[0], sizeof(f.finding.names[0]), "algo-7");
    f.finding.nnames = 1;
    f.finding.ninvolved = 1;
    /* 2-byte characters so that a cut at 160 bytes would split one */
    snprintf(
        f.finding.summary, sizeof(f.finding.summary),
        "The GPUs idled while the cores were saturated: "
        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
        "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9 end.");
    tw_run_actions_alert(ra, "job-fnd", "alert-9", "{}", 2, &f);
    /* a status alert other than IssuesFound fires nothing */
    tw_alert_facts quiet = f;
    quiet.kind = TW_ALERT_STATUS;
    quiet.status = TW_STATUS_NO_ISSUES_FOUND;
    tw_run_actions_alert(ra, "job-fnd", "alert-10", "{}", 2, &quiet);
    /* a finding as CPUBottleneck writes it (eval of the cpu_bottleneck
     * preset): the whole summary fits, with the rule, job and node */
    tw_alert_facts g = f;
    snprintf(g.finding.summary, sizeof(g.finding.summary),
             "The GPUs sat idle while CPU cores were saturated: training is "
             "held back by work on the CPU.");
    snprintf(g.finding.names[0], sizeof(g.finding.names[0]), "algo-1");
    tw_run_actions_alert(ra, "job-06", "alert-11", "{}", 2, &g);
    assert_int_equal(tw_run_actions_drain(ra, 30000), TW_OK);
    srv_wait(&s, 2);
    json_t *recs = srv_records(&s);
    assert_int_equal(json_array_size(recs), 2);
    char *msg = NULL, *real = NULL;
    for (size_t i = 0; i < 2; i++) {
        char *m = form_get(rec_str(json_array_get(recs, i), "body"), "Message");
        assert_non_null(m);
        if (strstr(m, "job job-06") != NULL)
            real = m;
        else
            msg = m;
    }
    assert_non_null(real);
    assert_string_equal(real, "trainwatch CPUBottleneck, job job-06, algo-1: "
                              "The GPUs sat idle while CPU cores were "
                              "saturated: training is held back by work on "
                              "the CPU.");
    print_message("SNS Message (%zu bytes): %s\n", strlen(real), real);
    free(real);
    assert_non_null(msg);
    size_t n = strlen(msg);
    assert_true(n <= 160 && n > 150);
    assert_true(((unsigned char)msg[n - 1] & 0xC0) != 0xC0); /* not cut mid */
    const char *head =
        "trainwatch CPUBottleneck, job job-fnd, algo-7: The GPUs idled";
    assert_memory_equal(msg, head, strlen(head));
    print_message("SNS Message (%zu bytes): %s\n", n, msg);
    free(msg);
    json_decref(recs);

    tw_run_actions_free(ra);
    tw_job_free(probe);
    tw_registry_free(reg);
    tw_config_free(c);
    srv_stop(&s);
    assert_log_clean();
}

/* ---- e-mail (SMTP with AUTH) ------------------------------------------ */

static void test_email_smtp(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "smtp_recorder.py", "--user", "watcher", "--password",
              SMTP_PASS, NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: CPUBottleneck\n"
             "    actions:\n"
             "      - type: email\n"
             "        to: [ops@example.com, ml@example.org]\n"
             "        from: trainwatch@example.com\n"
             "        smtp_url: smtp://127.0.0.1:%d\n"
             "        username: watcher\n"
             "        password_env: SMTP_PASS\n",
             s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    fire(a, "job-mail", 0, 7);
    wait_final(a, TW_ACTION_EMAIL, 1);
    assert_int_equal(counters(a, TW_ACTION_EMAIL).succeeded, 1);
    srv_wait(&s, 1);
    json_t *recs = srv_records(&s);
    json_t *r = json_array_get(recs, 0);
    assert_string_equal(rec_str(r, "mail_from"), "trainwatch@example.com");
    json_t *to = json_object_get(r, "rcpt_tos");
    assert_int_equal(json_array_size(to), 2);
    assert_string_equal(json_string_value(json_array_get(to, 0)),
                        "ops@example.com");
    assert_string_equal(json_string_value(json_array_get(to, 1)),
                        "ml@example.org");
    assert_true(json_is_true(json_object_get(r, "authenticated")));
    const char *data = rec_str(r, "data");
    assert_non_null(strstr(data, "Subject: trainwatch: CPUBottleneck found an "
                                 "issue in job job-mail"));
    assert_non_null(strstr(data, "Rule: CPUBottleneck"));
    assert_non_null(strstr(data, "Job: job-mail"));
    assert_non_null(strstr(data, "Finding: GPU utilization p95 below 70%"));
    assert_non_null(strstr(data, "Report: /reports/job/profiler-report.html"));
    assert_non_null(strstr(data, "X-Trainwatch-Action-Id: "
                                 "job-mail/CPUBottleneck/1/email/once"));
    json_decref(recs);
    srv_stop(&s);
    finish(a);
}

/* ---- webhook ---------------------------------------------------------- */

static void test_webhook_hmac(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--hmac-secret", HOOK_SECRET, NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: R\n"
             "    actions:\n"
             "      - {type: webhook, url: 'http://127.0.0.1:%d/hook', "
             "hmac_secret_env: HOOK_SECRET}\n",
             s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    const char *alert =
        "{\"alert_id\":\"a-9\",\"rule\":\"R\",\"job_id\":\"w1\"}";
    tw_action_event ev = {.job_id = "w1", .rule_index = 0, .alert_json = alert};
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK);
    wait_final(a, TW_ACTION_WEBHOOK, 1);
    json_t *recs = srv_records(&s);
    assert_int_equal(json_array_size(recs), 1);
    json_t *r = json_array_get(recs, 0);
    assert_string_equal(rec_str(r, "path"), "/hook");
    assert_string_equal(rec_str(r, "body"), alert);
    assert_string_equal(rec_header(r, "content-type"), "application/json");
    assert_string_equal(rec_header(r, "x-trainwatch-action-id"),
                        "w1/R/1/webhook/once");
    assert_true(json_is_true(json_object_get(r, "hmac_ok")));
    json_decref(recs);
    srv_stop(&s);
    finish(a);
}

/* ---- retries ---------------------------------------------------------- */

static void test_retry_backoff(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--status", "500,503,200", NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: R\n"
             "    actions: [{type: webhook, url: 'http://127.0.0.1:%d/', "
             "retries: 3, backoff: 200ms, backoff_max: 10s}]\n",
             s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    fire(a, "r1", 0, 1);
    wait_final(a, TW_ACTION_WEBHOOK, 1);
    tw_action_type_counters k = counters(a, TW_ACTION_WEBHOOK);
    assert_int_equal(k.attempts, 3);
    assert_int_equal(k.retried, 2);
    assert_int_equal(k.succeeded, 1);
    assert_int_equal(k.failed, 0);
    json_t *recs = srv_records(&s);
    assert_int_equal(json_array_size(recs), 3);
    double t0 = json_real_value(json_object_get(json_array_get(recs, 0), "t"));
    double t1 = json_real_value(json_object_get(json_array_get(recs, 1), "t"));
    double t2 = json_real_value(json_object_get(json_array_get(recs, 2), "t"));
    /* exponential: 200 ms, then 400 ms */
    assert_true(t1 - t0 >= 0.19);
    assert_true(t2 - t1 >= 0.39);
    json_decref(recs);
    srv_stop(&s);
    finish(a);
}

static void test_dead_port_and_permanent(void **st)
{
    (void)st;
    /* a port nobody listens on: bind one, note it, close it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    int dead = ntohs(sa.sin_port);
    close(fd);
    srv s;
    srv_start(&s, "http_recorder.py", "--status", "403", NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: Dead\n"
             "    actions: [{type: webhook, url: 'http://127.0.0.1:%d/', "
             "retries: 2, backoff: 50ms, timeout: 2s}]\n"
             "  - name: Forbidden\n"
             "    actions: [{type: stop_training, retries: 3, "
             "endpoint: 'http://127.0.0.1:%d'}]\n",
             dead, s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    fire(a, "d1", 0, 1);
    fire(a, "d1", 1, 1);
    wait_final(a, TW_ACTION_WEBHOOK, 1);
    wait_final(a, TW_ACTION_STOP_TRAINING, 1);
    tw_action_type_counters k = counters(a, TW_ACTION_WEBHOOK);
    assert_int_equal(k.attempts, 3);
    assert_int_equal(k.retried, 2);
    assert_int_equal(k.failed, 1);
    assert_int_equal(k.succeeded, 0);
    k = counters(a, TW_ACTION_STOP_TRAINING); /* 403: no retry */
    assert_int_equal(k.attempts, 1);
    assert_int_equal(k.retried, 0);
    assert_int_equal(k.failed, 1);
    assert_int_equal(srv_count(&s), 1);
    srv_stop(&s);
    finish(a);
}

/* ---- once semantics --------------------------------------------------- */

#define MIN_US (60LL * 1000000)

static void test_once_and_repeat_after(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", NULL);
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: Once\n"
             "    actions: [{type: webhook, url: 'http://127.0.0.1:%d/once'}]\n"
             "  - name: Repeat\n"
             "    actions: [{type: webhook, url: 'http://127.0.0.1:%d/rep', "
             "repeat_after: 30m}]\n",
             s.port, s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    int64_t t0 = 1700000000LL * 1000000; /* event time, not wall time */
    for (int i = 0; i < 3; i++)
        fire(a, "o1", 0, t0 + i * MIN_US);
    fire(a, "o2", 0, t0); /* another job: its own once */
    fire(a, "o1", 1, t0);
    fire(a, "o1", 1, t0 + 10 * MIN_US); /* within 30m: suppressed */
    fire(a, "o1", 1, t0 + 31 * MIN_US); /* re-armed */
    fire(a, "o1", 1, t0 + 32 * MIN_US); /* suppressed again */
    fire(a, "o1", 1, t0 + 62 * MIN_US); /* re-armed */
    tu_wait_counters(a, tu_idle, NULL, "idle");
    tw_action_type_counters k = counters(a, TW_ACTION_WEBHOOK);
    assert_int_equal(k.fired, 9);
    assert_int_equal(k.succeeded, 5);
    assert_int_equal(k.deduplicated, 4);
    json_t *recs = srv_records(&s);
    int once = 0, rep = 0;
    for (size_t i = 0; i < json_array_size(recs); i++) {
        const char *p = rec_str(json_array_get(recs, i), "path");
        once += strcmp(p, "/once") == 0;
        rep += strcmp(p, "/rep") == 0;
    }
    assert_int_equal(once, 2);
    assert_int_equal(rep, 3);
    json_decref(recs);
    srv_stop(&s);
    finish(a);
}

/* The store's ledger: claims are asked before each send; "down" twice
 * (kept queued), "claimed before" for one job (skipped). */
typedef struct ledger {
    int calls, down;
    char ids[16][128];
} ledger;

static int claim(void *ud, const char *id)
{
    ledger *l = ud;
    if (l->calls < 16)
        snprintf(l->ids[l->calls], sizeof(l->ids[0]), "%s", id);
    l->calls++;
    if (l->down > 0) {
        l->down--;
        return TW_ERR;
    }
    return strncmp(id, "old-job/", 8) == 0 ? 0 : 1;
}

static int ledger_done(const tw_action_counters *c, void *ud)
{
    (void)ud;
    return c->type[TW_ACTION_STOP_TRAINING].succeeded == 1 &&
           c->type[TW_ACTION_STOP_TRAINING].deduplicated == 1;
}

static void test_ledger_callback(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--aws-secret", AWS_SECRET, NULL);
    char cfg[512];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: R\n"
             "    actions: [{type: stop_training, "
             "endpoint: 'http://127.0.0.1:%d'}]\n",
             s.port);
    tw_config *c = tu_config(cfg);
    ledger l = {.down = 2};
    tw_actions_options opt = {
        .claim = claim, .claim_ud = &l, .ledger_retry_ms = 50};
    tw_actions *a = new_actions(c, &opt);
    tw_config_free(c);
    fire(a, "old-job", 0, 1);
    fire(a, "new-job", 0, 1);
    tu_wait_counters(a, ledger_done, NULL, "ledger outcomes");
    tw_action_counters all;
    tw_actions_get_counters(a, &all);
    assert_int_equal(all.ledger_errors, 2);
    srv_wait(&s, 1);
    json_t *recs = srv_records(&s);
    assert_int_equal(json_array_size(recs), 1);
    json_t *body =
        json_loads(rec_str(json_array_get(recs, 0), "body"), 0, NULL);
    assert_string_equal(
        json_string_value(json_object_get(body, "TrainingJobName")), "new-job");
    json_decref(body);
    json_decref(recs);
    assert_int_equal(tw_actions_drain(a, tw_actions_now_ms() + 30000), TW_OK);
    /* 2 refused claims + one per job, ids as documented */
    assert_int_equal(l.calls, 4);
    int saw_new = 0;
    for (int i = 0; i < 4; i++)
        saw_new += strcmp(l.ids[i], "new-job/stop/stop_training") == 0;
    assert_true(saw_new >= 1);
    tw_actions_free(a);
    assert_log_clean();
    srv_stop(&s);
}

/* ---- signal and stop file --------------------------------------------- */

static void test_signal_and_stop_file(void **st)
{
    (void)st;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/tw_act_local_XXXXXX");
    assert_non_null(mkdtemp(dir));
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        for (;;)
            pause();
    }
    char pidfile[128], cfg[1024], stop[160];
    snprintf(pidfile, sizeof(pidfile), "%s/train.pid", dir);
    FILE *f = fopen(pidfile, "w");
    fprintf(f, "%d\n", (int)child);
    fclose(f);
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: R\n"
             "    actions:\n"
             "      - {type: signal, pid_file: '%s', signal: TERM}\n"
             "      - {type: stop_file, path: '%s/stop-{job}'}\n",
             pidfile, dir);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    fire(a, "local-1", 0, 1);
    wait_final(a, TW_ACTION_SIGNAL, 1);
    wait_final(a, TW_ACTION_STOP_FILE, 1);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);
    snprintf(stop, sizeof(stop), "%s/stop-local-1", dir);
    char *text = tu_read_file(stop);
    assert_non_null(strstr(text, "job=local-1\nrule=R\n"));
    free(text);
    assert_int_equal(counters(a, TW_ACTION_SIGNAL).succeeded, 1);
    assert_int_equal(counters(a, TW_ACTION_STOP_FILE).succeeded, 1);
    finish(a);
    unlink(stop);
    unlink(pidfile);
    rmdir(dir);
}

/* Root cause first (finding_cause.h): an alert whose finding another
 * rule's explains (caused_by) fires its rule's actions only when the rule
 * says act_on_consequences; a root cause fires them as before. */
static void test_run_actions_consequences(void **st)
{
    (void)st;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/tw_act_cause_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: LowGPUUtilization\n"
             "    actions:\n"
             "      - {type: stop_file, path: '%s/quiet-{job}'}\n"
             "  - name: LowGPU2\n"
             "    rule: LowGPUUtilization\n"
             "    act_on_consequences: true\n"
             "    actions:\n"
             "      - {type: stop_file, path: '%s/acts-{job}'}\n",
             dir, dir);
    tw_config *c = tu_config(cfg);
    assert_false(c->rules[0].act_on_consequences);
    assert_true(c->rules[1].act_on_consequences);
    tw_registry *reg = tw_registry_new();
    tw_job *probe = NULL;
    tw_run_actions *ra = NULL;
    char err[512];
    if (tw_job_new("(check)", &c->job, reg, c->rules, c->nrules, &probe, err,
                   sizeof(err)) != TW_OK ||
        tw_run_actions_new(c, probe, NULL, &ra, err, sizeof(err)) != TW_OK)
        fail_msg("setup: %s", err);
    tw_alert_facts f = {.kind = TW_ALERT_STATUS,
                        .rule = "LowGPUUtilization",
                        .status = TW_STATUS_ISSUES_FOUND,
                        .scan = 3,
                        .end_us = 1700000240000000,
                        .job_start_us = 1700000000000000,
                        .cause_rule = "CPUBottleneck",
                        .cause_parent = "ProfilerReport"};
    tw_run_actions_alert(ra, "consequence", "alert-1", "{}", 2, &f);
    f.rule = "LowGPU2";
    tw_run_actions_alert(ra, "consequence", "alert-2", "{}", 2, &f);
    /* the same finding with no cause: a problem of its own */
    f.rule = "LowGPUUtilization";
    f.cause_rule = f.cause_parent = NULL;
    tw_run_actions_alert(ra, "root", "alert-3", "{}", 2, &f);
    assert_int_equal(tw_run_actions_drain(ra, 30000), TW_OK);
    char path[160];
    snprintf(path, sizeof(path), "%s/quiet-consequence", dir);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof(path), "%s/acts-consequence", dir);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    snprintf(path, sizeof(path), "%s/quiet-root", dir);
    assert_int_equal(access(path, F_OK), 0);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* nothing else was written */
    tw_run_actions_free(ra);
    tw_job_free(probe);
    tw_registry_free(reg);
    tw_config_free(c);
    assert_log_clean();
}

/* ---- drain at a deadline; metrics text -------------------------------- */

static int one_attempt(const tw_action_counters *c, void *ud)
{
    (void)ud;
    return c->type[TW_ACTION_WEBHOOK].attempts >= 1;
}

static void test_drain_deadline_and_metrics(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--delay", "20", "--delay-count", "5",
              NULL);
    char cfg[512];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: R\n"
             "    actions: [{type: webhook, url: 'http://127.0.0.1:%d/', "
             "timeout: 15s}]\n",
             s.port);
    tw_config *c = tu_config(cfg);
    tw_actions *a = new_actions(c, NULL);
    tw_config_free(c);
    fire(a, "slow-1", 0, 1);
    tu_wait_counters(a, one_attempt, NULL, "first attempt");
    int64_t t0 = tw_actions_now_ms();
    assert_int_equal(tw_actions_drain(a, t0 + 300), TW_ERR);
    assert_true(tw_actions_now_ms() - t0 < 5000);
    tw_action_event ev = {.job_id = "late", .rule_index = 0};
    assert_int_equal(tw_actions_fire(a, &ev), TW_ERR); /* after drain */
    tw_action_counters k;
    tw_actions_get_counters(a, &k);
    assert_int_equal(k.type[TW_ACTION_WEBHOOK].failed, 1);
    assert_int_equal(k.dropped, 1);
    assert_int_equal(k.queued, 0);
    char buf[8192];
    size_t need = tw_actions_format_metrics(&k, buf, sizeof(buf));
    assert_true(need < sizeof(buf));
    assert_non_null(
        strstr(buf, "trainwatch_actions_failed_total{type=\"webhook\"} 1\n"));
    assert_non_null(
        strstr(buf, "trainwatch_actions_attempts_total{type=\"webhook\"} 1\n"));
    assert_non_null(strstr(buf, "trainwatch_actions_dropped_total 1\n"));
    tw_actions_free(a);
    assert_log_clean();
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_training_sigv4),
        cmocka_unit_test(test_stop_training_prefix),
        cmocka_unit_test(test_sms_sns_publish),
        cmocka_unit_test(test_run_actions_sms_from_finding),
        cmocka_unit_test(test_email_smtp),
        cmocka_unit_test(test_webhook_hmac),
        cmocka_unit_test(test_retry_backoff),
        cmocka_unit_test(test_dead_port_and_permanent),
        cmocka_unit_test(test_once_and_repeat_after),
        cmocka_unit_test(test_ledger_callback),
        cmocka_unit_test(test_signal_and_stop_file),
        cmocka_unit_test(test_run_actions_consequences),
        cmocka_unit_test(test_drain_deadline_and_metrics),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
