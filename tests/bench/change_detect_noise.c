/*
 * change_detect_noise.c - false alarms of FailSlow's detector
 * (rules/common/change_detect.c) on healthy series: RUNS series of STEPS
 * log-normal step times with noise SIGMA and a share SPIKE of steps 2-10x
 * longer (checkpoint saves, collections), STEP_S seconds apart; prints how
 * many series were ever confirmed as shifted. A benchmark, not a test.
 *
 *   build/tests/bench_change_detect_noise [SIGMA SPIKE STEP_S PERSIST_S Z
 *                                          RUNS STEPS]
 *   defaults: 0.1 0.03 1 10 5 200 4000
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The detector is part of the rule plugins, not of twcore. */
#include "../../rules/common/change_detect.c"
#include "../../rules/common/select.c"
#include "../../rules/common/sysutil.c"

typedef struct rng {
    uint64_t s;
} rng;

static double uniform(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(rng *r)
{
    double u = uniform(r), v = uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double arg(int argc, char **argv, int i, double def)
{
    return argc > i ? atof(argv[i]) : def;
}

int main(int argc, char **argv)
{
    double sigma = arg(argc, argv, 1, 0.1), spike = arg(argc, argv, 2, 0.03);
    double step_s = arg(argc, argv, 3, 1.0);
    tw_cd_params p;
    tw_cd_params_default(&p);
    p.persist_s = arg(argc, argv, 4, p.persist_s);
    p.z = arg(argc, argv, 5, p.z);
    int runs = (int)arg(argc, argv, 6, 200);
    int64_t steps = (int64_t)arg(argc, argv, 7, 4000);
    int alarms = 0;
    for (int seed = 1; seed <= runs; seed++) {
        tw_cd d;
        if (tw_cd_init(&d, &p) != TW_OK) {
            fprintf(stderr, "change_detect_noise: out of memory\n");
            return 1;
        }
        rng r = {(uint64_t)seed};
        for (int64_t k = 0; k < steps; k++) {
            double x = 0.2 * exp(sigma * gauss(&r));
            if (uniform(&r) < spike)
                x *= 2.0 + 8.0 * uniform(&r);
            if (tw_cd_feed(&d, x, k * (int64_t)(step_s * 1e6), k) ==
                TW_CD_SHIFTED) {
                alarms++;
                printf("series %d: confirmed at step %lld (onset %lld)\n", seed,
                       (long long)k, (long long)d.onset.step);
                break;
            }
        }
        tw_cd_free(&d);
    }
    printf("sigma %g, spikes %g, step %g s, persist %g s, z %g: %d of %d "
           "healthy series of %lld steps confirmed a shift\n",
           sigma, spike, step_s, p.persist_s, p.z, alarms, runs,
           (long long)steps);
    return 0;
}
