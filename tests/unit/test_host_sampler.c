/* test_host_sampler.c - /proc parsing and the agent's computed series, from
 * fixture text (host_sampler.h). */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_sampler.h"

/* cmocka 1.1's float assertion works in float precision: compare doubles. */
#define assert_near(a, b, eps)                                                 \
    assert_true(fabs((double)(a) - (double)(b)) <= (double)(eps))

/* A 4-core host; the first reading. cpu3 has an old kernel's 4 columns. */
static const char stat_a[] = "cpu  4000 100 2000 90000 800 10 20 0 0 0\n"
                             "cpu0 1000 0 500 20000 200 0 0 0 0 0\n"
                             "cpu1 1000 100 500 25000 300 10 20 0 0 0\n"
                             "cpu2 1000 0 500 20000 300 0 0 0 0 0\n"
                             "cpu3 1000 0 500 25000\n"
                             "intr 123456 1 2 3\n"
                             "ctxt 987654\n"
                             "btime 1700000000\n"
                             "processes 4242\n";

/* One interval later (100 jiffies per core would be one second). */
static const char stat_b[] =
    "cpu  4300 100 2100 90200 850 10 20 0 0 0\n"
    /* cpu0: user +60 system +20 idle +10 iowait +10 = 100: 80 % busy,
     * 10 % iowait */
    "cpu0 1060 0 520 20010 210 0 0 0 0 0\n"
    /* cpu1: user +10 nice +0 idle +60 iowait +20 irq +5 softirq +5 steal
     * +0 = 100: 20 % busy, 20 % iowait */
    "cpu1 1010 100 500 25060 320 15 25 0 0 0\n"
    /* cpu2: nothing elapsed */
    "cpu2 1000 0 500 20000 300 0 0 0 0 0\n"
    /* cpu3: counters went backwards (reset): all deltas 0 */
    "cpu3 900 0 400 24000\n";

static const char meminfo_a[] = "MemTotal:       16000000 kB\n"
                                "MemFree:         2000000 kB\n"
                                "MemAvailable:   12000000 kB\n"
                                "Buffers:          500000 kB\n"
                                "Cached:          6000000 kB\n";

static const char meminfo_b[] = "MemTotal:       16000000 kB\n"
                                "MemFree:         1000000 kB\n"
                                "MemAvailable:    4000000 kB\n";

static const char netdev_a[] =
    "Inter-|   Receive                                                |  "
    "Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes"
    "    packets errs drop fifo colls carrier compressed\n"
    "    lo: 5000000   5000    0    0    0     0          0         0  "
    "5000000   5000    0    0    0     0       0          0\n"
    "  eth0: 1000000   900    0    0    0     0          0         0   "
    "200000    800    0    0    0     0       0          0\n"
    "  eth1:3000000   900    0    0    0     0          0         0   "
    "100000    800    0    0    0     0       0          0\n";

static const char netdev_b[] =
    "Inter-|   Receive                                                |  "
    "Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes"
    "    packets errs drop fifo colls carrier compressed\n"
    "    lo: 9000000   5000    0    0    0     0          0         0  "
    "9000000   5000    0    0    0     0       0          0\n"
    "  eth0: 1600000   900    0    0    0     0          0         0   "
    "250000    800    0    0    0     0       0          0\n"
    "  eth1:3600000   900    0    0    0     0          0         0   "
    "150000    800    0    0    0     0       0          0\n";

/* sda with two partitions, nvme0n1 with one, a loop and a dm device. */
static const char diskstats_a[] =
    "   7       0 loop0 500 0 1000 10 0 0 0 0 0 10 10 0 0 0 0\n"
    "   8       0 sda 1000 10 20000 300 2000 20 40000 500 0 700 800 0 0 0 "
    "0\n"
    "   8       1 sda1 900 10 18000 250 1900 20 38000 450 0 600 700 0 0 0 "
    "0\n"
    "   8       2 sda2 100 0 2000 50 100 0 2000 50 0 100 100 0 0 0 0\n"
    " 259       0 nvme0n1 3000 0 60000 100 1000 0 8000 100 0 200 200 0 0 "
    "0 0\n"
    " 259       1 nvme0n1p1 3000 0 60000 100 1000 0 8000 100 0 200 200 0 0 "
    "0 0\n"
    " 253       0 dm-0 5000 0 90000 100 3000 0 50000 100 0 200 200 0 0 0 "
    "0\n";

static void test_parse_stat(void **st)
{
    (void)st;
    tw_cpu_times cpu[8];
    size_t n = 0;
    assert_int_equal(tw_host_parse_stat(stat_a, cpu, 8, &n), 0);
    assert_int_equal(n, 4);
    assert_true(cpu[0].present && cpu[3].present);
    assert_int_equal(cpu[1].user, 1000);
    assert_int_equal(cpu[1].nice, 100);
    assert_int_equal(cpu[1].iowait, 300);
    assert_int_equal(cpu[1].softirq, 20);
    assert_int_equal(cpu[3].idle, 25000);
    assert_int_equal(cpu[3].iowait, 0);
    /* The aggregate "cpu " line and other lines are not cores. */
    assert_false(cpu[4].present);

    /* A gap (offline core) and an index beyond cap. */
    const char gap[] = "cpu0 1 2 3 4 5 6 7 8\ncpu2 1 2 3 4 5 6 7 8\n"
                       "cpu9 1 2 3 4 5 6 7 8\n";
    assert_int_equal(tw_host_parse_stat(gap, cpu, 8, &n), 0);
    assert_int_equal(n, 3);
    assert_true(cpu[0].present);
    assert_false(cpu[1].present);
    assert_true(cpu[2].present);
    assert_int_equal(cpu[2].steal, 8);

    assert_int_equal(tw_host_parse_stat("intr 1 2 3\n", cpu, 8, &n), -1);
    assert_int_equal(tw_host_parse_stat("", cpu, 8, &n), -1);
}

static void test_cpu_percent(void **st)
{
    (void)st;
    tw_cpu_times a[4], b[4];
    size_t n;
    assert_int_equal(tw_host_parse_stat(stat_a, a, 4, &n), 0);
    assert_int_equal(tw_host_parse_stat(stat_b, b, 4, &n), 0);
    double util, iow;
    tw_host_cpu_percent(&a[0], &b[0], &util, &iow);
    assert_near(util, 80.0, 1e-9);
    assert_near(iow, 10.0, 1e-9);
    tw_host_cpu_percent(&a[1], &b[1], &util, &iow);
    assert_near(util, 20.0, 1e-9);
    assert_near(iow, 20.0, 1e-9);
    tw_host_cpu_percent(&a[2], &b[2], &util, &iow);
    assert_near(util, 0.0, 0);
    assert_near(iow, 0.0, 0);
    tw_host_cpu_percent(&a[3], &b[3], &util, &iow);
    assert_near(util, 0.0, 0);
    assert_near(iow, 0.0, 0);
}

static void test_parse_meminfo(void **st)
{
    (void)st;
    double pct = -1;
    assert_int_equal(tw_host_parse_meminfo(meminfo_a, &pct), 0);
    assert_near(pct, 25.0, 1e-9);
    assert_int_equal(tw_host_parse_meminfo(meminfo_b, &pct), 0);
    assert_near(pct, 75.0, 1e-9);
    assert_int_equal(tw_host_parse_meminfo("MemTotal: 100 kB\n", &pct), -1);
    assert_int_equal(
        tw_host_parse_meminfo("MemTotal: 0 kB\nMemAvailable: 0 kB\n", &pct),
        -1);
}

static void test_parse_netdev(void **st)
{
    (void)st;
    tw_net_totals t;
    assert_int_equal(tw_host_parse_netdev(netdev_a, &t), 0);
    /* lo left out; "eth1:3000000" without a blank after the colon. */
    assert_int_equal(t.rx_bytes, 4000000);
    assert_int_equal(t.tx_bytes, 300000);
    assert_int_equal(tw_host_parse_netdev("Inter-|\n face |\n", &t), -1);
}

static void test_parse_diskstats(void **st)
{
    (void)st;
    tw_disk_totals t;
    assert_int_equal(tw_host_parse_diskstats(diskstats_a, &t), 0);
    /* sda + nvme0n1 only: no partitions, loop or dm devices. */
    assert_int_equal(t.ios, (1000 + 2000) + (3000 + 1000));
    assert_int_equal(t.read_bytes, (uint64_t)(20000 + 60000) * 512);
    assert_int_equal(t.write_bytes, (uint64_t)(40000 + 8000) * 512);
    assert_int_equal(tw_host_parse_diskstats("", &t), 0);
    assert_int_equal(t.ios, 0);
    assert_int_equal(tw_host_parse_diskstats("8 0 sda 1 2\n", &t), -1);
}

/* ---- the sampler over a fixture /proc -------------------------------- */

static void write_file(const char *dir, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void remove_fixture(const char *dir)
{
    static const char *const files[] = {"stat", "meminfo", "net/dev",
                                        "diskstats"};
    char path[512];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/net", dir);
    rmdir(path);
    rmdir(dir);
}

static const tw_sample *find(const tw_sample_vec *v,
                             const tw_batch_series *series, const char *name,
                             const char *dimension)
{
    for (size_t i = 0; i < v->n; i++) {
        const tw_batch_series *s = &series[v->v[i].series];
        if (strcmp(s->name, name) == 0 && strcmp(s->dimension, dimension) == 0)
            return &v->v[i];
    }
    return NULL;
}

static void test_sampler(void **st)
{
    (void)st;
    char dir[] = "/tmp/tw_proc_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char net[512];
    snprintf(net, sizeof(net), "%s/net", dir);
    assert_int_equal(mkdir(net, 0700), 0);
    write_file(dir, "stat", stat_a);
    write_file(dir, "meminfo", meminfo_a);
    write_file(dir, "net/dev", netdev_a);
    write_file(dir, "diskstats", diskstats_a);

    tw_host_sampler_opts o = {.proc_root = dir, .gpus = 0};
    tw_host_sampler *s = NULL;
    char err[256];
    assert_int_equal(tw_host_sampler_new(&o, &s, err, sizeof(err)), 0);
    assert_int_equal(tw_host_sampler_cpus(s), 4);
    assert_int_equal(tw_host_sampler_gpus(s), 0);

    size_t nseries;
    const tw_batch_series *series = tw_host_sampler_series(s, &nseries);
    /* 4 cores x 2, memory, 2 network, 3 i/o; RULES.md §1.2 names. */
    assert_int_equal(nseries, 4 * 2 + 1 + 2 + 3);
    assert_string_equal(series[0].type, "cpu");
    assert_string_equal(series[0].name, "cpu0");
    assert_string_equal(series[0].dimension, "CPUUtilization");
    assert_string_equal(series[1].dimension, "I/OWaitPercentage");
    assert_string_equal(series[8].type, "memory");
    assert_string_equal(series[8].name, "MemoryUsedPercent");
    assert_string_equal(series[8].dimension, "");
    assert_string_equal(series[9].type, "network");
    assert_string_equal(series[9].name, "ReceiveBytesPerSecond");
    assert_string_equal(series[9].dimension, "Algorithm");
    assert_string_equal(series[10].name, "TransmitBytesPerSecond");
    assert_string_equal(series[11].type, "i/o");
    assert_string_equal(series[11].name, "IOPS");
    assert_string_equal(series[12].name, "ReadThroughputInBytesPerSecond");
    assert_string_equal(series[13].name, "WriteThroughputInBytesPerSecond");

    write_file(dir, "stat", stat_b);
    write_file(dir, "meminfo", meminfo_b);
    write_file(dir, "net/dev", netdev_b);
    /* +100 reads and +50 writes on sda: 150 I/Os, 1000/400 sectors. */
    write_file(dir, "diskstats",
               "   8       0 sda 1100 10 21000 300 2050 20 40400 500 0 700 "
               "800 0 0 0 0\n");
    usleep(20000);
    tw_sample_vec v = {0};
    assert_int_equal(tw_host_sampler_sample(s, &v, err, sizeof(err)), 0);
    assert_int_equal(v.n, 4 * 2 + 1 + 2 + 3);

    const tw_sample *x = find(&v, series, "cpu0", "CPUUtilization");
    assert_non_null(x);
    assert_near(x->value, 80.0, 1e-9);
    x = find(&v, series, "cpu0", "I/OWaitPercentage");
    assert_near(x->value, 10.0, 1e-9);
    x = find(&v, series, "cpu1", "CPUUtilization");
    assert_near(x->value, 20.0, 1e-9);
    x = find(&v, series, "cpu1", "I/OWaitPercentage");
    assert_near(x->value, 20.0, 1e-9);
    x = find(&v, series, "MemoryUsedPercent", "");
    assert_near(x->value, 75.0, 1e-9);
    assert_true(x->ts > 1.6e9);

    /* Rates: deltas over the measured interval, whatever it was. */
    double rx = find(&v, series, "ReceiveBytesPerSecond", "Algorithm")->value;
    double tx = find(&v, series, "TransmitBytesPerSecond", "Algorithm")->value;
    assert_true(rx > 0 && tx > 0);
    assert_near(rx / tx, 1200000.0 / 100000.0, 1e-9);
    double iops = find(&v, series, "IOPS", "")->value;
    double rd = find(&v, series, "ReadThroughputInBytesPerSecond", "")->value;
    double wr = find(&v, series, "WriteThroughputInBytesPerSecond", "")->value;
    /* The disk set shrank (nvme0n1 gone): its delta counts as 0. */
    assert_true(iops >= 0 && rd >= 0 && wr >= 0);

    /* A further round with the same counters: all rates 0. */
    v.n = 0;
    assert_int_equal(tw_host_sampler_sample(s, &v, err, sizeof(err)), 0);
    x = find(&v, series, "cpu0", "CPUUtilization");
    assert_near(x->value, 0.0, 0);
    iops = find(&v, series, "IOPS", "")->value;
    rd = find(&v, series, "ReadThroughputInBytesPerSecond", "")->value;
    assert_near(iops, 0.0, 0);
    assert_near(rd, 0.0, 0);
    double rx2 = find(&v, series, "ReceiveBytesPerSecond", "Algorithm")->value;
    assert_near(rx2, 0.0, 0);

    /* Disk rates with a consistent disk set: ratio of the deltas. */
    write_file(dir, "diskstats",
               "   8       0 sda 1200 10 22000 300 2100 20 40800 500 0 700 "
               "800 0 0 0 0\n");
    usleep(20000);
    v.n = 0;
    assert_int_equal(tw_host_sampler_sample(s, &v, err, sizeof(err)), 0);
    iops = find(&v, series, "IOPS", "")->value;
    rd = find(&v, series, "ReadThroughputInBytesPerSecond", "")->value;
    wr = find(&v, series, "WriteThroughputInBytesPerSecond", "")->value;
    assert_true(iops > 0);
    assert_near(rd / iops, 1000.0 * 512 / 150.0, 1e-6);
    assert_near(wr / iops, 400.0 * 512 / 150.0, 1e-6);

    /* A /proc file that disappears is an error with the path. */
    remove_fixture(dir);
    v.n = 0;
    assert_int_equal(tw_host_sampler_sample(s, &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "stat"));

    free(v.v);
    tw_host_sampler_free(s);
}

static void test_sampler_missing_proc(void **st)
{
    (void)st;
    tw_host_sampler_opts o = {.proc_root = "/nonexistent/proc", .gpus = 0};
    tw_host_sampler *s = NULL;
    char err[256];
    assert_int_equal(tw_host_sampler_new(&o, &s, err, sizeof(err)), -1);
    assert_null(s);
    assert_non_null(strstr(err, "/nonexistent/proc/stat"));
}

static void test_sampler_no_nvml(void **st)
{
    (void)st;
    /* The real /proc, with an NVML path that cannot load: GPUs skipped. */
    tw_host_sampler_opts o = {.proc_root = NULL,
                              .gpus = 1,
                              .nvml_path = "/nonexistent/libnvidia-ml.so.1"};
    tw_host_sampler *s = NULL;
    char err[256];
    assert_int_equal(tw_host_sampler_new(&o, &s, err, sizeof(err)), 0);
    assert_int_equal(tw_host_sampler_gpus(s), 0);
    assert_true(tw_host_sampler_cpus(s) >= 1);
    tw_sample_vec v = {0};
    assert_int_equal(tw_host_sampler_sample(s, &v, err, sizeof(err)), 0);
    assert_true(v.n >= 2 * tw_host_sampler_cpus(s) + 1);
    free(v.v);
    tw_host_sampler_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_stat),
        cmocka_unit_test(test_cpu_percent),
        cmocka_unit_test(test_parse_meminfo),
        cmocka_unit_test(test_parse_netdev),
        cmocka_unit_test(test_parse_diskstats),
        cmocka_unit_test(test_sampler),
        cmocka_unit_test(test_sampler_missing_proc),
        cmocka_unit_test(test_sampler_no_nvml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
