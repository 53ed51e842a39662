/* action_test_util.h - helpers for the action tests: start the loopback
 * recorder servers (tests/integration/lib/{http,smtp}_recorder.py) on free
 * ports, read what they recorded, write configs, poll counters, capture the
 * log. Each server is a child process killed by srv_stop(). */
#ifndef TW_ACTION_TEST_UTIL_H
#define TW_ACTION_TEST_UTIL_H

#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "actions.h"
#include "config.h"
#include "log.h"

#define TU_UNUSED __attribute__((unused))

typedef struct srv {
    pid_t pid;
    int port;
    char dir[64];
    char log[128];
} srv;

static TU_UNUSED const char *tu_python(void)
{
    /* Debian's python has python3-aiosmtpd; a pyenv shim may not */
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
                                                 : "python3";
}

static TU_UNUSED int64_t tu_now_ms(void)
{
    return tw_actions_now_ms();
}

static TU_UNUSED void tu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Start tests/integration/lib/<script> with the extra args (NULL-ended);
 * waits (15 s at most) for its port file. */
static TU_UNUSED void srv_start(srv *s, const char *script, ...)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "/tmp/tw_act_XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    char portfile[128], path[512];
    snprintf(portfile, sizeof(portfile), "%s/port", s->dir);
    snprintf(s->log, sizeof(s->log), "%s/log.jsonl", s->dir);
    const char *src = getenv("TW_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/tests/integration/lib/%s",
             src ? src : TW_SOURCE_DIR, script);
    const char *argv[32];
    int n = 0;
    argv[n++] = tu_python();
    argv[n++] = path;
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    argv[n++] = "--log";
    argv[n++] = s->log;
    va_list ap;
    va_start(ap, script);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 31)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    fflush(NULL);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        /* dies with the test, and never holds the test's output pipes */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char out[160];
        snprintf(out, sizeof(out), "%s/server.out", s->dir);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 1500; i++) {
        FILE *f = fopen(portfile, "r");
        if (f != NULL) {
            int ok = fscanf(f, "%d", &s->port) == 1;
            fclose(f);
            if (ok)
                return;
        }
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            fail_msg("%s exited before it was ready", script);
        }
        tu_sleep_ms(10);
    }
    fail_msg("%s did not write its port file in 15 s", script);
}

static TU_UNUSED void srv_stop(srv *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", s->dir);
}

/* The records so far (a JSON array; caller json_decref). */
static TU_UNUSED json_t *srv_records(const srv *s)
{
    json_t *arr = json_array();
    FILE *f = fopen(s->log, "r");
    if (f == NULL)
        return arr;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t e;
        json_t *r = json_loads(line, 0, &e);
        if (r != NULL) /* a line still being written is skipped */
            json_array_append_new(arr, r);
    }
    free(line);
    fclose(f);
    return arr;
}

static TU_UNUSED size_t srv_count(const srv *s)
{
    json_t *r = srv_records(s);
    size_t n = json_array_size(r);
    json_decref(r);
    return n;
}

/* Poll (generous: 30 s) until the server recorded at least n requests. */
static TU_UNUSED void srv_wait(const srv *s, size_t n)
{
    int64_t end = tu_now_ms() + 30000;
    while (srv_count(s) < n && tu_now_ms() < end)
        tu_sleep_ms(10);
    assert_true(srv_count(s) >= n);
}

static TU_UNUSED const char *rec_str(json_t *rec, const char *key)
{
    return json_string_value(json_object_get(rec, key));
}

static TU_UNUSED const char *rec_header(json_t *rec, const char *name)
{
    return json_string_value(
        json_object_get(json_object_get(rec, "headers"), name));
}

/* Write text to a temporary config and load it. */
static TU_UNUSED tw_config *tu_config(const char *text)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/tw_act_cfg_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    tw_config *c = NULL;
    char err[512];
    int rc = tw_config_load(path, &c, err, sizeof(err));
    unlink(path);
    if (rc != TW_OK)
        fail_msg("config: %s", err);
    return c;
}

/* Poll until pred(counters) holds (30 s at most). */
typedef int (*tu_pred)(const tw_action_counters *c, void *ud);
static TU_UNUSED void tu_wait_counters(tw_actions *a, tu_pred pred, void *ud,
                                       const char *what)
{
    int64_t end = tu_now_ms() + 30000;
    tw_action_counters c;
    for (;;) {
        tw_actions_get_counters(a, &c);
        if (pred(&c, ud))
            return;
        if (tu_now_ms() > end)
            fail_msg("timed out waiting for: %s", what);
        tu_sleep_ms(5);
    }
}

/* Idle: nothing queued or in flight. */
static TU_UNUSED int tu_idle(const tw_action_counters *c, void *ud)
{
    (void)ud;
    return c->queued == 0;
}

/* The whole captured log (caller frees). */
static TU_UNUSED char *tu_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    if (s != NULL && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = '\0';
    fclose(f);
    return s;
}

#endif /* TW_ACTION_TEST_UTIL_H */
