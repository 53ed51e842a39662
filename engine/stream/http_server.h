/*
 * http_server.h - the daemon's HTTP surface (libmicrohttpd, its own
 * thread): /healthz, /readyz, /metrics, /jobs, /jobs/<id>,
 * /jobs/<id>/report.
 *
 * The consuming thread never waits on a request: it builds a snapshot
 * (the metrics text, the jobs' JSON, readiness) and hands it over with
 * tw_http_publish(), which only swaps pointers under a mutex; request
 * handlers copy what they serve under the same mutex and answer from the
 * copy. A slow client therefore costs the HTTP thread, never the engine.
 *
 * /jobs/<id> answers an active or recently finished job from the snapshot
 * merged with its results file (engine.results_dir/<name>.json, the JSON
 * of `eval --json`); /jobs/<id>/report serves <name>.html when it exists,
 * else 404 with a message. The id is percent-decoded by libmicrohttpd,
 * refused when empty, longer than TW_HTTP_JOB_ID_MAX or holding control
 * bytes, and mapped to its file name by tw_results_file_name (which never
 * yields '/', "." or ".."): nothing outside the results folder is opened,
 * and symbolic links are refused (O_NOFOLLOW).
 *
 * Authentication: with a token every path but /healthz and /readyz
 * (probes carry no credentials) needs "Authorization: Bearer <token>";
 * the token is compared in constant time and never logged.
 *
 * Ownership: tw_http_start copies what it needs from the config; the
 * server owns the snapshot handed to tw_http_publish.
 */
#ifndef TW_HTTP_SERVER_H
#define TW_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define TW_HTTP_JOB_ID_MAX 1024

typedef struct tw_http_config {
    const char *listen;      /* IPv4 or IPv6 address to bind */
    int port;                /* 0: any free port (tw_http_port tells) */
    const char *token;       /* NULL: no authentication */
    const char *tls_cert;    /* PEM text; NULL: plain HTTP */
    const char *tls_key;     /* PEM text (with tls_cert) */
    const char *results_dir; /* NULL: no results files to serve */
} tw_http_config;

/* One job in the snapshot: its id and its JSON object (/jobs/<id>). */
typedef struct tw_http_job {
    char *id;
    char *json;
} tw_http_job;

/* What the consuming thread publishes; every pointer is malloc'ed and
 * given to the server with tw_http_publish. */
typedef struct tw_http_snapshot {
    char *metrics;    /* Prometheus text exposition */
    char *jobs;       /* /jobs: a JSON document */
    tw_http_job *job; /* the same jobs one by one (sorted by id) */
    size_t njobs;
    int ready;       /* /readyz: 1 = 200 */
    char *not_ready; /* the reason when not ready */
} tw_http_snapshot;

void tw_http_snapshot_release(tw_http_snapshot *s);

/* Per-request figures, for the benchmark and the log. */
typedef struct tw_http_stats {
    uint64_t requests;
    uint64_t unauthorized;
    uint64_t not_found;
    uint64_t publishes;
    uint64_t publish_wait_ns_max; /* longest wait for the mutex in publish */
} tw_http_stats;

typedef struct tw_http_server tw_http_server;

/* Binds and starts the thread. TW_ERR with "http: ..." in err. */
int tw_http_start(const tw_http_config *cfg, tw_http_server **out, char *err,
                  size_t errlen);

/* The port bound (the configured one, or the one picked for port 0). */
int tw_http_port(const tw_http_server *s);

/* Replaces the snapshot (takes ownership of *snap's pointers and zeroes
 * it); the previous one is freed after the mutex is released. */
void tw_http_publish(tw_http_server *s, tw_http_snapshot *snap);

void tw_http_get_stats(tw_http_server *s, tw_http_stats *out);

/* Stops the thread and frees everything; NULL is fine. */
void tw_http_stop(tw_http_server *s);

/* 1 when id may name a job in a path: 1..TW_HTTP_JOB_ID_MAX bytes, no
 * control bytes. */
int tw_http_job_id_valid(const char *id);

#endif /* TW_HTTP_SERVER_H */
