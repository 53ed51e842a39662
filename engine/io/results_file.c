/* results_file.c - results file names and the writer that holds results
 * until they are on disk (results_file.h). */
#include "results_file.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"

/* ---- names -------------------------------------------------------------- */

static int tw_results_kept_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

void tw_results_file_name(const char *id, char out[TW_RESULTS_NAME_LEN])
{
    static const char hex[] = "0123456789ABCDEF";
    /* "~h" + 16 hex digits end a cut name */
    const size_t hash_len = 2 + 16, cut_at = TW_RESULTS_NAME_MAX - hash_len;
    size_t o = 0, cut = 0;
    const unsigned char *p = (const unsigned char *)id;
    for (; *p != '\0'; p++) {
        char esc[3];
        size_t n;
        if (tw_results_kept_byte(*p) && !(o == 0 && *p == '.')) {
            esc[0] = (char)*p;
            n = 1;
        } else {
            esc[0] = '%';
            esc[1] = hex[*p >> 4];
            esc[2] = hex[*p & 0xf];
            n = 3;
        }
        if (o + n > TW_RESULTS_NAME_MAX)
            break;
        memcpy(out + o, esc, n);
        o += n;
        if (o <= cut_at)
            cut = o; /* the longest whole-escape prefix that leaves room */
    }
    if (*p != '\0') { /* too long: prefix, "~h", hash of the whole id */
        snprintf(out + cut, TW_RESULTS_NAME_LEN - cut, "~h%016" PRIx64,
                 tw_fnv1a64(id, strlen(id)));
        return;
    }
    if (o == 0)
        out[o++] = '~';
    out[o] = '\0';
}

/* ---- the writer --------------------------------------------------------- */

/* Results not on disk yet. */
typedef struct tw_held {
    char *id;
    char *data; /* the JSON and its final newline */
    size_t len;
    int64_t due_us;     /* next attempt, monotonic */
    int64_t backoff_us; /* wait after the next failure */
    uint32_t attempts;
    int warned;                 /* its one WARN was logged */
    char error[PATH_MAX + 128]; /* the last failure: what, where, why */
} tw_held;

struct tw_results_writer {
    char *dir;
    tw_held *held; /* in the order given */
    size_t nheld, cap;
    unsigned tmp_seq; /* temporary names of this writer */
    tw_results_stats stats;
};

int tw_results_writer_new(const char *dir, tw_results_writer **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    tw_results_writer *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->dir = strdup(dir)) == NULL) {
        free(w);
        snprintf(err, errlen, "results writer for '%s': out of memory", dir);
        return TW_ERR;
    }
    *out = w;
    return TW_OK;
}

static void tw_held_free(tw_held *h)
{
    free(h->id);
    free(h->data);
}

void tw_results_writer_free(tw_results_writer *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->nheld; i++) {
        tw_log(TW_LOG_ERROR,
               "job %s: results never written after %" PRIu32
               " attempts (%s); lost from this process",
               w->held[i].id, w->held[i].attempts, w->held[i].error);
        tw_held_free(&w->held[i]);
    }
    free(w->held);
    free(w->dir);
    free(w);
}

/* Sets h->error and returns -1 (errno kept). */
static int tw_held_fail(tw_held *h, const char *what, const char *path)
{
    int e = errno;
    snprintf(h->error, sizeof(h->error), "%s %s: %s", what, path, strerror(e));
    errno = e;
    return -1;
}

/* snprintf into a path buffer: -1 (ENAMETOOLONG) when it does not fit. */
__attribute__((format(printf, 3, 4))) static int tw_path(char *out, size_t len,
                                                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

static int tw_write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* 1: file `path` holds exactly data[0..len); 0: other bytes, or no
 * regular file (a dangling link, a FIFO: never waited on); -1: error. */
static int tw_same_bytes(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT || errno == ELOOP ? 0 : -1;
    struct stat sb;
    int same = -1;
    if (fstat(fd, &sb) == 0) {
        same = S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == len;
        char buf[65536];
        size_t at = 0;
        while (same == 1 && at < len) {
            ssize_t n = read(fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                same = -1;
            } else if (n == 0 || (size_t)n > len - at ||
                       memcmp(buf, data + at, (size_t)n) != 0) {
                same = 0;
            } else {
                at += (size_t)n;
            }
        }
    }
    int e = errno;
    close(fd);
    errno = e;
    return same;
}

static int tw_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    /* some file systems cannot sync a folder: nothing more to do there */
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Makes path name tmp without replacing an existing file: 0, or -1 with
 * errno (EEXIST: path exists). */
static int tw_place(const char *tmp, const char *path)
{
    if (link(tmp, path) == 0)
        return 0;
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP &&
        errno != ENOSYS)
        return -1;
    /* no hard links on this file system: check, then rename (racy only
     * against another writer of the same name at the same moment) */
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        errno = EEXIST;
        return -1;
    }
    if (errno != ENOENT)
        return -1;
    return rename(tmp, path);
}

/* 1: s is "<digits>-<digits>" and nothing else (a temporary name's tail). */
static int tw_pid_seq_tail(const char *s)
{
    size_t a = strspn(s, "0123456789");
    if (a == 0 || s[a] != '-')
        return 0;
    size_t b = strspn(s + a + 1, "0123456789");
    return b > 0 && s[a + 1 + b] == '\0';
}

/* Removes the temporary files of `name` (".<name>.tmp-<pid>-<n>") left by
 * writes that a crash interrupted before they were linked: partial or
 * unplaced copies that nothing else would ever remove. A job has one owner
 * at a time, so none is a live write; were one (two engines, one folder),
 * its link would fail and its writer would retry. Failures only warn: the
 * results are placed already. */
static void tw_results_remove_leftovers(const tw_results_writer *w,
                                        const char *id, const char *name)
{
    DIR *d = opendir(w->dir);
    if (d == NULL) {
        tw_log(TW_LOG_WARN,
               "job %s: cannot list %s for leftover temporary "
               "files: %s",
               id, w->dir, strerror(errno));
        return;
    }
    size_t n = strlen(name);
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *f = e->d_name;
        if (f[0] != '.' || strncmp(f + 1, name, n) != 0 ||
            strncmp(f + 1 + n, ".tmp-", 5) != 0 ||
            !tw_pid_seq_tail(f + 1 + n + 5))
            continue;
        if (unlinkat(dirfd(d), f, 0) == 0)
            tw_log(TW_LOG_INFO,
                   "job %s: removed %s/%s, left by a write that a crash "
                   "interrupted",
                   id, w->dir, f);
        else if (errno != ENOENT)
            tw_log(TW_LOG_WARN, "job %s: cannot remove %s/%s: %s", id, w->dir,
                   f, strerror(errno));
    }
    closedir(d);
}

/* Writes h: 0 on disk (*path_out names the file, *version its number,
 * 1 = <name>.json); -1 failed (h->error says what, where and why). */
static int tw_held_write(tw_results_writer *w, tw_held *h, char *path_out,
                         size_t path_len, unsigned *version)
{
    char name[TW_RESULTS_NAME_LEN], tmp[PATH_MAX];
    tw_results_file_name(h->id, name);
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        if (tw_path(tmp, sizeof(tmp), "%s/.%s.tmp-%ld-%u", w->dir, name,
                    (long)getpid(), w->tmp_seq++) != 0)
            return tw_held_fail(h, "name a file in", w->dir);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return tw_held_fail(h, "create", tmp);
    if (tw_write_all(fd, h->data, h->len) != 0 || fsync(fd) != 0) {
        tw_held_fail(h, "write", tmp);
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (close(fd) != 0) {
        tw_held_fail(h, "close", tmp);
        unlink(tmp);
        return -1;
    }
    int placed = 0;
    unsigned v;
    for (v = 1; !placed && v < TW_RESULTS_VERSIONS_MAX; v++) {
        int bad = v == 1
                      ? tw_path(path_out, path_len, "%s/%s.json", w->dir, name)
                      : tw_path(path_out, path_len, "%s/%s~v%u.json", w->dir,
                                name, v);
        if (bad) {
            tw_held_fail(h, "name a file in", w->dir);
            break;
        }
        if (tw_place(tmp, path_out) == 0) {
            placed = 1;
            break;
        }
        if (errno != EEXIST) {
            tw_held_fail(h, "link", path_out);
            break;
        }
        int same = tw_same_bytes(path_out, h->data, h->len);
        if (same < 0) {
            tw_held_fail(h, "read", path_out);
            break;
        }
        if (same) { /* the same results are there already */
            placed = 1;
            break;
        }
    }
    if (!placed && v == TW_RESULTS_VERSIONS_MAX) {
        errno = EEXIST;
        tw_held_fail(h, "find a free version of", path_out);
    }
    if (unlink(tmp) != 0 && errno != ENOENT)
        tw_log(TW_LOG_WARN, "job %s: cannot remove %s: %s", h->id, tmp,
               strerror(errno));
    if (!placed)
        return -1;
    tw_results_remove_leftovers(w, h->id, name);
    if (tw_fsync_dir(w->dir) != 0)
        return tw_held_fail(h, "sync folder", w->dir);
    *version = v;
    return 0;
}

/* One attempt at h: 1 on disk, 0 held. */
static int tw_held_attempt(tw_results_writer *w, tw_held *h, int64_t now_us)
{
    char path[PATH_MAX];
    unsigned version = 1;
    if (h->attempts++ > 0)
        w->stats.retries++;
    if (tw_held_write(w, h, path, sizeof(path), &version) != 0) {
        w->stats.failures++;
        if (!h->warned) {
            tw_log(TW_LOG_WARN,
                   "job %s: results not written (%s); kept and tried again "
                   "with backoff",
                   h->id, h->error);
            h->warned = 1;
        } else {
            tw_log(TW_LOG_DEBUG, "job %s: results attempt %" PRIu32 ": %s",
                   h->id, h->attempts, h->error);
        }
        h->due_us = now_us > INT64_MAX - h->backoff_us ? INT64_MAX
                                                       : now_us + h->backoff_us;
        h->backoff_us = h->backoff_us * 2 > TW_RESULTS_BACKOFF_MAX_US
                            ? TW_RESULTS_BACKOFF_MAX_US
                            : h->backoff_us * 2;
        return 0;
    }
    w->stats.written++;
    if (version > 1) {
        w->stats.versions++;
        char name[TW_RESULTS_NAME_LEN];
        tw_results_file_name(h->id, name);
        tw_log(TW_LOG_WARN,
               "job %s: %s/%s.json holds other results of this job id (or "
               "another id with the same name); these are in %s",
               h->id, w->dir, name, path);
    }
    if (h->attempts > 1)
        tw_log(TW_LOG_INFO,
               "job %s: results written to %s after %" PRIu32 " attempts",
               h->id, path, h->attempts);
    else
        tw_log(TW_LOG_INFO, "job %s: results written to %s", h->id, path);
    return 1;
}

static int tw_results_earlier_held(const tw_results_writer *w, size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (strcmp(w->held[k].id, w->held[i].id) == 0)
            return 1;
    return 0;
}

static void tw_results_remove(tw_results_writer *w, size_t i)
{
    w->stats.pending--;
    w->stats.pending_bytes -= w->held[i].len;
    tw_held_free(&w->held[i]);
    memmove(&w->held[i], &w->held[i + 1],
            (w->nheld - i - 1) * sizeof(w->held[0]));
    w->nheld--;
}

int tw_results_put(tw_results_writer *w, const char *id, const char *json,
                   size_t len, int64_t now_us)
{
    if (w->nheld == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4;
        tw_held *n = realloc(w->held, cap * sizeof(*n));
        if (n == NULL)
            goto oom;
        w->held = n;
        w->cap = cap;
    }
    tw_held *h = &w->held[w->nheld];
    memset(h, 0, sizeof(*h));
    h->id = strdup(id);
    h->data = malloc(len + 1);
    if (h->id == NULL || h->data == NULL) {
        tw_held_free(h);
        goto oom;
    }
    memcpy(h->data, json, len);
    h->data[len] = '\n';
    h->len = len + 1;
    h->due_us = now_us;
    h->backoff_us = TW_RESULTS_BACKOFF_MIN_US;
    snprintf(h->error, sizeof(h->error), "not tried yet");
    size_t i = w->nheld++;
    w->stats.pending++;
    w->stats.pending_bytes += h->len;
    if (tw_results_earlier_held(w, i))
        return TW_RESULTS_HELD;
    if (tw_held_attempt(w, h, now_us)) {
        tw_results_remove(w, i);
        return TW_OK;
    }
    return TW_RESULTS_HELD;
oom:
    tw_log(TW_LOG_ERROR, "job %s: out of memory keeping its results", id);
    return TW_ERR;
}

size_t tw_results_retry(tw_results_writer *w, int64_t now_us)
{
    for (size_t i = 0; i < w->nheld;) {
        tw_held *h = &w->held[i];
        if (h->due_us <= now_us && !tw_results_earlier_held(w, i) &&
            tw_held_attempt(w, h, now_us)) {
            tw_results_remove(w, i);
            continue;
        }
        i++;
    }
    return w->nheld;
}

int tw_results_pending_job(const tw_results_writer *w, const char *id)
{
    for (size_t i = 0; i < w->nheld; i++)
        if (strcmp(w->held[i].id, id) == 0)
            return 1;
    return 0;
}

int64_t tw_results_next_retry_us(const tw_results_writer *w)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < w->nheld; i++)
        if (w->held[i].due_us < next)
            next = w->held[i].due_us;
    return next;
}

void tw_results_get_stats(const tw_results_writer *w, tw_results_stats *out)
{
    *out = w->stats;
}
