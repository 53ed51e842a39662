/* test_http_server.c - the daemon's HTTP endpoints (http_server.h) and the
 * metrics collector behind them (run_metrics.h), over a real loopback
 * socket: probes without a token, the token required elsewhere, readiness
 * from the snapshot, /jobs/<id> from the results folder and never outside
 * it, report 404 text; the collector's per-rule series, label escaping,
 * the job bound and the TTL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http_server.h"
#include "run_metrics.h"

/* One GET over a fresh connection: the status code, the body into body. */
static int get(int port, const char *path, const char *auth, char *body,
               size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char req[2048];
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s%s%s"
                     "\r\n",
                     path, auth ? "Authorization: Bearer " : "",
                     auth ? auth : "", auth ? "\r\n" : "");
    assert_int_equal(write(fd, req, (size_t)n), n);
    char buf[65536];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(buf) - 1 &&
           (r = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
        got += (size_t)r;
    close(fd);
    buf[got] = '\0';
    int code = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &code), 1);
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(body, len, "%s", b ? b + 4 : "");
    return code;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

static void test_job_id_valid(void **state)
{
    (void)state;
    assert_true(tw_http_job_id_valid("job-1"));
    assert_true(tw_http_job_id_valid("a/b")); /* mapped to a%2Fb */
    assert_false(tw_http_job_id_valid(""));
    assert_false(tw_http_job_id_valid("a\nb"));
    char big[TW_HTTP_JOB_ID_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_false(tw_http_job_id_valid(big));
}

static void test_endpoints(void **state)
{
    (void)state;
    char dir[] = "/tmp/tw-http-test.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], outside[256];
    snprintf(path, sizeof(path), "%s/res", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/res/a%%2Fb.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"job\":\"a/b\"}\n", f);
    fclose(f);
    snprintf(outside, sizeof(outside), "%s/secret.json", dir);
    f = fopen(outside, "w");
    assert_non_null(f);
    fputs("secret\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/res", dir);

    tw_http_config cfg = {
        .listen = "127.0.0.1", .port = 0, .token = "tok", .results_dir = path};
    tw_http_server *s = NULL;
    char err[256];
    assert_int_equal(tw_http_start(&cfg, &s, err, sizeof(err)), TW_OK);
    int port = tw_http_port(s);
    assert_true(port > 0);
    char body[65536];

    assert_int_equal(get(port, "/healthz", NULL, body, sizeof(body)), 200);
    /* nothing published yet: not ready */
    assert_int_equal(get(port, "/readyz", NULL, body, sizeof(body)), 503);
    assert_int_equal(get(port, "/metrics", NULL, body, sizeof(body)), 401);
    assert_int_equal(get(port, "/metrics", "bad", body, sizeof(body)), 401);

    tw_http_snapshot snap = {0};
    snap.metrics = xstrdup("# HELP x y\n# TYPE x counter\nx 1\n");
    snap.jobs = xstrdup("{\"jobs\":[]}");
    snap.job = calloc(1, sizeof(*snap.job));
    assert_non_null(snap.job);
    snap.job[0] = (tw_http_job){xstrdup("live"), xstrdup("{\"job\":\"live\"}")};
    snap.njobs = 1;
    snap.not_ready = xstrdup("not ready: paused: redis down");
    tw_http_publish(s, &snap);
    assert_null(snap.metrics); /* taken */
    assert_int_equal(get(port, "/readyz", NULL, body, sizeof(body)), 503);
    assert_non_null(strstr(body, "paused: redis down"));
    assert_int_equal(get(port, "/metrics", "tok", body, sizeof(body)), 200);
    assert_string_equal(body, "# HELP x y\n# TYPE x counter\nx 1\n");

    /* the results file, by its id; the active job from the snapshot */
    assert_int_equal(get(port, "/jobs/a%2Fb", "tok", body, sizeof(body)), 200);
    assert_string_equal(body, "{\"job\":\"a/b\"}\n");
    assert_int_equal(get(port, "/jobs/live", "tok", body, sizeof(body)), 200);
    assert_string_equal(body, "{\"job\":\"live\"}");
    /* never outside the folder */
    assert_int_equal(get(port, "/jobs/..%2Fsecret", "tok", body, sizeof(body)),
                     404);
    assert_null(strstr(body, "secret\n"));
    assert_int_equal(
        get(port, "/jobs/%2E%2E%2Fsecret", "tok", body, sizeof(body)), 404);
    assert_int_equal(get(port, "/jobs/a%01", "tok", body, sizeof(body)), 400);
    assert_int_equal(get(port, "/jobs/a%2Fb/report", "tok", body, sizeof(body)),
                     404);
    assert_non_null(strstr(body, "no report for job 'a/b' yet"));
    assert_int_equal(get(port, "/nope", "tok", body, sizeof(body)), 404);

    snap = (tw_http_snapshot){0};
    snap.ready = 1;
    tw_http_publish(s, &snap);
    assert_int_equal(get(port, "/readyz", NULL, body, sizeof(body)), 200);
    tw_http_stats st;
    tw_http_get_stats(s, &st);
    assert_int_equal(st.requests, 14);
    assert_int_equal(st.unauthorized, 2);
    assert_int_equal(st.publishes, 2);
    tw_http_stop(s);
    unlink(outside);
    snprintf(path, sizeof(path), "%s/res/a%%2Fb.json", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/res", dir);
    rmdir(path);
    rmdir(dir);
}

static tw_alert_facts facts(const char *rule, tw_rule_status st,
                            tw_alert_kind kind)
{
    tw_alert_facts f;
    memset(&f, 0, sizeof(f));
    f.kind = kind;
    f.rule = (char *)rule;
    f.status = st;
    f.violations = 3;
    return f;
}

static void test_metrics_collector(void **state)
{
    (void)state;
    tw_run_metrics *m = tw_run_metrics_new(1000000 /* 1 s */, 2);
    assert_non_null(m);
    tw_alert_facts a =
        facts("Low\"GPU", TW_STATUS_ISSUES_FOUND, TW_ALERT_FINDING);
    assert_int_equal(tw_run_metrics_alert(m, "j\\1", &a, 10), TW_OK);
    assert_int_equal(tw_run_metrics_alert(m, "j\\1", &a, 11), TW_OK);
    tw_alert_facts e = facts("Bad", TW_STATUS_ERROR, TW_ALERT_STATUS);
    assert_int_equal(tw_run_metrics_alert(m, "j2", &e, 12), TW_OK);
    /* a third job beyond max_jobs while both are active: untracked */
    assert_int_equal(tw_run_metrics_alert(m, "j3", &a, 13), TW_OK);
    tw_run_metrics_observe(m, TW_LATENCY_CHECKPOINT, 700); /* 0.7 ms */
    tw_run_metrics_checkpoint_bytes(m, 1500000);           /* 1.5 MB */

    tw_router_stats rs;
    memset(&rs, 0, sizeof(rs));
    rs.batches = 42;
    tw_partition_lag lag = {.partition = 3, .lag = 17};
    tw_run_metrics_input in = {
        .router = &rs, .lag = &lag, .npartitions = 1, .store_round_trips = 5};
    tw_http_snapshot s;
    assert_int_equal(tw_run_metrics_snapshot(m, &in, 20, &s), TW_OK);
    const char *t = s.metrics;
    assert_non_null(strstr(t, "\ntrainwatch_batches_total 42\n"));
    assert_non_null(strstr(
        t, "trainwatch_rule_status{job_id=\"j\\\\1\",rule=\"Low\\\"GPU\","
           "parent=\"\",status=\"IssuesFound\"} 1\n"));
    assert_non_null(strstr(t, "trainwatch_rule_findings_total{job_id=\"j\\\\1\""
                              ",rule=\"Low\\\"GPU\",parent=\"\"} 2\n"));
    assert_non_null(
        strstr(t, "trainwatch_plugin_errors_total{rule=\"Bad\"} 1"));
    assert_non_null(strstr(t, "trainwatch_jobs_untracked_total 1\n"));
    assert_non_null(strstr(t, "trainwatch_consumer_lag{partition=\"3\"} 17\n"));
    assert_non_null(strstr(t, "trainwatch_store_round_trips_total 5\n"));
    assert_non_null(
        strstr(t, "trainwatch_checkpoint_seconds_bucket{le=\"0.0005\"} 0\n"));
    assert_non_null(
        strstr(t, "trainwatch_checkpoint_seconds_bucket{le=\"0.001\"} 1\n"));
    assert_non_null(strstr(t, "trainwatch_checkpoint_seconds_count 1\n"));
    assert_non_null(
        strstr(t, "trainwatch_checkpoint_bytes_bucket{le=\"1e+06\"} 0\n"));
    assert_non_null(
        strstr(t, "trainwatch_checkpoint_bytes_bucket{le=\"2e+06\"} 1\n"));
    assert_non_null(strstr(t, "trainwatch_checkpoint_bytes_sum 1500000."));
    assert_non_null(strstr(t, "trainwatch_checkpoint_bytes_count 1\n"));
    assert_int_equal(s.ready, 1);
    assert_int_equal(s.njobs, 2);
    assert_non_null(strstr(s.jobs, "\"untracked\": 1"));
    tw_http_snapshot_release(&s);

    /* j2 finishes; past its TTL it drops out and a new job fits */
    tw_run_metrics_job_finished(m, "j2", 100);
    in.paused = 1;
    in.pause_reason = "redis down";
    assert_int_equal(tw_run_metrics_snapshot(m, &in, 100 + 500000, &s), TW_OK);
    assert_non_null(strstr(s.metrics, "job_id=\"j2\""));
    assert_int_equal(s.ready, 0);
    assert_string_equal(s.not_ready, "not ready: paused: redis down");
    tw_http_snapshot_release(&s);
    assert_int_equal(tw_run_metrics_snapshot(m, &in, 100 + 1000001, &s), TW_OK);
    assert_null(strstr(s.metrics, "job_id=\"j2\""));
    assert_int_equal(s.njobs, 1);
    tw_http_snapshot_release(&s);
    assert_int_equal(tw_run_metrics_alert(m, "j4", &a, 2000000), TW_OK);
    assert_int_equal(tw_run_metrics_snapshot(m, &in, 2000001, &s), TW_OK);
    assert_non_null(strstr(s.metrics, "job_id=\"j4\""));
    assert_non_null(strstr(s.metrics, "trainwatch_jobs_untracked_total 1\n"));
    tw_http_snapshot_release(&s);
    tw_run_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_id_valid),
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_metrics_collector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
