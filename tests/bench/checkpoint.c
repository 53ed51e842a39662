/* bench_checkpoint - the cost of one partition checkpoint (all parts dirty)
 * and of loading it back, for a job of 1, 100 and 1000 nodes, on the memory
 * store (without and with a snapshot file) and on Redis (a redis-server it
 * starts itself on a free loopback port, or --redis-port P), plus Redis
 * INFO used_memory per node.
 *
 * Part sizes model a job's saved state: "core" = --node-bytes per node
 * (default 4096) and --rules parts "rule.<i>" of --rule-bytes per node
 * each (default 12 x 1024). Usage:
 *   bench_checkpoint [--node-bytes B] [--rule-bytes B] [--rules N]
 *                    [--nodes 1,100,1000] [--seconds S] [--redis-port P]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/redis_test_util.h"
#include "checkpoint.h"
#include "log.h"
#include "state_store.h"

typedef struct bench_opts {
    size_t node_bytes, rule_bytes;
    int rules;
    double seconds;
    int redis_port;
    int nodes[16];
    int nnodes;
} bench_opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static tw_store *open_store(const char *kind, const char *snapshot, int port)
{
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    tw_setting items[4];
    size_t n = 0;
    items[n++] = (tw_setting){"store", kind, 1};
    if (snapshot != NULL)
        items[n++] = (tw_setting){"snapshot", snapshot, 2};
    if (strcmp(kind, "redis") == 0)
        items[n++] = (tw_setting){"redis.port", port_s, 3};
    tw_settings st = {"(bench)", "state", 1, items, n};
    tw_store *s = NULL;
    char err[512];
    if (tw_store_open(&st, &s, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "bench_checkpoint: %s\n", err);
        exit(1);
    }
    return s;
}

static int64_t redis_used_memory(int port)
{
    tw_test_redis r = {0};
    r.port = port;
    redisContext *c = tw_test_redis_connect(&r);
    if (c == NULL)
        return -1;
    redisReply *rep = redisCommand(c, "INFO memory");
    int64_t used = -1;
    if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
        const char *p = strstr(rep->str, "used_memory:");
        if (p != NULL)
            used = strtoll(p + 12, NULL, 10);
    }
    if (rep != NULL)
        freeReplyObject(rep);
    redisFree(c);
    return used;
}

static void redis_flush(int port)
{
    tw_test_redis r = {0};
    r.port = port;
    redisContext *c = tw_test_redis_connect(&r);
    if (c == NULL)
        return;
    redisReply *rep = redisCommand(c, "FLUSHALL");
    if (rep != NULL)
        freeReplyObject(rep);
    redisFree(c);
}

static int count_part(void *ud, const char *job, const char *part,
                      const uint8_t *data, size_t len)
{
    (void)job;
    (void)part;
    (void)data;
    *(size_t *)ud += len;
    return 0;
}

static void run_one(const bench_opts *o, const char *label, tw_store *s,
                    int nodes, int redis_port)
{
    int nparts = 1 + o->rules;
    tw_checkpoint_part *parts = calloc((size_t)nparts, sizeof(*parts));
    char(*names)[16] = calloc((size_t)nparts, sizeof(*names));
    uint8_t **bufs = calloc((size_t)nparts, sizeof(*bufs));
    size_t total = 0;
    for (int i = 0; i < nparts; i++) {
        size_t len = (size_t)nodes * (i == 0 ? o->node_bytes : o->rule_bytes);
        if (i == 0)
            snprintf(names[i], sizeof(names[i]), "core");
        else
            snprintf(names[i], sizeof(names[i]), "rule.%d", i - 1);
        bufs[i] = malloc(len ? len : 1);
        for (size_t k = 0; k < len; k++) /* not all-zero: no free ride */
            bufs[i][k] = (uint8_t)(k * 2654435761u >> 13);
        parts[i] = (tw_checkpoint_part){"job-bench", names[i], bufs[i], len};
        total += len;
    }
    if (redis_port)
        redis_flush(redis_port);
    int64_t mem0 = redis_port ? redis_used_memory(redis_port) : 0;

    size_t cap = 100000, n = 0;
    double *ms = malloc(cap * sizeof(*ms));
    char err[512];
    double start = tw_test_now();
    int64_t offset = 0;
    while (n < cap && (n < 5 || tw_test_now() - start < o->seconds)) {
        double t0 = tw_test_now();
        if (tw_checkpoint_commit(s, "metrics", 0, ++offset, parts,
                                 (size_t)nparts, NULL, 0, err,
                                 sizeof(err)) != TW_OK) {
            fprintf(stderr, "bench_checkpoint: %s\n", err);
            exit(1);
        }
        ms[n++] = (tw_test_now() - t0) * 1e3;
    }
    int64_t mem1 = redis_port ? redis_used_memory(redis_port) : 0;
    qsort(ms, n, sizeof(*ms), cmp_double);
    double median = ms[n / 2], p95 = ms[(size_t)((double)(n - 1) * 0.95)];

    size_t loaded = 0;
    int64_t next = 0;
    double t0 = tw_test_now();
    if (tw_checkpoint_load(s, "metrics", 0, &next, count_part, &loaded, err,
                           sizeof(err)) != TW_OK ||
        loaded != total || next != offset) {
        fprintf(stderr, "bench_checkpoint: load mismatch: %s\n", err);
        exit(1);
    }
    double load_ms = (tw_test_now() - t0) * 1e3;
    char memcol[32] = "-";
    if (redis_port)
        snprintf(memcol, sizeof(memcol), "%.0f", (double)(mem1 - mem0) / nodes);
    printf("%-16s %6d %12zu %8zu %10.3f %10.3f %10.1f %10.3f %14s\n", label,
           nodes, total, n, median, p95, (double)total / (median / 1e3) / 1e6,
           load_ms, memcol);
    fflush(stdout);
    free(ms);
    for (int i = 0; i < nparts; i++)
        free(bufs[i]);
    free(bufs);
    free(names);
    free(parts);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_checkpoint [--node-bytes B] [--rule-bytes B] "
                    "[--rules N] [--nodes 1,100,1000] [--seconds S] "
                    "[--redis-port P]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bench_opts o = {4096, 1024, 12, 2.0, 0, {1, 100, 1000}, 3};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            usage();
        if (strcmp(argv[i], "--node-bytes") == 0)
            o.node_bytes = strtoul(v, NULL, 10);
        else if (strcmp(argv[i], "--rule-bytes") == 0)
            o.rule_bytes = strtoul(v, NULL, 10);
        else if (strcmp(argv[i], "--rules") == 0)
            o.rules = atoi(v);
        else if (strcmp(argv[i], "--seconds") == 0)
            o.seconds = atof(v);
        else if (strcmp(argv[i], "--redis-port") == 0)
            o.redis_port = atoi(v);
        else if (strcmp(argv[i], "--nodes") == 0) {
            o.nnodes = 0;
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && o.nnodes < 16;
                 t = strtok_r(NULL, ",", &save))
                o.nodes[o.nnodes++] = atoi(t);
            free(copy);
        } else
            usage();
        i++;
    }
    if (o.rules < 0 || o.rules > 64 || o.nnodes == 0 || o.seconds <= 0)
        usage();
    for (int i = 0; i < o.nnodes; i++)
        if (o.nodes[i] <= 0)
            usage();
    tw_log_set_level(TW_LOG_WARN);

    tw_test_redis own = {0};
    int port = o.redis_port;
    if (port == 0) {
        if (tw_test_redis_start(&own, NULL, 0) != 0) {
            fprintf(stderr, "bench_checkpoint: cannot start redis-server\n");
            return 1;
        }
        port = own.port;
    }
    char snapdir[] = "/tmp/tw-bench-snap.XXXXXX";
    if (mkdtemp(snapdir) == NULL)
        return 1;
    char snap[64];
    snprintf(snap, sizeof(snap), "%s/state.snap", snapdir);

    printf("checkpoint of one job, all parts dirty: core %zu B/node + %d "
           "rules x %zu B/node; %.1f s per row\n",
           o.node_bytes, o.rules, o.rule_bytes, o.seconds);
    printf("%-16s %6s %12s %8s %10s %10s %10s %10s %14s\n", "store", "nodes",
           "bytes/ckpt", "ckpts", "ms median", "ms p95", "MB/s", "load ms",
           "redis B/node");
    for (int i = 0; i < o.nnodes; i++) {
        tw_store *s = open_store("memory", NULL, 0);
        run_one(&o, "memory", s, o.nodes[i], 0);
        tw_store_close(s);
        s = open_store("memory", snap, 0);
        run_one(&o, "memory+snapshot", s, o.nodes[i], 0);
        tw_store_close(s);
        unlink(snap);
        s = open_store("redis", NULL, port);
        run_one(&o, "redis", s, o.nodes[i], port);
        tw_store_close(s);
    }
    rmdir(snapdir);
    if (own.pid)
        tw_test_redis_cleanup(&own);
    return 0;
}
