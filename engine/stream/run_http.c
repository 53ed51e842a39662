/* run_http.c - the daemon's HTTP endpoints wired to its state
 * (run_http.h). */
#include "run_http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config_schema.h"
#include "http_server.h"
#include "log.h"
#include "secret_file.h"

/* A token or PEM file read whole: at most this many bytes. */
#define TW_RUN_HTTP_FILE_MAX (256 * 1024)

struct tw_run_http {
    tw_http_server *server;
    tw_run_metrics *metrics;
    int64_t refresh_us;
    int64_t next_us;
    int64_t snapshot_us_max; /* longest render + publish */
};

/* The whole of the file named by setting `key` into *out (NULL when the
 * key is absent). secret: refused when every user can read it. One
 * trailing newline is dropped when trim. */
static int tw_run_http_read(const tw_settings *h, const char *key, int secret,
                            int trim, char **out, char *err, size_t errlen)
{
    *out = NULL;
    const tw_setting *at = tw_settings_find(h, key);
    if (at == NULL)
        return TW_OK;
    FILE *f = fopen(at->value, "r");
    if (f == NULL)
        return tw_settings_error(h, at, err, errlen, "cannot read '%s': %s",
                                 at->value, strerror(errno));
    char why[512];
    if (secret &&
        tw_secret_file_check(f, at->value, why, sizeof(why)) != TW_OK) {
        fclose(f);
        return tw_settings_error(h, at, err, errlen, "a secret, and %s", why);
    }
    char *buf = malloc(TW_RUN_HTTP_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, TW_RUN_HTTP_FILE_MAX + 1, f) : 0;
    int bad = buf == NULL || ferror(f) || n > TW_RUN_HTTP_FILE_MAX;
    fclose(f);
    if (!bad && trim)
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            n--;
    if (bad || n == 0 || memchr(buf, 0, n) != NULL) {
        if (buf != NULL)
            explicit_bzero(buf, TW_RUN_HTTP_FILE_MAX + 1);
        free(buf);
        return tw_settings_error(h, at, err, errlen,
                                 "'%s' must hold 1 to %d bytes of text",
                                 at->value, TW_RUN_HTTP_FILE_MAX);
    }
    buf[n] = '\0';
    *out = buf;
    return TW_OK;
}

/* The bearer token from token_env or token_file (never both), or NULL. */
static int tw_run_http_token(const tw_settings *h, char **out, char *err,
                             size_t errlen)
{
    *out = NULL;
    const tw_setting *env = tw_settings_find(h, "token_env");
    const tw_setting *file = tw_settings_find(h, "token_file");
    if (env != NULL && file != NULL)
        return tw_settings_error(h, file, err, errlen,
                                 "give token_env or token_file, not both");
    if (env == NULL)
        return tw_run_http_read(h, "token_file", 1, 1, out, err, errlen);
    const char *v = getenv(env->value);
    if (v == NULL || v[0] == '\0')
        return tw_settings_error(h, env, err, errlen,
                                 "environment variable '%s' is not set or "
                                 "empty",
                                 env->value);
    *out = strdup(v);
    if (*out == NULL) {
        snprintf(err, errlen, "http: out of memory");
        return TW_ERR;
    }
    return TW_OK;
}

static void tw_run_http_wipe(char *s)
{
    if (s != NULL)
        explicit_bzero(s, strlen(s));
    free(s);
}

int tw_run_http_new(const tw_config *cfg, const char *results_dir,
                    tw_run_http **out, char *err, size_t errlen)
{
    *out = NULL;
    const tw_settings *h = &cfg->http;
    if (tw_schema_check_settings(h, TW_SECTION_HTTP, NULL, err, errlen) !=
        TW_OK)
        return TW_ERR;
    if (!tw_schema_bool(h, TW_SECTION_HTTP, "enabled"))
        return TW_OK;
    char *token = NULL, *cert = NULL, *key = NULL;
    int rc = tw_run_http_token(h, &token, err, errlen);
    if (rc == TW_OK)
        rc = tw_run_http_read(h, "tls_cert", 0, 0, &cert, err, errlen);
    if (rc == TW_OK)
        rc = tw_run_http_read(h, "tls_key", 1, 0, &key, err, errlen);
    if (rc == TW_OK && (cert == NULL) != (key == NULL))
        rc = tw_settings_error(h, NULL, err, errlen,
                               "tls_cert and tls_key go together");
    tw_run_http *rh = rc == TW_OK ? calloc(1, sizeof(*rh)) : NULL;
    if (rc == TW_OK && rh == NULL) {
        snprintf(err, errlen, "http: out of memory");
        rc = TW_ERR;
    }
    if (rc == TW_OK) {
        rh->refresh_us = tw_schema_duration_us(h, TW_SECTION_HTTP, "refresh");
        rh->metrics = tw_run_metrics_new(
            tw_schema_duration_us(h, TW_SECTION_HTTP, "jobs_ttl"),
            (size_t)tw_schema_int(h, TW_SECTION_HTTP, "max_jobs"));
        tw_http_config hc = {
            .listen = tw_schema_str(h, TW_SECTION_HTTP, "listen"),
            .port = (int)tw_schema_int(h, TW_SECTION_HTTP, "port"),
            .token = token,
            .tls_cert = cert,
            .tls_key = key,
            .results_dir = results_dir};
        if (rh->metrics == NULL) {
            snprintf(err, errlen, "http: out of memory");
            rc = TW_ERR;
        } else {
            rc = tw_http_start(&hc, &rh->server, err, errlen);
        }
        if (rc == TW_OK)
            tw_log(TW_LOG_INFO, "http: listening on %s port %d (%s%s)",
                   hc.listen, tw_http_port(rh->server), cert ? "https" : "http",
                   token ? ", bearer token" : "");
    }
    tw_run_http_wipe(token);
    tw_run_http_wipe(key);
    free(cert);
    if (rc != TW_OK) {
        tw_run_http_free(rh);
        return TW_ERR;
    }
    *out = rh;
    return TW_OK;
}

tw_run_metrics *tw_run_http_metrics(tw_run_http *rh)
{
    return rh != NULL ? rh->metrics : NULL;
}

void tw_run_http_update(tw_run_http *rh, tw_run_metrics_input *in,
                        int64_t now_us, int force)
{
    if (rh == NULL || (!force && now_us < rh->next_us))
        return;
    rh->next_us = now_us + rh->refresh_us;
    int64_t t0 = tw_mono_us();
    tw_http_stats hs;
    tw_http_get_stats(rh->server, &hs);
    in->http = &hs;
    in->snapshot_us_max = rh->snapshot_us_max;
    tw_http_snapshot snap;
    if (tw_run_metrics_snapshot(rh->metrics, in, now_us, &snap) != TW_OK) {
        tw_log(TW_LOG_WARN, "http: out of memory rendering the metrics; the "
                            "previous snapshot is served");
        return;
    }
    tw_http_publish(rh->server, &snap);
    int64_t took = tw_mono_us() - t0;
    if (took > rh->snapshot_us_max)
        rh->snapshot_us_max = took;
}

void tw_run_http_free(tw_run_http *rh)
{
    if (rh == NULL)
        return;
    tw_http_stop(rh->server);
    tw_run_metrics_free(rh->metrics);
    free(rh);
}
