/* kafka_broker.c - librdkafka's mock cluster plus an optional fixed-port
 * bootstrap relay (kafka_broker.h). */
#include "kafka_broker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "log.h"

#define TW_RELAY_MAX_CONNS 64
#define TW_RELAY_BUF 65536

typedef struct tw_relay_buf {
    size_t off, len; /* pending bytes are data[off, len) */
    char data[TW_RELAY_BUF];
} tw_relay_buf;

/* One relayed connection: a client of the fixed port and its upstream
 * connection to the first mock broker. */
typedef struct tw_relay_conn {
    int client, upstream;   /* -1 when the slot is free */
    tw_relay_buf to_broker; /* read from client, written to upstream */
    tw_relay_buf to_client; /* read from upstream, written to client */
} tw_relay_conn;

typedef struct tw_relay {
    int listen_fd;
    int wake[2]; /* writing wake[1] stops the thread */
    struct sockaddr_in upstream;
    pthread_t thread;
    int running;
    tw_relay_conn conns[TW_RELAY_MAX_CONNS];
} tw_relay;

struct tw_broker {
    rd_kafka_t *rk; /* hosts the mock cluster */
    rd_kafka_mock_cluster_t *mcluster;
    char *direct;    /* mock brokers' bootstrap list */
    char *bootstrap; /* what clients should use */
    tw_relay *relay; /* NULL without --port */
};

static int tw_relay_set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void tw_relay_conn_close(tw_relay_conn *c)
{
    if (c->client >= 0)
        close(c->client);
    if (c->upstream >= 0)
        close(c->upstream);
    c->client = c->upstream = -1;
    c->to_broker.off = c->to_broker.len = 0;
    c->to_client.off = c->to_client.len = 0;
}

/* Reads what fits from fd into b. Returns -1 when fd is closed or failed. */
static int tw_relay_fill(int fd, tw_relay_buf *b)
{
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (b->len == sizeof(b->data))
        return 0;
    ssize_t n = read(fd, b->data + b->len, sizeof(b->data) - b->len);
    if (n > 0) {
        b->len += (size_t)n;
        return 0;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    return -1;
}

/* Writes what fd takes from b. Returns -1 when fd failed. */
static int tw_relay_drain(int fd, tw_relay_buf *b)
{
    if (b->off == b->len)
        return 0;
    ssize_t n = send(fd, b->data + b->off, b->len - b->off, MSG_NOSIGNAL);
    if (n >= 0) {
        b->off += (size_t)n;
        if (b->off == b->len)
            b->off = b->len = 0;
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return -1;
}

static void tw_relay_accept(tw_relay *r)
{
    int fd = accept(r->listen_fd, NULL, NULL);
    if (fd < 0)
        return;
    tw_relay_conn *slot = NULL;
    for (size_t i = 0; i < TW_RELAY_MAX_CONNS; i++) {
        if (r->conns[i].client < 0) {
            slot = &r->conns[i];
            break;
        }
    }
    if (slot == NULL) {
        tw_log(TW_LOG_WARN,
               "broker relay: %d connections open, refusing another",
               TW_RELAY_MAX_CONNS);
        close(fd);
        return;
    }
    int up = socket(AF_INET, SOCK_STREAM, 0);
    if (up < 0 ||
        connect(up, (const struct sockaddr *)&r->upstream,
                sizeof(r->upstream)) != 0 ||
        tw_relay_set_nonblocking(up) != 0 ||
        tw_relay_set_nonblocking(fd) != 0) {
        tw_log(TW_LOG_WARN, "broker relay: cannot reach the mock broker: %s",
               strerror(errno));
        if (up >= 0)
            close(up);
        close(fd);
        return;
    }
    slot->client = fd;
    slot->upstream = up;
}

static void *tw_relay_main(void *arg)
{
    tw_relay *r = arg;
    struct pollfd pfd[2 + 2 * TW_RELAY_MAX_CONNS];
    for (;;) {
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < TW_RELAY_MAX_CONNS; i++) {
            tw_relay_conn *c = &r->conns[i];
            short ce = 0, ue = 0;
            if (c->client >= 0) {
                if (c->to_broker.len < TW_RELAY_BUF || c->to_broker.off > 0)
                    ce |= POLLIN;
                if (c->to_client.off < c->to_client.len)
                    ce |= POLLOUT;
                if (c->to_client.len < TW_RELAY_BUF || c->to_client.off > 0)
                    ue |= POLLIN;
                if (c->to_broker.off < c->to_broker.len)
                    ue |= POLLOUT;
            }
            /* Free slots keep fd -1: poll() ignores them. */
            pfd[n++] = (struct pollfd){.fd = c->client, .events = ce};
            pfd[n++] = (struct pollfd){.fd = c->upstream, .events = ue};
        }
        if (poll(pfd, n, -1) < 0) {
            if (errno == EINTR)
                continue;
            tw_log(TW_LOG_ERROR, "broker relay: poll: %s", strerror(errno));
            return NULL;
        }
        if (pfd[0].revents != 0)
            return NULL;
        for (size_t i = 0; i < TW_RELAY_MAX_CONNS; i++) {
            tw_relay_conn *c = &r->conns[i];
            if (c->client < 0)
                continue;
            short cr = pfd[2 + 2 * i].revents, ur = pfd[3 + 2 * i].revents;
            int bad = 0;
            if (cr & (POLLIN | POLLHUP | POLLERR))
                bad |= tw_relay_fill(c->client, &c->to_broker);
            if (!bad && (ur & (POLLIN | POLLHUP | POLLERR)))
                bad |= tw_relay_fill(c->upstream, &c->to_client);
            if (!bad)
                bad |= tw_relay_drain(c->upstream, &c->to_broker);
            if (!bad)
                bad |= tw_relay_drain(c->client, &c->to_client);
            if (bad)
                tw_relay_conn_close(c);
        }
        if (pfd[1].revents & POLLIN)
            tw_relay_accept(r);
    }
}

static void tw_relay_free(tw_relay *r)
{
    if (r == NULL)
        return;
    if (r->running) {
        char one = 1;
        ssize_t wr = write(r->wake[1], &one, 1);
        (void)wr;
        pthread_join(r->thread, NULL);
    }
    for (size_t i = 0; i < TW_RELAY_MAX_CONNS; i++)
        tw_relay_conn_close(&r->conns[i]);
    if (r->listen_fd >= 0)
        close(r->listen_fd);
    if (r->wake[0] >= 0)
        close(r->wake[0]);
    if (r->wake[1] >= 0)
        close(r->wake[1]);
    free(r);
}

/* Parses the first "host:port" of a mock bootstrap list (always IPv4
 * loopback in librdkafka's mock). */
static int tw_relay_upstream_addr(const char *list, struct sockaddr_in *sin)
{
    char host[64];
    const char *colon = strchr(list, ':');
    if (colon == NULL || (size_t)(colon - list) >= sizeof(host))
        return -1;
    memcpy(host, list, (size_t)(colon - list));
    host[colon - list] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || (*end != '\0' && *end != ',') || port <= 0 ||
        port > 65535)
        return -1;
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}

static int tw_relay_start(int port, const char *direct, tw_relay **out,
                          char *err, size_t errlen)
{
    *out = NULL;
    tw_relay *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        return -1;
    }
    r->listen_fd = r->wake[0] = r->wake[1] = -1;
    for (size_t i = 0; i < TW_RELAY_MAX_CONNS; i++)
        r->conns[i].client = r->conns[i].upstream = -1;
    if (tw_relay_upstream_addr(direct, &r->upstream) != 0) {
        snprintf(err, errlen,
                 "broker: cannot parse the mock broker address '%s'", direct);
        goto fail;
    }
    if (pipe(r->wake) != 0) {
        snprintf(err, errlen, "broker: pipe: %s", strerror(errno));
        goto fail;
    }
    r->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (r->listen_fd < 0) {
        snprintf(err, errlen, "broker: socket: %s", strerror(errno));
        goto fail;
    }
    int on = 1;
    setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(r->listen_fd, (const struct sockaddr *)&sin, sizeof(sin)) != 0) {
        snprintf(err, errlen, "broker: cannot listen on 127.0.0.1:%d: %s", port,
                 strerror(errno));
        goto fail;
    }
    if (listen(r->listen_fd, 16) != 0 ||
        tw_relay_set_nonblocking(r->listen_fd) != 0) {
        snprintf(err, errlen, "broker: listen on 127.0.0.1:%d: %s", port,
                 strerror(errno));
        goto fail;
    }
    int rc = pthread_create(&r->thread, NULL, tw_relay_main, r);
    if (rc != 0) {
        snprintf(err, errlen, "broker: cannot start the relay thread: %s",
                 strerror(rc));
        goto fail;
    }
    r->running = 1;
    *out = r;
    return 0;
fail:
    tw_relay_free(r);
    return -1;
}

static void tw_broker_on_log(const rd_kafka_t *rk, int level, const char *fac,
                             const char *buf)
{
    (void)rk;
    tw_log_level lvl = level <= 3   ? TW_LOG_ERROR
                       : level == 4 ? TW_LOG_WARN
                                    : TW_LOG_DEBUG;
    tw_log(lvl, "broker (librdkafka %s): %s", fac, buf);
}

int tw_broker_start(const tw_broker_opts *opts, tw_broker **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (opts->brokers < 1 || opts->brokers > 16) {
        snprintf(err, errlen, "broker: --brokers %d: expected 1..16",
                 opts->brokers);
        return -1;
    }
    if (opts->port < 0 || opts->port > 65535) {
        snprintf(err, errlen, "broker: --port %d: expected 0..65535",
                 opts->port);
        return -1;
    }
    tw_broker *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        return -1;
    }
    char why[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, tw_broker_on_log);
    if (rd_kafka_conf_set(conf, "client.id", "trainwatch-broker", why,
                          sizeof(why)) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "broker: %s", why);
        rd_kafka_conf_destroy(conf);
        free(b);
        return -1;
    }
    b->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
    if (b->rk == NULL) {
        snprintf(err, errlen,
                 "broker: cannot create the librdkafka handle: "
                 "%s",
                 why);
        rd_kafka_conf_destroy(conf);
        free(b);
        return -1;
    }
    b->mcluster = rd_kafka_mock_cluster_new(b->rk, opts->brokers);
    if (b->mcluster == NULL) {
        snprintf(err, errlen,
                 "broker: librdkafka could not create a mock cluster of %d "
                 "broker(s) (see the log above)",
                 opts->brokers);
        goto fail;
    }
    b->direct = strdup(rd_kafka_mock_cluster_bootstraps(b->mcluster));
    if (b->direct == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        goto fail;
    }
    int replication = opts->brokers < 3 ? opts->brokers : 3;
    for (size_t i = 0; i < opts->ntopics; i++) {
        const tw_broker_topic *t = &opts->topics[i];
        if (t->name == NULL || t->name[0] == '\0' || t->partitions < 1) {
            snprintf(err, errlen, "broker: bad topic '%s' with %d partitions",
                     t->name != NULL ? t->name : "", t->partitions);
            goto fail;
        }
        rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(
            b->mcluster, t->name, t->partitions, replication);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen,
                     "broker: cannot create topic '%s' (%d partitions): %s",
                     t->name, t->partitions, rd_kafka_err2str(e));
            goto fail;
        }
    }
    if (opts->port != 0) {
        if (tw_relay_start(opts->port, b->direct, &b->relay, err, errlen) != 0)
            goto fail;
        char addr[64];
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", opts->port);
        b->bootstrap = strdup(addr);
    } else {
        b->bootstrap = strdup(b->direct);
    }
    if (b->bootstrap == NULL) {
        snprintf(err, errlen, "broker: out of memory");
        goto fail;
    }
    *out = b;
    return 0;
fail:
    tw_broker_stop(b);
    return -1;
}

const char *tw_broker_bootstrap(const tw_broker *b)
{
    return b->bootstrap;
}

const char *tw_broker_direct_bootstrap(const tw_broker *b)
{
    return b->direct;
}

rd_kafka_mock_cluster_t *tw_broker_mock_cluster(tw_broker *b)
{
    return b->mcluster;
}

void tw_broker_stop(tw_broker *b)
{
    if (b == NULL)
        return;
    tw_relay_free(b->relay);
    if (b->mcluster != NULL)
        rd_kafka_mock_cluster_destroy(b->mcluster);
    if (b->rk != NULL)
        rd_kafka_destroy(b->rk);
    free(b->direct);
    free(b->bootstrap);
    free(b);
}
