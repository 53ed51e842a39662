/*
 * redis_test_util.h - a real redis-server for C tests and benchmarks:
 * started on a free loopback port (and a unix socket) with its own temp
 * folder, no RDB saves, optional password and append-only file; ready once
 * it answers PING over hiredis; stopped and its folder removed at the end.
 * The child gets SIGKILL if the test process dies (PR_SET_PDEATHSIG), so a
 * crashed test leaves no server behind.
 *
 * Header-only (static functions) so any test or bench can include it.
 * $TW_REDIS_SERVER overrides the binary (default: redis-server on PATH).
 * Ownership: the caller owns the tw_test_redis struct; stop/cleanup free
 * nothing else.
 */
#ifndef TW_REDIS_TEST_UTIL_H
#define TW_REDIS_TEST_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct tw_test_redis {
    pid_t pid; /* 0 when not running */
    int port;
    char dir[64];
    char socket[96];
    char password[64]; /* "" = none */
    int appendonly;
} tw_test_redis;

static double tw_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void tw_test_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A port the kernel just gave out on 127.0.0.1 (0 on failure). */
static int tw_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* A hiredis connection to r (authenticated when it has a password); NULL
 * when it does not answer. */
static redisContext *tw_test_redis_connect(const tw_test_redis *r)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, (struct timeval){5, 0});
    if (r->password[0]) {
        redisReply *rep = redisCommand(c, "AUTH %s", r->password);
        int ok = rep != NULL && rep->type == REDIS_REPLY_STATUS;
        if (rep != NULL)
            freeReplyObject(rep);
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* 1 when it answers PING with PONG. */
static int tw_test_redis_ping(const tw_test_redis *r)
{
    redisContext *c = tw_test_redis_connect(r);
    if (c == NULL)
        return 0;
    redisReply *rep = redisCommand(c, "PING");
    int ok = rep != NULL && rep->type == REDIS_REPLY_STATUS &&
             strcmp(rep->str, "PONG") == 0;
    if (rep != NULL)
        freeReplyObject(rep);
    redisFree(c);
    return ok;
}

/* Start the server on r->port (already chosen) and wait (20 s at most)
 * until it answers. -1 when it exits or never answers. */
static int tw_test_redis_spawn(tw_test_redis *r)
{
    char port[16], logfile[96];
    snprintf(port, sizeof(port), "%d", r->port);
    snprintf(logfile, sizeof(logfile), "%s/redis.log", r->dir);
    const char *argv[32];
    int n = 0;
    const char *bin = getenv("TW_REDIS_SERVER");
    argv[n++] = bin != NULL && bin[0] ? bin : "redis-server";
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = r->appendonly ? "yes" : "no";
    argv[n++] = "--appendfsync";
    argv[n++] = "always";
    argv[n++] = "--dir";
    argv[n++] = r->dir;
    argv[n++] = "--unixsocket";
    argv[n++] = r->socket;
    argv[n++] = "--unixsocketperm";
    argv[n++] = "700";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--logfile";
    argv[n++] = logfile;
    if (r->password[0]) {
        argv[n++] = "--requirepass";
        argv[n++] = r->password;
    }
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "redis_test_util: cannot run %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    r->pid = pid;
    double deadline = tw_test_now() + 20;
    while (tw_test_now() < deadline) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            r->pid = 0;
            return -1;
        }
        if (tw_test_redis_ping(r))
            return 0;
        tw_test_sleep_ms(30);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    r->pid = 0;
    return -1;
}

/* Pick a free port and a temp folder, and start. Tries a few ports in
 * case another process takes the one picked first. 0 when running. */
static int tw_test_redis_start(tw_test_redis *r, const char *password,
                               int appendonly)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->dir, sizeof(r->dir), "/tmp/tw-redis.XXXXXX");
    if (mkdtemp(r->dir) == NULL)
        return -1;
    snprintf(r->socket, sizeof(r->socket), "%s/redis.sock", r->dir);
    if (password != NULL)
        snprintf(r->password, sizeof(r->password), "%s", password);
    r->appendonly = appendonly;
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = tw_test_free_port();
        if (r->port != 0 && tw_test_redis_spawn(r) == 0)
            return 0;
    }
    fprintf(stderr, "redis_test_util: redis-server did not start (see %s)\n",
            r->dir);
    return -1;
}

/* Stop it: SIGTERM (SIGKILL with hard != 0, as a crash), then wait. */
static void tw_test_redis_stop(tw_test_redis *r, int hard)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, hard ? SIGKILL : SIGTERM);
    double deadline = tw_test_now() + 10;
    int status;
    while (waitpid(r->pid, &status, WNOHANG) == 0) {
        if (tw_test_now() > deadline) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &status, 0);
            break;
        }
        tw_test_sleep_ms(20);
    }
    r->pid = 0;
}

static int tw_test_rm_entry(const char *path, const struct stat *st, int flag,
                            struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Stop it and remove its folder. */
static void tw_test_redis_cleanup(tw_test_redis *r)
{
    tw_test_redis_stop(r, 0);
    if (r->dir[0])
        nftw(r->dir, tw_test_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    r->dir[0] = 0;
}

#endif /* TW_REDIS_TEST_UTIL_H */
