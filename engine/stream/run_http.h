/*
 * run_http.h - the daemon's `http:` section: reads it (config_schema.c),
 * starts the HTTP server (http_server.h) and keeps the metrics collector
 * (run_metrics.h) that the consuming thread feeds and publishes from.
 *
 * Threads: every function here runs on the consuming thread; the server
 * answers requests on its own thread from the published snapshot, so a
 * request never makes the consuming thread wait. tw_run_http_update
 * renders and publishes at most every http.refresh.
 *
 * Ownership: the module owns the server, the collector and the token
 * (wiped on free); cfg may be freed after tw_run_http_new.
 */
#ifndef TW_RUN_HTTP_H
#define TW_RUN_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "run_metrics.h"

typedef struct tw_run_http tw_run_http;

/* *out stays NULL when http.enabled is false. TW_ERR with
 * "FILE:LINE: http: key 'K': ..." or "http: ..." in err. */
int tw_run_http_new(const tw_config *cfg, const char *results_dir,
                    tw_run_http **out, char *err, size_t errlen);

/* The metrics collector (NULL when rh is NULL). */
tw_run_metrics *tw_run_http_metrics(tw_run_http *rh);

/* Renders and publishes a snapshot when http.refresh has passed since the
 * last one, or `force`. in->http is filled here. NULL rh is fine. */
void tw_run_http_update(tw_run_http *rh, tw_run_metrics_input *in,
                        int64_t now_us, int force);

void tw_run_http_free(tw_run_http *rh);

#endif /* TW_RUN_HTTP_H */
