/*
 * job_phase.c - the initialization phase of a job (job_phase.h).
 */
#include "job_phase.h"

void tw_job_phase_note(tw_job_phase *p, const tw_scan *scan)
{
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        p->fw_seen = 1;
        if (e->mode != TW_MODE_NONE &&
            (!p->step_seen || e->start_us < p->first_step_us)) {
            p->step_seen = 1;
            p->first_step_us = e->start_us;
        }
    }
}

int tw_job_phase_in_init(const tw_job_phase *p, double ts, int64_t first_us,
                         int64_t grace_us)
{
    if (p->step_seen)
        return ts * 1e6 < (double)p->first_step_us;
    return ts * 1e6 < (double)first_us + (double)grace_us;
}

void tw_job_phase_save(const tw_job_phase *p, tw_ser *s)
{
    tw_ser_u8(s, (uint8_t)p->fw_seen);
    tw_ser_u8(s, (uint8_t)p->step_seen);
    tw_ser_i64(s, p->first_step_us);
}

void tw_job_phase_load(tw_job_phase *p, tw_deser *d)
{
    p->fw_seen = tw_deser_u8(d) != 0;
    p->step_seen = tw_deser_u8(d) != 0;
    p->first_step_us = tw_deser_i64(d);
}
