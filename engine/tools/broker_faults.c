/*
 * broker_faults.c - the fault commands of broker_faults.h over librdkafka's
 * mock cluster API. API keys are the Kafka protocol's numbers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "broker_faults.h"

#define TW_FAULT_MAX_WORDS 6
#define TW_FAULT_MAX_COUNT 100000

typedef struct api_name {
    const char *name;
    int16_t key;
} api_name;

static const api_name apis[] = {
    {"Produce", 0},          {"Fetch", 1},           {"ListOffsets", 2},
    {"Metadata", 3},         {"OffsetCommit", 8},    {"OffsetFetch", 9},
    {"FindCoordinator", 10}, {"JoinGroup", 11},      {"Heartbeat", 12},
    {"LeaveGroup", 13},      {"SyncGroup", 14},      {"DescribeGroups", 15},
    {"ApiVersions", 18},     {"InitProducerId", 22},
};

static int api_key(const char *name, int16_t *key)
{
    for (size_t i = 0; i < sizeof(apis) / sizeof(apis[0]); i++)
        if (strcasecmp(apis[i].name, name) == 0) {
            *key = apis[i].key;
            return 0;
        }
    return -1;
}

/* A broker error by librdkafka's name (internal "_" errors refused: a
 * broker cannot answer with them). */
static int error_code(const char *name, rd_kafka_resp_err_t *err)
{
    const struct rd_kafka_err_desc *descs = NULL;
    size_t n = 0;
    rd_kafka_get_err_descs(&descs, &n);
    for (size_t i = 0; i < n; i++)
        if (descs[i].name != NULL && descs[i].name[0] != '_' &&
            strcasecmp(descs[i].name, name) == 0) {
            *err = descs[i].code;
            return 0;
        }
    return -1;
}

static int number(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int fail(char *msg, size_t msglen, const char *fmt, const char *arg)
{
    snprintf(msg, msglen, fmt, arg);
    return -1;
}

static int mock_result(rd_kafka_resp_err_t e, const char *done, char *msg,
                       size_t msglen)
{
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(msg, msglen, "the mock cluster refused it: %s",
                 rd_kafka_err2str(e));
        return -1;
    }
    snprintf(msg, msglen, "%s", done);
    return 0;
}

int tw_broker_fault_apply(rd_kafka_mock_cluster_t *mc, int nbrokers,
                          const char *line, char *msg, size_t msglen)
{
    char buf[512];
    msg[0] = '\0';
    if (strlen(line) >= sizeof(buf))
        return fail(msg, msglen, "%s", "command longer than 511 characters");
    strcpy(buf, line);
    buf[strcspn(buf, "#\r\n")] = '\0';
    char *w[TW_FAULT_MAX_WORDS + 1];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(buf, " \t", &save); t != NULL;
         t = strtok_r(NULL, " \t", &save)) {
        if (n == TW_FAULT_MAX_WORDS)
            return fail(msg, msglen, "%s", "too many words");
        w[n++] = t;
    }
    if (n == 0)
        return 0;
    long id = 0, count = 0, part = 0, ms = 0;
    char done[600];
    if (strcmp(w[0], "error") == 0) {
        int16_t key;
        rd_kafka_resp_err_t err;
        if (n != 4)
            return fail(msg, msglen, "%s", "usage: error REQUEST COUNT ERROR");
        if (api_key(w[1], &key) != 0)
            return fail(msg, msglen, "unknown request '%s'", w[1]);
        if (number(w[2], 1, TW_FAULT_MAX_COUNT, &count) != 0)
            return fail(msg, msglen, "COUNT '%s': expected 1..100000", w[2]);
        if (error_code(w[3], &err) != 0)
            return fail(msg, msglen, "unknown Kafka error '%s'", w[3]);
        rd_kafka_resp_err_t *errs = malloc((size_t)count * sizeof(*errs));
        if (errs == NULL)
            return fail(msg, msglen, "%s", "out of memory");
        for (long i = 0; i < count; i++)
            errs[i] = err;
        rd_kafka_mock_push_request_errors_array(mc, key, (size_t)count, errs);
        free(errs);
        snprintf(msg, msglen, "the next %ld %s request(s) fail with %s", count,
                 w[1], w[3]);
        return 0;
    }
    if (strcmp(w[0], "down") == 0 || strcmp(w[0], "up") == 0) {
        if (n != 2 || number(w[1], 1, nbrokers, &id) != 0)
            return fail(msg, msglen, "usage: %s ID (a broker, 1..N)", w[0]);
        int down = w[0][0] == 'd';
        snprintf(done, sizeof(done), "broker %ld is %s", id,
                 down ? "down" : "up");
        return mock_result(down ? rd_kafka_mock_broker_set_down(mc, (int)id)
                                : rd_kafka_mock_broker_set_up(mc, (int)id),
                           done, msg, msglen);
    }
    if (strcmp(w[0], "leader") == 0) {
        if (n != 4 || number(w[2], 0, 1 << 20, &part) != 0 ||
            number(w[3], 1, nbrokers, &id) != 0)
            return fail(msg, msglen, "%s", "usage: leader TOPIC PARTITION ID");
        snprintf(done, sizeof(done), "leader of %s/%ld is broker %ld", w[1],
                 part, id);
        return mock_result(rd_kafka_mock_partition_set_leader(
                               mc, w[1], (int32_t)part, (int32_t)id),
                           done, msg, msglen);
    }
    if (strcmp(w[0], "coordinator") == 0) {
        if (n != 4 ||
            (strcmp(w[1], "group") != 0 && strcmp(w[1], "transaction") != 0) ||
            number(w[3], 1, nbrokers, &id) != 0)
            return fail(msg, msglen, "%s",
                        "usage: coordinator group|transaction KEY ID");
        snprintf(done, sizeof(done), "coordinator of %s %s is broker %ld", w[1],
                 w[2], id);
        return mock_result(
            rd_kafka_mock_coordinator_set(mc, w[1], w[2], (int32_t)id), done,
            msg, msglen);
    }
    if (strcmp(w[0], "rtt") == 0) {
        if (n != 3 || number(w[1], 1, nbrokers, &id) != 0 ||
            number(w[2], 0, 600000, &ms) != 0)
            return fail(msg, msglen, "%s", "usage: rtt ID MS");
        snprintf(done, sizeof(done), "broker %ld answers %ld ms late", id, ms);
        return mock_result(
            rd_kafka_mock_broker_set_rtt(mc, (int32_t)id, (int)ms), done, msg,
            msglen);
    }
    return fail(msg, msglen, "unknown command '%s'", w[0]);
}
