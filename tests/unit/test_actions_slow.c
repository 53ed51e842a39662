/* test_actions_slow.c - a webhook server that answers after 30 s: while the
 * request hangs, tw_actions_fire() on this (the consuming) thread stays in
 * microseconds; the attempt times out (timeout 10s), is retried after the
 * backoff and the retry succeeds. Prints the submit latency percentiles.
 * (Named *_slow: the sanitizer pass of scripts/test.sh skips it.) */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "action_test_util.h"

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int first_attempt(const tw_action_counters *c, void *ud)
{
    (void)ud;
    return c->type[TW_ACTION_WEBHOOK].attempts >= 1;
}

static int final(const tw_action_counters *c, void *ud)
{
    (void)ud;
    return c->type[TW_ACTION_WEBHOOK].succeeded +
               c->type[TW_ACTION_WEBHOOK].failed >=
           1;
}

static void test_hung_server(void **st)
{
    (void)st;
    srv s;
    srv_start(&s, "http_recorder.py", "--delay", "30", "--delay-count", "1",
              NULL);
    char cfg[512];
    snprintf(cfg, sizeof(cfg),
             "rules:\n"
             "  - name: R\n"
             "    actions: [{type: webhook, url: 'http://127.0.0.1:%d/', "
             "timeout: 10s, retries: 2, backoff: 500ms}]\n",
             s.port);
    tw_config *c = tu_config(cfg);
    tw_actions_options opt = {.max_queued = 2000000};
    tw_actions *a = NULL;
    char err[512];
    assert_int_equal(tw_actions_new(c, &opt, &a, err, sizeof(err)), TW_OK);
    tw_config_free(c);

    tw_action_event ev = {.job_id = "hung-1",
                          .rule_index = 0,
                          .finding = "stalled",
                          .time_us = 1};
    int64_t t0 = tu_now_ms();
    assert_int_equal(tw_actions_fire(a, &ev), TW_OK);
    tu_wait_counters(a, first_attempt, NULL, "first attempt");
    srv_wait(&s, 1); /* the server holds the request now */

    /* the consuming thread keeps firing (same job and rule: each one is
     * deduplicated by the worker) for at most 4 s, well inside the 10 s
     * the hung attempt waits */
    enum { MAXN = 200000 };
    int64_t *lat = malloc(MAXN * sizeof(*lat));
    assert_non_null(lat);
    int64_t end = tu_now_ms() + 4000;
    size_t n = 0;
    while (n < MAXN && tu_now_ms() < end) {
        int64_t a0 = now_ns();
        int rc = tw_actions_fire(a, &ev);
        lat[n++] = now_ns() - a0;
        assert_int_equal(rc, TW_OK);
    }
    tw_action_counters k;
    tw_actions_get_counters(a, &k);
    /* still hung: the measurement ran while the request was outstanding */
    assert_int_equal(k.type[TW_ACTION_WEBHOOK].timed_out, 0);
    assert_int_equal(k.type[TW_ACTION_WEBHOOK].succeeded, 0);
    assert_int_equal(srv_count(&s), 1);
    qsort(lat, n, sizeof(*lat), cmp_i64);
    double p50 = lat[n / 2] / 1e3, p99 = lat[n * 99 / 100] / 1e3,
           p999 = lat[n * 999 / 1000] / 1e3, max = lat[n - 1] / 1e3;
    printf("submit latency while the request hangs: n=%zu p50=%.2fus "
           "p99=%.2fus p99.9=%.2fus max=%.1fus\n",
           n, p50, p99, p999, max);
    free(lat);
    assert_true(n >= 1000);
    assert_true(p99 < 1000.0); /* µs, with room for a loaded machine */

    /* the hung attempt times out after 10 s; the retry (not delayed) works */
    tu_wait_counters(a, final, NULL, "final outcome");
    int64_t took = tu_now_ms() - t0;
    tw_actions_get_counters(a, &k);
    tw_action_type_counters w = k.type[TW_ACTION_WEBHOOK];
    printf("outcome after %.1fs: attempts=%" PRIu64 " timed_out=%" PRIu64
           " retried=%" PRIu64 " succeeded=%" PRIu64 " deduplicated=%" PRIu64
           "\n",
           took / 1e3, w.attempts, w.timed_out, w.retried, w.succeeded,
           w.deduplicated);
    assert_int_equal(w.timed_out, 1);
    assert_int_equal(w.retried, 1);
    assert_int_equal(w.attempts, 2);
    assert_int_equal(w.succeeded, 1);
    assert_true(took >= 10000 && took < 25000);
    srv_wait(&s, 2);
    assert_int_equal(tw_actions_drain(a, tw_actions_now_ms() + 30000), TW_OK);
    tw_actions_get_counters(a, &k);
    assert_int_equal(k.type[TW_ACTION_WEBHOOK].deduplicated,
                     k.type[TW_ACTION_WEBHOOK].fired - 1);
    assert_int_equal(k.dropped, 0);
    tw_actions_free(a);
    srv_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_hung_server)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
