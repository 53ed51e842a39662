/*
 * host_sampler.h - samples this host the way the profiler agent does, as
 * system series of RULES.md §1.2 (names, types and dimensions exactly as
 * the table there):
 *
 *   cpu     cpu<i>                           CPUUtilization     %
 *   cpu     cpu<i>                           I/OWaitPercentage  %
 *   gpu     gpu<i>                           GPUUtilization     %
 *   gpu     gpu<i>                           GPUMemoryUtilization %
 *   memory  MemoryUsedPercent                ""                 %
 *   network ReceiveBytesPerSecond,
 *           TransmitBytesPerSecond           Algorithm          bytes/s
 *   i/o     IOPS, ReadThroughputInBytesPerSecond,
 *           WriteThroughputInBytesPerSecond  ""
 *
 * Sources and definitions:
 *  - CPU: /proc/stat per-core counters, as deltas between two rounds.
 *    total = user+nice+system+idle+iowait+irq+softirq+steal (guest time is
 *    already inside user/nice); CPUUtilization = (total - idle - iowait) /
 *    total * 100 (psutil's cpu_percent); I/OWaitPercentage = iowait /
 *    total * 100. A core with no time elapsed reads 0.
 *  - Memory: /proc/meminfo, (MemTotal - MemAvailable) / MemTotal * 100
 *    (psutil's virtual_memory().percent).
 *  - Network: /proc/net/dev, bytes received/transmitted per second summed
 *    over every interface except `lo`.
 *  - Disk: /proc/diskstats summed over whole disks (not partitions, not
 *    loop, ram, zram, sr, fd, dm- or md devices, which would count the same
 *    I/O twice): IOPS = completed reads + writes per second; throughput =
 *    sectors * 512 per second.
 *  - GPUs: NVML, loaded with dlopen("libnvidia-ml.so.1") when it exists:
 *    GPUUtilization = nvmlDeviceGetUtilizationRates().gpu;
 *    GPUMemoryUtilization = memory used / total * 100 from
 *    nvmlDeviceGetMemoryInfo (the footprint GPUMemoryIncrease watches).
 *    Without NVML (or with no GPU) GPUs are skipped, said once in the log.
 *  Rates and CPU percentages need two readings: tw_host_sampler_new()
 *  takes the first, each tw_host_sampler_sample() the next.
 *  Counters that go backwards (wrap, hot-unplug) give a delta of 0.
 *
 * The parse functions take the files' text so tests can feed fixtures.
 *
 * Ownership: the sampler owns its series dictionary (valid until
 * tw_host_sampler_free); samples are appended to a caller-owned
 * tw_sample_vec (free its `v` with free()).
 */
#ifndef TW_HOST_SAMPLER_H
#define TW_HOST_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"

/* Highest core count handled (cpu0..cpu4095). */
#define TW_HOST_MAX_CPUS 4096

typedef struct tw_cpu_times {
    int present; /* a cpu<i> line was there */
    uint64_t user, nice, system, idle, iowait, irq, softirq, steal;
} tw_cpu_times;

/* Fills cpu[i] for every "cpu<i>" line of /proc/stat text with i < cap
 * (others are left with present = 0); *ncpus = 1 + the highest index
 * seen. Returns 0, or -1 when there is no per-core line. */
int tw_host_parse_stat(const char *text, tw_cpu_times *cpu, size_t cap,
                       size_t *ncpus);

/* Percentages between two readings of one core (see above). */
void tw_host_cpu_percent(const tw_cpu_times *prev, const tw_cpu_times *cur,
                         double *util, double *iowait);

/* Returns 0 and *used_percent, or -1 when MemTotal or MemAvailable is
 * missing or MemTotal is 0. */
int tw_host_parse_meminfo(const char *text, double *used_percent);

typedef struct tw_net_totals {
    uint64_t rx_bytes, tx_bytes;
} tw_net_totals;

/* Sums /proc/net/dev over interfaces other than lo. Returns 0, or -1 when
 * the text has no interface line. */
int tw_host_parse_netdev(const char *text, tw_net_totals *out);

typedef struct tw_disk_totals {
    uint64_t ios;         /* reads + writes completed */
    uint64_t read_bytes;  /* sectors read * 512       */
    uint64_t write_bytes; /* sectors written * 512    */
} tw_disk_totals;

/* Sums /proc/diskstats over whole disks (see above). Returns 0 (also with
 * no disk: all zero), or -1 when a line is malformed. */
int tw_host_parse_diskstats(const char *text, tw_disk_totals *out);

typedef struct tw_sample_vec {
    tw_sample *v; /* malloc'd, owned by the caller */
    size_t n, cap;
} tw_sample_vec;

typedef struct tw_host_sampler_opts {
    const char *proc_root; /* NULL = "/proc"; tests point it at fixtures */
    int gpus;              /* 0 = do not try NVML                        */
    const char *nvml_path; /* NULL = "libnvidia-ml.so.1"                 */
} tw_host_sampler_opts;

typedef struct tw_host_sampler tw_host_sampler;

/* Takes the first reading. Returns 0, or -1 with a sentence in err (a
 * /proc file missing or unreadable). */
int tw_host_sampler_new(const tw_host_sampler_opts *o, tw_host_sampler **out,
                        char *err, size_t errlen);

/* The series dictionary: samples' .series index it. Fixed for the
 * sampler's life (cores and GPUs found at creation). */
const tw_batch_series *tw_host_sampler_series(const tw_host_sampler *s,
                                              size_t *nseries);

size_t tw_host_sampler_cpus(const tw_host_sampler *s);
size_t tw_host_sampler_gpus(const tw_host_sampler *s);

/* Takes one round and appends its samples (timestamps: the wall clock, in
 * epoch seconds, when each group was read). Returns 0, or -1 with a
 * sentence in err (a /proc file became unreadable, out of memory). */
int tw_host_sampler_sample(tw_host_sampler *s, tw_sample_vec *out, char *err,
                           size_t errlen);

void tw_host_sampler_free(tw_host_sampler *s);

#endif /* TW_HOST_SAMPLER_H */
