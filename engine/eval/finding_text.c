/* finding_text.c - findings as text and JSON (finding_text.h). */
#include "finding_text.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

void tw_format_utc(int64_t us, char *out, size_t n)
{
    time_t t = (time_t)(us / 1000000 - (us % 1000000 < 0 ? 1 : 0));
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL) {
        snprintf(out, n, "?");
        return;
    }
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void tw_format_offset(int64_t us, int64_t start_us, char *out, size_t n)
{
    int64_t d = us - start_us;
    char sign = d < 0 ? '-' : '+';
    uint64_t s = (uint64_t)(d < 0 ? -d : d) / 1000000;
    snprintf(out, n, "%c%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, sign, s / 3600,
             s / 60 % 60, s % 60);
}

void tw_finding_json(tw_json *j, const tw_finding *f)
{
    tw_json_object_begin(j);
    tw_json_key(j, "summary");
    tw_json_string(j, f->summary);
    tw_json_key(j, "nodes");
    tw_json_object_begin(j);
    tw_json_key(j, "listed");
    tw_json_array_begin(j);
    for (uint32_t i = 0; i < f->nnames && i < TW_FINDING_MAX_NODES; i++)
        tw_json_string(j, f->names[i]);
    tw_json_array_end(j);
    tw_json_key(j, "count");
    tw_json_int(j, (int64_t)f->ninvolved);
    tw_json_object_end(j);
    if (f->first_us != 0 || f->last_us != 0) {
        tw_json_key(j, "time_range");
        tw_json_object_begin(j);
        tw_json_key(j, "first_us");
        tw_json_int(j, f->first_us);
        tw_json_key(j, "last_us");
        tw_json_int(j, f->last_us);
        tw_json_object_end(j);
    }
    tw_json_key(j, "magnitude");
    tw_json_object_begin(j);
    tw_json_key(j, "text");
    tw_json_string(j, f->magnitude);
    tw_json_key(j, "value");
    tw_json_double(j, f->value);
    tw_json_key(j, "limit");
    tw_json_double(j, f->limit);
    tw_json_key(j, "unit");
    tw_json_string(j, f->unit);
    tw_json_object_end(j);
    tw_json_key(j, "recommendation");
    tw_json_string(j, f->recommendation);
    tw_json_key(j, "parameters");
    tw_json_string(j, f->parameters);
    tw_json_object_end(j);
}

void tw_finding_nodes_text(const tw_finding *f, char *out, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    if (f->nnames == 0) {
        snprintf(out, n, "job-wide");
        return;
    }
    for (uint32_t i = 0; i < f->nnames && o < n; i++)
        o += (size_t)snprintf(out + o, n - o, "%s%s", i ? ", " : "",
                              f->names[i]);
    if (f->ninvolved > f->nnames && o < n)
        snprintf(out + o, n - o, " (+%" PRIu64 " more)",
                 f->ninvolved - f->nnames);
}

void tw_utf8_cut(char *s, size_t max)
{
    size_t len = strlen(s);
    if (len > max) {
        size_t n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
        s[n] = '\0';
        len = n;
    }
    /* a character cut short by an earlier truncation (snprintf) goes too */
    size_t lead = len;
    while (lead > 0 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead == 0)
        return;
    unsigned char c = (unsigned char)s[lead - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len - (lead - 1) < need)
        s[lead - 1] = '\0';
}

/* One labelled paragraph, wrapped at spaces to width columns. */
static void print_wrapped(FILE *out, const char *label, const char *text,
                          int width)
{
    const int indent = 16; /* "  " + the 14-column label */
    int col = fprintf(out, "  %-14s", label);
    const char *p = text;
    int first = 1;
    while (*p != '\0') {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (w == 0)
            break;
        if (!first && col + 1 + (int)w > width) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
            first = 1;
        }
        col += fprintf(out, "%s%.*s", first ? "" : " ", (int)w, p);
        first = 0;
        p += w;
    }
    fputc('\n', out);
}

void tw_finding_print(FILE *out, const tw_finding *f, int64_t job_start_us,
                      int width)
{
    char nodes[TW_FINDING_MAX_NODES * (TW_FINDING_NAME_LEN + 2) + 32];
    tw_finding_nodes_text(f, nodes, sizeof(nodes));
    print_wrapped(out, "what:", f->summary, width);
    print_wrapped(out, "where:", nodes, width);
    if (f->first_us != 0 || f->last_us != 0) {
        char a[32], b[32], ua[32], ub[32], when[160];
        tw_format_offset(f->first_us, job_start_us, a, sizeof(a));
        tw_format_offset(f->last_us, job_start_us, b, sizeof(b));
        tw_format_utc(f->first_us, ua, sizeof(ua));
        tw_format_utc(f->last_us, ub, sizeof(ub));
        snprintf(when, sizeof(when), "%s .. %s from the job's start (%s .. %s)",
                 a, b, ua, ub);
        print_wrapped(out, "when:", when, width);
    }
    print_wrapped(out, "how much:", f->magnitude, width);
    print_wrapped(out, "try:", f->recommendation, width);
    print_wrapped(out, "decided by:", f->parameters, width);
}

void tw_finding_line(const tw_finding *f, int64_t job_start_us, char *out,
                     size_t n)
{
    char nodes[TW_FINDING_MAX_NODES * (TW_FINDING_NAME_LEN + 2) + 32];
    char since[80] = "";
    tw_finding_nodes_text(f, nodes, sizeof(nodes));
    if (f->first_us != 0) {
        char off[32], utc[32];
        tw_format_offset(f->first_us, job_start_us, off, sizeof(off));
        tw_format_utc(f->first_us, utc, sizeof(utc));
        snprintf(since, sizeof(since), " Since %s (%s).", off, utc);
    }
    snprintf(out, n, "%s Where: %s.%s %s. Try: %s", f->summary, nodes, since,
             f->magnitude, f->recommendation);
    tw_utf8_cut(out, n - 1);
}
