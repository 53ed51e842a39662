/* http_server.c - the daemon's HTTP endpoints (http_server.h). */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "results_file.h"
#include "tw_assert.h"

/* Largest results or report file served (a report embeds its charts). */
#define TW_HTTP_FILE_MAX (64L * 1024 * 1024)

struct tw_http_server {
    struct MHD_Daemon *d;
    char *token;
    char *results_dir;
    char *tls_cert, *tls_key; /* MHD keeps pointers to these */
    int port;
    pthread_mutex_t mu; /* guards snap and stats */
    tw_http_snapshot snap;
    tw_http_stats stats;
};

void tw_http_snapshot_release(tw_http_snapshot *s)
{
    free(s->metrics);
    free(s->jobs);
    for (size_t i = 0; i < s->njobs; i++) {
        free(s->job[i].id);
        free(s->job[i].json);
    }
    free(s->job);
    free(s->not_ready);
    memset(s, 0, sizeof(*s));
}

int tw_http_job_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > TW_HTTP_JOB_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f)
            return 0;
    return 1;
}

static int64_t tw_http_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void tw_http_count(tw_http_server *s, uint64_t *field)
{
    pthread_mutex_lock(&s->mu);
    (*field)++;
    pthread_mutex_unlock(&s->mu);
}

/* Sends body (copied) with the given status and content type. */
static enum MHD_Result tw_http_reply(struct MHD_Connection *c, unsigned status,
                                     const char *type, const char *body,
                                     size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* A plain-text message (a trailing newline added). */
static enum MHD_Result tw_http_text(struct MHD_Connection *c, unsigned status,
                                    const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum MHD_Result tw_http_text(struct MHD_Connection *c, unsigned status,
                                    const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof(msg) - 2)
        n = (int)sizeof(msg) - 2;
    msg[n++] = '\n';
    msg[n] = '\0';
    return tw_http_reply(c, status, "text/plain; charset=utf-8", msg,
                         (size_t)n);
}

/* Constant-time comparison: the time taken does not tell how much of a
 * guessed token was right. */
static int tw_http_token_ok(const tw_http_server *s, struct MHD_Connection *c)
{
    if (s->token == NULL)
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
    if (h == NULL || strncmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    size_t n = strlen(s->token), m = strlen(h);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(s->token[i] ^ (i < m ? h[i] : 0));
    return diff == 0;
}

/* The whole of results_dir/<name><ext> into *out (malloc'ed); 0 when
 * found, -1 when absent, -2 on another failure (why in err). */
static int tw_http_read_result(const tw_http_server *s, const char *id,
                               const char *ext, char **out, size_t *len,
                               char *err, size_t errlen)
{
    char name[TW_RESULTS_NAME_LEN];
    tw_results_file_name(id, name);
    /* the name holds no '/' and does not start with '.' (results_file.h) */
    TW_ASSERT(strchr(name, '/') == NULL && name[0] != '.');
    char path[4400];
    snprintf(path, sizeof(path), "%s/%s%s", s->results_dir, name, ext);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return -1;
        snprintf(err, errlen, "%s%s: %s", name, ext, strerror(errno));
        return -2;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size > TW_HTTP_FILE_MAX) {
        snprintf(err, errlen, "%s%s: not a regular file of at most %ld bytes",
                 name, ext, TW_HTTP_FILE_MAX);
        close(fd);
        return -2;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf != NULL && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (buf == NULL || got != (size_t)st.st_size) {
        snprintf(err, errlen, "%s%s: %s", name, ext,
                 buf == NULL ? "out of memory" : "short read");
        free(buf);
        return -2;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

static int tw_http_job_cmp(const void *a, const void *b)
{
    return strcmp(((const tw_http_job *)a)->id, ((const tw_http_job *)b)->id);
}

/* /jobs/<id>: the results file (the JSON of `eval --json`) once the job
 * has ended, else the snapshot's entry of the active job. */
static enum MHD_Result tw_http_get_job(tw_http_server *s,
                                       struct MHD_Connection *c, const char *id)
{
    char *json = NULL, err[600];
    size_t len = 0;
    int rc = s->results_dir == NULL
                 ? -1
                 : tw_http_read_result(s, id, ".json", &json, &len, err,
                                       sizeof(err));
    if (rc == -2) {
        tw_log(TW_LOG_WARN, "http: /jobs: %s", err);
        return tw_http_text(c, 500, "cannot read the results of job '%.200s'",
                            id);
    }
    if (rc == -1) {
        pthread_mutex_lock(&s->mu);
        tw_http_job key = {.id = (char *)id};
        const tw_http_job *j = bsearch(&key, s->snap.job, s->snap.njobs,
                                       sizeof(*s->snap.job), tw_http_job_cmp);
        int found = j != NULL;
        if (found)
            json = strdup(j->json);
        pthread_mutex_unlock(&s->mu);
        if (!found) {
            tw_http_count(s, &s->stats.not_found);
            return tw_http_text(
                c, 404,
                "no job '%.200s': not active, not finished "
                "recently, and no results file%s",
                id, s->results_dir ? "" : " (engine.results_dir unset)");
        }
        if (json == NULL)
            return tw_http_text(c, 500, "out of memory");
        len = strlen(json);
    }
    enum MHD_Result r = tw_http_reply(c, 200, "application/json", json, len);
    free(json);
    return r;
}

/* /jobs/<id>/report: results_dir/<name>.html once it exists. */
static enum MHD_Result tw_http_report(tw_http_server *s,
                                      struct MHD_Connection *c, const char *id)
{
    char *html = NULL, err[600];
    size_t len = 0;
    int rc = s->results_dir == NULL
                 ? -1
                 : tw_http_read_result(s, id, ".html", &html, &len, err,
                                       sizeof(err));
    if (rc == -1) {
        tw_http_count(s, &s->stats.not_found);
        return tw_http_text(c, 404,
                            "no report for job '%.200s' yet: the HTML report "
                            "is written to engine.results_dir when the job "
                            "ends (its rule results: /jobs/<id>)",
                            id);
    }
    if (rc != 0) {
        tw_log(TW_LOG_WARN, "http: report: %s", err);
        return tw_http_text(c, 500, "cannot read the report of job '%.200s'",
                            id);
    }
    enum MHD_Result r =
        tw_http_reply(c, 200, "text/html; charset=utf-8", html, len);
    free(html);
    return r;
}

/* /metrics, /jobs or /readyz from the snapshot, copied under the mutex. */
static enum MHD_Result tw_http_from_snapshot(tw_http_server *s,
                                             struct MHD_Connection *c,
                                             const char *url)
{
    unsigned status = 200;
    const char *type = "application/json";
    char *body = NULL;
    pthread_mutex_lock(&s->mu);
    if (strcmp(url, "/metrics") == 0) {
        type = "text/plain; version=0.0.4; charset=utf-8";
        body = strdup(s->snap.metrics ? s->snap.metrics : "");
    } else if (strcmp(url, "/jobs") == 0) {
        body = strdup(s->snap.jobs ? s->snap.jobs : "{\"jobs\":[]}\n");
    } else { /* /readyz */
        type = "text/plain; charset=utf-8";
        status = s->snap.ready ? 200 : 503;
        if (asprintf(&body, "%s\n",
                     s->snap.ready       ? "ready"
                     : s->snap.not_ready ? s->snap.not_ready
                                         : "starting") < 0)
            body = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (body == NULL)
        return tw_http_text(c, 500, "out of memory");
    enum MHD_Result rc = tw_http_reply(c, status, type, body, strlen(body));
    free(body);
    return rc;
}

static enum MHD_Result tw_http_route(void *cls, struct MHD_Connection *c,
                                     const char *url, const char *method,
                                     const char *version,
                                     const char *upload_data,
                                     size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    tw_http_server *s = cls;
    /* The first call for a request only announces its headers. */
    if (*con_cls == NULL) {
        *con_cls = s;
        return MHD_YES;
    }
    if (*upload_size != 0) {
        *upload_size = 0; /* no endpoint takes a body */
        return MHD_YES;
    }
    tw_http_count(s, &s->stats.requests);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return tw_http_text(c, 405, "only GET and HEAD");
    if (strcmp(url, "/healthz") == 0)
        return tw_http_text(c, 200, "ok");
    if (strcmp(url, "/readyz") == 0)
        return tw_http_from_snapshot(s, c, url);
    if (!tw_http_token_ok(s, c)) {
        tw_http_count(s, &s->stats.unauthorized);
        struct MHD_Response *r = MHD_create_response_from_buffer(
            13, (void *)"unauthorized\n", MHD_RESPMEM_PERSISTENT);
        if (r == NULL)
            return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"trainwatch\"");
        enum MHD_Result rc = MHD_queue_response(c, 401, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (strcmp(url, "/metrics") == 0 || strcmp(url, "/jobs") == 0 ||
        strcmp(url, "/jobs/") == 0)
        return tw_http_from_snapshot(s, c,
                                     strcmp(url, "/metrics") ? "/jobs" : url);
    if (strncmp(url, "/jobs/", 6) == 0) {
        char id[TW_HTTP_JOB_ID_MAX + 16];
        const char *rest = url + 6;
        size_t n = strlen(rest);
        int report = n > 7 && strcmp(rest + n - 7, "/report") == 0;
        if (report)
            n -= 7;
        if (n >= sizeof(id))
            return tw_http_text(c, 400, "job id longer than %d bytes",
                                TW_HTTP_JOB_ID_MAX);
        memcpy(id, rest, n);
        id[n] = '\0';
        if (!tw_http_job_id_valid(id))
            return tw_http_text(c, 400,
                                "invalid job id: 1 to %d bytes without "
                                "control characters (percent-encode '/' as "
                                "%%2F)",
                                TW_HTTP_JOB_ID_MAX);
        return report ? tw_http_report(s, c, id) : tw_http_get_job(s, c, id);
    }
    tw_http_count(s, &s->stats.not_found);
    return tw_http_text(c, 404,
                        "no such path: /healthz /readyz /metrics /jobs "
                        "/jobs/<id> /jobs/<id>/report");
}

static void tw_http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    tw_log(TW_LOG_WARN, "http: %s", msg);
}

static char *tw_http_dup(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

int tw_http_start(const tw_http_config *cfg, tw_http_server **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    if (cfg->port < 0 || cfg->port > 65535) {
        snprintf(err, errlen, "http: port %d out of range", cfg->port);
        return TW_ERR;
    }
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    memset(&v4, 0, sizeof(v4));
    memset(&v6, 0, sizeof(v6));
    const struct sockaddr *sa;
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, cfg->listen, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((uint16_t)cfg->port);
        sa = (const struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, cfg->listen, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons((uint16_t)cfg->port);
        sa = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen,
                 "http: listen '%s' is not an IPv4 or IPv6 address",
                 cfg->listen);
        return TW_ERR;
    }
    if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL)) {
        snprintf(err, errlen, "http: TLS needs both a certificate and a key");
        return TW_ERR;
    }
    if (cfg->tls_cert != NULL) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            snprintf(err, errlen,
                     "http: this libmicrohttpd was built without TLS");
            return TW_ERR;
        }
        flags |= MHD_USE_TLS;
    }
    tw_http_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "http: out of memory");
        return TW_ERR;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->token = tw_http_dup(cfg->token);
    s->results_dir = tw_http_dup(cfg->results_dir);
    s->tls_cert = tw_http_dup(cfg->tls_cert);
    s->tls_key = tw_http_dup(cfg->tls_key);
    if ((cfg->token && !s->token) || (cfg->results_dir && !s->results_dir) ||
        (cfg->tls_cert && (!s->tls_cert || !s->tls_key))) {
        snprintf(err, errlen, "http: out of memory");
        tw_http_stop(s);
        return TW_ERR;
    }
    struct MHD_OptionItem tls[] = {{MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert},
                                   {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key},
                                   {MHD_OPTION_END, 0, NULL}};
    /* A few concurrent scrapers and probes; a stuck client is dropped. */
    s->d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, tw_http_route, s,
        MHD_OPTION_EXTERNAL_LOGGER, tw_http_mhd_log, NULL, MHD_OPTION_SOCK_ADDR,
        sa, MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT,
        10u, MHD_OPTION_ARRAY, cfg->tls_cert != NULL ? tls : tls + 2,
        MHD_OPTION_END);
    if (s->d == NULL) {
        snprintf(err, errlen,
                 "http: cannot listen on %s port %d (address in use, or a "
                 "bad TLS certificate or key; see the log line before)",
                 cfg->listen, cfg->port);
        tw_http_stop(s);
        return TW_ERR;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info != NULL ? info->port : cfg->port;
    *out = s;
    return TW_OK;
}

int tw_http_port(const tw_http_server *s)
{
    return s->port;
}

void tw_http_publish(tw_http_server *s, tw_http_snapshot *snap)
{
    if (snap->njobs > 1)
        qsort(snap->job, snap->njobs, sizeof(*snap->job), tw_http_job_cmp);
    int64_t t0 = tw_http_now_ns();
    pthread_mutex_lock(&s->mu);
    int64_t waited = tw_http_now_ns() - t0;
    tw_http_snapshot old = s->snap;
    s->snap = *snap;
    s->stats.publishes++;
    if ((uint64_t)waited > s->stats.publish_wait_ns_max)
        s->stats.publish_wait_ns_max = (uint64_t)waited;
    pthread_mutex_unlock(&s->mu);
    memset(snap, 0, sizeof(*snap));
    tw_http_snapshot_release(&old);
}

void tw_http_get_stats(tw_http_server *s, tw_http_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

void tw_http_stop(tw_http_server *s)
{
    if (s == NULL)
        return;
    if (s->d != NULL)
        MHD_stop_daemon(s->d);
    tw_http_snapshot_release(&s->snap);
    pthread_mutex_destroy(&s->mu);
    free(s->token);
    free(s->results_dir);
    free(s->tls_cert);
    free(s->tls_key);
    free(s);
}
