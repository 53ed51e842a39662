/* host_sampler.c - /proc and NVML sampling of this host (host_sampler.h). */
#include "host_sampler.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

/* ---- parsing ---------------------------------------------------------- */

/* Next line of text: returns its start and sets *len (without '\n'), or
 * NULL at the end. *pos advances past the line. */
static const char *tw_host_next_line(const char *text, size_t *pos, size_t *len)
{
    const char *p = text + *pos;
    if (*p == '\0')
        return NULL;
    const char *nl = strchr(p, '\n');
    *len = nl != NULL ? (size_t)(nl - p) : strlen(p);
    *pos += *len + (nl != NULL ? 1 : 0);
    return p;
}

/* Parses up to max unsigned decimal fields separated by blanks from
 * [p, end). Returns how many were read. */
static size_t tw_host_u64_fields(const char *p, const char *end, uint64_t *out,
                                 size_t max)
{
    size_t n = 0;
    while (n < max) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            break;
        uint64_t v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            v = v * 10 + (uint64_t)(*p - '0');
            p++;
        }
        out[n++] = v;
    }
    return n;
}

int tw_host_parse_stat(const char *text, tw_cpu_times *cpu, size_t cap,
                       size_t *ncpus)
{
    for (size_t i = 0; i < cap; i++)
        memset(&cpu[i], 0, sizeof(cpu[i]));
    *ncpus = 0;
    size_t pos = 0, len;
    const char *line;
    int found = 0;
    while ((line = tw_host_next_line(text, &pos, &len)) != NULL) {
        if (len < 4 || strncmp(line, "cpu", 3) != 0 || line[3] < '0' ||
            line[3] > '9')
            continue;
        const char *end = line + len;
        const char *p = line + 3;
        size_t idx = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            idx = idx * 10 + (size_t)(*p - '0');
            if (idx > TW_HOST_MAX_CPUS)
                break;
            p++;
        }
        uint64_t f[8] = {0};
        /* Old kernels have fewer than 8 columns; the missing ones are 0. */
        if (tw_host_u64_fields(p, end, f, 8) < 4 || idx >= cap)
            continue;
        cpu[idx] = (tw_cpu_times){.present = 1,
                                  .user = f[0],
                                  .nice = f[1],
                                  .system = f[2],
                                  .idle = f[3],
                                  .iowait = f[4],
                                  .irq = f[5],
                                  .softirq = f[6],
                                  .steal = f[7]};
        if (idx + 1 > *ncpus)
            *ncpus = idx + 1;
        found = 1;
    }
    return found ? 0 : -1;
}

static uint64_t tw_host_delta(uint64_t prev, uint64_t cur)
{
    return cur >= prev ? cur - prev : 0;
}

void tw_host_cpu_percent(const tw_cpu_times *prev, const tw_cpu_times *cur,
                         double *util, double *iowait)
{
    uint64_t idle = tw_host_delta(prev->idle, cur->idle);
    uint64_t io = tw_host_delta(prev->iowait, cur->iowait);
    uint64_t total = tw_host_delta(prev->user, cur->user) +
                     tw_host_delta(prev->nice, cur->nice) +
                     tw_host_delta(prev->system, cur->system) + idle + io +
                     tw_host_delta(prev->irq, cur->irq) +
                     tw_host_delta(prev->softirq, cur->softirq) +
                     tw_host_delta(prev->steal, cur->steal);
    if (total == 0) {
        *util = 0.0;
        *iowait = 0.0;
        return;
    }
    *util = (double)(total - idle - io) * 100.0 / (double)total;
    *iowait = (double)io * 100.0 / (double)total;
}

int tw_host_parse_meminfo(const char *text, double *used_percent)
{
    uint64_t total = 0, avail = 0;
    int have_total = 0, have_avail = 0;
    size_t pos = 0, len;
    const char *line;
    while ((line = tw_host_next_line(text, &pos, &len)) != NULL) {
        uint64_t v;
        if (len > 9 && strncmp(line, "MemTotal:", 9) == 0 &&
            tw_host_u64_fields(line + 9, line + len, &v, 1) == 1) {
            total = v;
            have_total = 1;
        } else if (len > 13 && strncmp(line, "MemAvailable:", 13) == 0 &&
                   tw_host_u64_fields(line + 13, line + len, &v, 1) == 1) {
            avail = v;
            have_avail = 1;
        }
    }
    if (!have_total || !have_avail || total == 0)
        return -1;
    uint64_t used = avail <= total ? total - avail : 0;
    *used_percent = (double)used * 100.0 / (double)total;
    return 0;
}

int tw_host_parse_netdev(const char *text, tw_net_totals *out)
{
    memset(out, 0, sizeof(*out));
    size_t pos = 0, len;
    const char *line;
    int found = 0;
    while ((line = tw_host_next_line(text, &pos, &len)) != NULL) {
        const char *end = line + len;
        const char *colon = memchr(line, ':', len);
        if (colon == NULL)
            continue; /* the two header lines */
        const char *name = line;
        while (name < colon && (*name == ' ' || *name == '\t'))
            name++;
        size_t nlen = (size_t)(colon - name);
        uint64_t f[9];
        if (tw_host_u64_fields(colon + 1, end, f, 9) < 9)
            continue;
        found = 1;
        if (nlen == 2 && strncmp(name, "lo", 2) == 0)
            continue;
        out->rx_bytes += f[0];
        out->tx_bytes += f[8];
    }
    return found ? 0 : -1;
}

/* Devices that are not disks of their own or would count I/O twice. */
static int tw_host_disk_skipped(const char *name, size_t len)
{
    static const char *const prefixes[] = {"loop", "ram", "zram", "sr",
                                           "fd",   "dm-", "md"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t pl = strlen(prefixes[i]);
        if (len >= pl && strncmp(name, prefixes[i], pl) == 0)
            return 1;
    }
    return 0;
}

int tw_host_parse_diskstats(const char *text, tw_disk_totals *out)
{
    memset(out, 0, sizeof(*out));
    /* The last whole disk seen: partitions follow their disk. */
    char disk[64] = "";
    size_t disklen = 0;
    size_t pos = 0, len;
    const char *line;
    while ((line = tw_host_next_line(text, &pos, &len)) != NULL) {
        const char *end = line + len;
        uint64_t mm[2];
        const char *p = line;
        if (tw_host_u64_fields(p, end, mm, 2) == 0) {
            /* blank line */
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if (p == end)
                continue;
            return -1;
        }
        /* Skip major and minor, then read the name. */
        for (int k = 0; k < 2; k++) {
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            while (p < end && *p >= '0' && *p <= '9')
                p++;
        }
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *name = p;
        while (p < end && *p != ' ' && *p != '\t')
            p++;
        size_t nlen = (size_t)(p - name);
        uint64_t f[7];
        if (nlen == 0 || tw_host_u64_fields(p, end, f, 7) < 7)
            return -1;
        if (tw_host_disk_skipped(name, nlen))
            continue;
        /* A partition: the last disk's name followed by [p]digits. */
        if (disklen > 0 && nlen > disklen &&
            strncmp(name, disk, disklen) == 0) {
            const char *q = name + disklen;
            if (*q == 'p')
                q++;
            while (q < name + nlen && *q >= '0' && *q <= '9')
                q++;
            if (q == name + nlen)
                continue;
        }
        if (nlen < sizeof(disk)) {
            memcpy(disk, name, nlen);
            disk[nlen] = '\0';
            disklen = nlen;
        }
        out->ios += f[0] + f[4];
        out->read_bytes += f[2] * 512;
        out->write_bytes += f[6] * 512;
    }
    return 0;
}

/* ---- NVML (declared here: no NVML header is needed) ------------------- */

typedef int tw_nvml_return;
typedef struct tw_nvml_device_st *tw_nvml_device;
typedef struct tw_nvml_utilization {
    unsigned int gpu;
    unsigned int memory;
} tw_nvml_utilization;
typedef struct tw_nvml_memory {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} tw_nvml_memory;

typedef struct tw_nvml {
    void *lib;
    tw_nvml_return (*init)(void);
    tw_nvml_return (*shutdown)(void);
    tw_nvml_return (*count)(unsigned int *);
    tw_nvml_return (*handle)(unsigned int, tw_nvml_device *);
    tw_nvml_return (*util)(tw_nvml_device, tw_nvml_utilization *);
    tw_nvml_return (*mem)(tw_nvml_device, tw_nvml_memory *);
    tw_nvml_device *devices;
    unsigned int ndevices;
    int reported_failure; /* one log line for sampling failures */
} tw_nvml;

static void tw_nvml_close(tw_nvml *n)
{
    if (n->lib == NULL)
        return;
    if (n->ndevices > 0 || n->devices != NULL)
        n->shutdown();
    free(n->devices);
    dlclose(n->lib);
    memset(n, 0, sizeof(*n));
}

/* Loads NVML and finds the GPUs. Any failure leaves n empty after one log
 * line: the agent then samples without GPUs. */
static void tw_nvml_open(tw_nvml *n, const char *path)
{
    memset(n, 0, sizeof(*n));
    n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (n->lib == NULL) {
        const char *why = dlerror();
        tw_log(TW_LOG_INFO,
               "host sampler: NVML not available (%s): GPUs are "
               "not sampled",
               why != NULL ? why : path);
        return;
    }
    /* POSIX: a function pointer may hold dlsym()'s result. */
    *(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
    *(void **)&n->count = dlsym(n->lib, "nvmlDeviceGetCount_v2");
    *(void **)&n->handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&n->util = dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
    *(void **)&n->mem = dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
    if (n->init == NULL || n->shutdown == NULL || n->count == NULL ||
        n->handle == NULL || n->util == NULL || n->mem == NULL) {
        tw_log(TW_LOG_WARN,
               "host sampler: %s lacks an NVML function this "
               "agent needs: GPUs are not sampled",
               path);
        dlclose(n->lib);
        n->lib = NULL;
        return;
    }
    tw_nvml_return rc = n->init();
    if (rc != 0) {
        tw_log(TW_LOG_WARN,
               "host sampler: nvmlInit_v2 failed (NVML error "
               "%d): GPUs are not sampled",
               rc);
        dlclose(n->lib);
        n->lib = NULL;
        return;
    }
    unsigned int count = 0;
    rc = n->count(&count);
    if (rc != 0 || count == 0) {
        tw_log(TW_LOG_INFO,
               "host sampler: NVML reports %s: GPUs are not "
               "sampled",
               rc != 0 ? "an error counting devices" : "no GPU");
        n->shutdown();
        dlclose(n->lib);
        n->lib = NULL;
        return;
    }
    n->devices = calloc(count, sizeof(*n->devices));
    if (n->devices == NULL) {
        tw_log(TW_LOG_WARN, "host sampler: out of memory: GPUs are not "
                            "sampled");
        tw_nvml_close(n);
        return;
    }
    for (unsigned int i = 0; i < count; i++) {
        rc = n->handle(i, &n->devices[i]);
        if (rc != 0) {
            tw_log(TW_LOG_WARN,
                   "host sampler: NVML has no handle for GPU "
                   "%u (error %d): GPUs are not sampled",
                   i, rc);
            tw_nvml_close(n);
            return;
        }
    }
    n->ndevices = count;
    tw_log(TW_LOG_INFO, "host sampler: sampling %u GPU(s) through NVML", count);
}

/* ---- the sampler ------------------------------------------------------ */

struct tw_host_sampler {
    char *proc_root;
    char *buf; /* file contents, reused */
    size_t bufcap;

    size_t ncpus;
    tw_cpu_times *prev_cpu, *cur_cpu;
    int have_net, have_disk;
    tw_net_totals prev_net;
    tw_disk_totals prev_disk;
    double prev_rate_s; /* monotonic time of prev_net / prev_disk */

    tw_nvml nvml;

    tw_batch_series *series;
    size_t nseries;
    char **names; /* "cpu<i>", "gpu<i>": owned */
    size_t nnames;
    /* indexes into series */
    size_t s_gpu, s_mem, s_net, s_io;
};

/* Reads proc_root/rel into s->buf (NUL-terminated). */
static int tw_host_read(tw_host_sampler *s, const char *rel, char *err,
                        size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", s->proc_root, rel);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "host sampler: cannot open %s: %s", path,
                 strerror(errno));
        return -1;
    }
    size_t len = 0;
    for (;;) {
        if (s->bufcap - len < 4096) {
            size_t cap = s->bufcap == 0 ? 65536 : s->bufcap * 2;
            char *nb = realloc(s->buf, cap);
            if (nb == NULL) {
                close(fd);
                snprintf(err, errlen,
                         "host sampler: out of memory reading "
                         "%s",
                         path);
                return -1;
            }
            s->buf = nb;
            s->bufcap = cap;
        }
        ssize_t n = read(fd, s->buf + len, s->bufcap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "host sampler: cannot read %s: %s", path,
                     strerror(errno));
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    s->buf[len] = '\0';
    return 0;
}

static int tw_host_add_series(tw_host_sampler *s, const char *type,
                              const char *name, const char *dimension)
{
    s->series[s->nseries++] =
        (tw_batch_series){.type = type, .name = name, .dimension = dimension};
    return 0;
}

static char *tw_host_own_name(tw_host_sampler *s, const char *prefix, size_t i)
{
    char tmp[32];
    snprintf(tmp, sizeof(tmp), "%s%zu", prefix, i);
    char *n = strdup(tmp);
    if (n != NULL)
        s->names[s->nnames++] = n;
    return n;
}

static int tw_host_build_series(tw_host_sampler *s)
{
    size_t ngpus = s->nvml.ndevices;
    size_t max = 2 * s->ncpus + 2 * ngpus + 1 + 2 + 3;
    s->series = calloc(max, sizeof(*s->series));
    s->names = calloc(s->ncpus + ngpus, sizeof(*s->names));
    if (s->series == NULL || s->names == NULL)
        return -1;
    for (size_t i = 0; i < s->ncpus; i++) {
        const char *n = tw_host_own_name(s, "cpu", i);
        if (n == NULL)
            return -1;
        tw_host_add_series(s, "cpu", n, "CPUUtilization");
        tw_host_add_series(s, "cpu", n, "I/OWaitPercentage");
    }
    s->s_gpu = s->nseries;
    for (size_t i = 0; i < ngpus; i++) {
        const char *n = tw_host_own_name(s, "gpu", i);
        if (n == NULL)
            return -1;
        tw_host_add_series(s, "gpu", n, "GPUUtilization");
        tw_host_add_series(s, "gpu", n, "GPUMemoryUtilization");
    }
    s->s_mem = s->nseries;
    tw_host_add_series(s, "memory", "MemoryUsedPercent", "");
    s->s_net = s->nseries;
    tw_host_add_series(s, "network", "ReceiveBytesPerSecond", "Algorithm");
    tw_host_add_series(s, "network", "TransmitBytesPerSecond", "Algorithm");
    s->s_io = s->nseries;
    tw_host_add_series(s, "i/o", "IOPS", "");
    tw_host_add_series(s, "i/o", "ReadThroughputInBytesPerSecond", "");
    tw_host_add_series(s, "i/o", "WriteThroughputInBytesPerSecond", "");
    return 0;
}

int tw_host_sampler_new(const tw_host_sampler_opts *o, tw_host_sampler **out,
                        char *err, size_t errlen)
{
    *out = NULL;
    tw_host_sampler *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "host sampler: out of memory");
        return -1;
    }
    s->proc_root = strdup(o->proc_root != NULL ? o->proc_root : "/proc");
    s->prev_cpu = calloc(TW_HOST_MAX_CPUS, sizeof(*s->prev_cpu));
    s->cur_cpu = calloc(TW_HOST_MAX_CPUS, sizeof(*s->cur_cpu));
    if (s->proc_root == NULL || s->prev_cpu == NULL || s->cur_cpu == NULL) {
        snprintf(err, errlen, "host sampler: out of memory");
        goto fail;
    }
    if (tw_host_read(s, "stat", err, errlen) != 0)
        goto fail;
    if (tw_host_parse_stat(s->buf, s->prev_cpu, TW_HOST_MAX_CPUS, &s->ncpus) !=
        0) {
        snprintf(err, errlen, "host sampler: %s/stat has no cpu<N> line",
                 s->proc_root);
        goto fail;
    }
    double mem;
    if (tw_host_read(s, "meminfo", err, errlen) != 0)
        goto fail;
    if (tw_host_parse_meminfo(s->buf, &mem) != 0) {
        snprintf(err, errlen,
                 "host sampler: %s/meminfo lacks MemTotal or "
                 "MemAvailable",
                 s->proc_root);
        goto fail;
    }
    char why[512];
    s->have_net = tw_host_read(s, "net/dev", why, sizeof(why)) == 0 &&
                  tw_host_parse_netdev(s->buf, &s->prev_net) == 0;
    if (!s->have_net)
        tw_log(TW_LOG_WARN,
               "host sampler: no usable %s/net/dev: network is "
               "not sampled",
               s->proc_root);
    s->have_disk = tw_host_read(s, "diskstats", why, sizeof(why)) == 0 &&
                   tw_host_parse_diskstats(s->buf, &s->prev_disk) == 0;
    if (!s->have_disk)
        tw_log(TW_LOG_WARN,
               "host sampler: no usable %s/diskstats: disk I/O "
               "is not sampled",
               s->proc_root);
    s->prev_rate_s = (tw_mono_us() / 1e6);
    if (o->gpus)
        tw_nvml_open(&s->nvml,
                     o->nvml_path != NULL ? o->nvml_path : "libnvidia-ml.so.1");
    if (tw_host_build_series(s) != 0) {
        snprintf(err, errlen, "host sampler: out of memory");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    tw_host_sampler_free(s);
    return -1;
}

const tw_batch_series *tw_host_sampler_series(const tw_host_sampler *s,
                                              size_t *nseries)
{
    *nseries = s->nseries;
    return s->series;
}

size_t tw_host_sampler_cpus(const tw_host_sampler *s)
{
    return s->ncpus;
}

size_t tw_host_sampler_gpus(const tw_host_sampler *s)
{
    return s->nvml.ndevices;
}

static int tw_host_push(tw_sample_vec *v, size_t series, double ts,
                        double value)
{
    if (v->n == v->cap) {
        size_t cap = v->cap == 0 ? 256 : v->cap * 2;
        tw_sample *nv = realloc(v->v, cap * sizeof(*nv));
        if (nv == NULL)
            return -1;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = (tw_sample){
        .ts = ts, .value = value, .series = (uint32_t)series, .flags = 0};
    return 0;
}

static int tw_host_sample_gpus(tw_host_sampler *s, tw_sample_vec *out)
{
    tw_nvml *n = &s->nvml;
    for (unsigned int i = 0; i < n->ndevices; i++) {
        tw_nvml_utilization u;
        tw_nvml_memory m;
        double ts = (tw_wall_us() / 1e6);
        tw_nvml_return ru = n->util(n->devices[i], &u);
        tw_nvml_return rm = n->mem(n->devices[i], &m);
        if (ru != 0 || rm != 0) {
            if (!n->reported_failure)
                tw_log(TW_LOG_WARN,
                       "host sampler: NVML cannot read GPU %u (error %d): "
                       "its samples are skipped while that lasts",
                       i, ru != 0 ? ru : rm);
            n->reported_failure = 1;
            continue;
        }
        double mem =
            m.total > 0 ? (double)m.used * 100.0 / (double)m.total : 0.0;
        if (tw_host_push(out, s->s_gpu + 2 * i, ts, (double)u.gpu) != 0 ||
            tw_host_push(out, s->s_gpu + 2 * i + 1, ts, mem) != 0)
            return -1;
    }
    return 0;
}

int tw_host_sampler_sample(tw_host_sampler *s, tw_sample_vec *out, char *err,
                           size_t errlen)
{
    size_t ncpus = 0;
    if (tw_host_read(s, "stat", err, errlen) != 0)
        return -1;
    double ts = (tw_wall_us() / 1e6);
    if (tw_host_parse_stat(s->buf, s->cur_cpu, TW_HOST_MAX_CPUS, &ncpus) != 0) {
        snprintf(err, errlen, "host sampler: %s/stat has no cpu<N> line",
                 s->proc_root);
        return -1;
    }
    for (size_t i = 0; i < s->ncpus; i++) {
        if (!s->cur_cpu[i].present || !s->prev_cpu[i].present)
            continue;
        double util, iow;
        tw_host_cpu_percent(&s->prev_cpu[i], &s->cur_cpu[i], &util, &iow);
        if (tw_host_push(out, 2 * i, ts, util) != 0 ||
            tw_host_push(out, 2 * i + 1, ts, iow) != 0)
            goto oom;
    }
    tw_cpu_times *t = s->prev_cpu;
    s->prev_cpu = s->cur_cpu;
    s->cur_cpu = t;

    if (tw_host_sample_gpus(s, out) != 0)
        goto oom;

    double mem;
    if (tw_host_read(s, "meminfo", err, errlen) != 0)
        return -1;
    ts = (tw_wall_us() / 1e6);
    if (tw_host_parse_meminfo(s->buf, &mem) == 0 &&
        tw_host_push(out, s->s_mem, ts, mem) != 0)
        goto oom;

    double now = (tw_mono_us() / 1e6);
    double dt = now - s->prev_rate_s;
    s->prev_rate_s = now;
    tw_net_totals net;
    if (s->have_net && tw_host_read(s, "net/dev", err, errlen) == 0 &&
        tw_host_parse_netdev(s->buf, &net) == 0) {
        ts = (tw_wall_us() / 1e6);
        if (dt > 0 && (tw_host_push(out, s->s_net, ts,
                                    (double)tw_host_delta(s->prev_net.rx_bytes,
                                                          net.rx_bytes) /
                                        dt) != 0 ||
                       tw_host_push(out, s->s_net + 1, ts,
                                    (double)tw_host_delta(s->prev_net.tx_bytes,
                                                          net.tx_bytes) /
                                        dt) != 0))
            goto oom;
        s->prev_net = net;
    }
    tw_disk_totals disk;
    if (s->have_disk && tw_host_read(s, "diskstats", err, errlen) == 0 &&
        tw_host_parse_diskstats(s->buf, &disk) == 0) {
        ts = (tw_wall_us() / 1e6);
        if (dt > 0 &&
            (tw_host_push(out, s->s_io, ts,
                          (double)tw_host_delta(s->prev_disk.ios, disk.ios) /
                              dt) != 0 ||
             tw_host_push(out, s->s_io + 1, ts,
                          (double)tw_host_delta(s->prev_disk.read_bytes,
                                                disk.read_bytes) /
                              dt) != 0 ||
             tw_host_push(out, s->s_io + 2, ts,
                          (double)tw_host_delta(s->prev_disk.write_bytes,
                                                disk.write_bytes) /
                              dt) != 0))
            goto oom;
        s->prev_disk = disk;
    }
    return 0;
oom:
    snprintf(err, errlen, "host sampler: out of memory");
    return -1;
}

void tw_host_sampler_free(tw_host_sampler *s)
{
    if (s == NULL)
        return;
    tw_nvml_close(&s->nvml);
    for (size_t i = 0; i < s->nnames; i++)
        free(s->names[i]);
    free(s->names);
    free(s->series);
    free(s->prev_cpu);
    free(s->cur_cpu);
    free(s->buf);
    free(s->proc_root);
    free(s);
}
