/*
 * job_phase.c - the initialization and finalization phases of a job
 * (job_phase.h).
 */
#include "job_phase.h"

#include <stdio.h>

void tw_job_phase_note(tw_job_phase *p, const tw_scan *scan)
{
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        p->fw_seen = 1;
        if (e->mode == TW_MODE_NONE)
            continue;
        if (!p->step_seen || e->start_us < p->first_step_us)
            p->first_step_us = e->start_us;
        if (!p->step_seen || e->end_us > p->last_step_end_us)
            p->last_step_end_us = e->end_us;
        p->step_seen = 1;
    }
}

int tw_job_phase_in_init(const tw_job_phase *p, double ts, int64_t first_us,
                         int64_t grace_us)
{
    if (p->step_seen)
        return ts * 1e6 < (double)p->first_step_us;
    return ts * 1e6 < (double)first_us + (double)grace_us;
}

int tw_job_phase_in_final(const tw_job_phase *p, double ts)
{
    return p->step_seen && ts * 1e6 > (double)p->last_step_end_us +
                                          (double)TW_JOB_PHASE_FINAL_GAP_US;
}

int tw_job_phase_outside(const tw_job_phase *p, double ts, int64_t first_us,
                         int64_t grace_us)
{
    return tw_job_phase_in_init(p, ts, first_us, grace_us) ||
           tw_job_phase_in_final(p, ts);
}

/* The first byte's high bit marks the layout with the newest step end;
 * checkpoints written before it (fw_seen 0 or 1, no step end) still load. */
#define TW_JOB_PHASE_HAS_END 0x80u

void tw_job_phase_save(const tw_job_phase *p, tw_ser *s)
{
    tw_ser_u8(s, (uint8_t)(TW_JOB_PHASE_HAS_END | (p->fw_seen ? 1u : 0u)));
    tw_ser_u8(s, (uint8_t)p->step_seen);
    tw_ser_i64(s, p->first_step_us);
    tw_ser_i64(s, p->last_step_end_us);
}

void tw_job_phase_load(tw_job_phase *p, tw_deser *d)
{
    uint8_t first = tw_deser_u8(d);
    p->fw_seen = (first & 1u) != 0;
    p->step_seen = tw_deser_u8(d) != 0;
    p->first_step_us = tw_deser_i64(d);
    /* an older checkpoint knows no step end: the first step's start until
     * the next scan's step events move it (they come before any judging) */
    p->last_step_end_us = (first & TW_JOB_PHASE_HAS_END) != 0
                              ? tw_deser_i64(d)
                              : p->first_step_us;
}

int tw_job_phase_params_text(const tw_param_spec *specs, const tw_params *p,
                             size_t n, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap == 0 || n > p->nvalues)
        return TW_ERR;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (p->values[i].is_none)
            continue;
        int w = snprintf(buf + len, cap - len, "%s%s:%s", len > 0 ? "\n" : "",
                         specs[i].name, p->values[i].text);
        if (w < 0 || (size_t)w >= cap - len)
            return TW_ERR;
        len += (size_t)w;
    }
    return TW_OK;
}
