/*
 * action_smtp.c - the e-mail action: one text/plain MIME message sent with
 * libcurl's SMTP (STARTTLS when use_tls, implicit TLS for smtps://). The
 * message carries the rule, the job, the finding and the report's path or
 * link, and the action id (X-Trainwatch-Action-Id) for receivers to dedupe.
 *
 * Ownership: the message text (t->body) and the recipient list (t->rcpt)
 * hang off the task and are freed by tw_action_task_reset(). The password
 * goes to libcurl only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action_internal.h"

static size_t read_body(char *buf, size_t size, size_t n, void *ud)
{
    tw_action_task *t = ud;
    size_t left = t->body_len - t->body_off;
    size_t k = size * n < left ? size * n : left;
    memcpy(buf, t->body + t->body_off, k);
    t->body_off += k;
    return k;
}

/* A header value with CR/LF (header injection) replaced by spaces. */
static void header_safe(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
    for (char *p = dst; *p; p++)
        if (*p == '\r' || *p == '\n')
            *p = ' ';
}

int tw_action_smtp_prepare(tw_action_task *t, char *err, size_t errlen)
{
    const tw_action_spec *sp = t->spec;
    char rule[256], job[512], subject[900], date[64], addr[320];
    header_safe(rule, sizeof(rule), t->rule);
    header_safe(job, sizeof(job), t->job);
    if (t->subject != NULL)
        header_safe(subject, sizeof(subject), t->subject);
    else
        snprintf(subject, sizeof(subject),
                 "trainwatch: %s found an issue in job %s", rule, job);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S +0000", &tm);

    /* recipients: the envelope (RCPT TO) and the To: header */
    for (const char *p = sp->to; *p;) {
        size_t n = strcspn(p, ",");
        snprintf(addr, sizeof(addr), "<%.*s>", (int)n, p);
        struct curl_slist *l = curl_slist_append(t->rcpt, addr);
        if (l == NULL)
            goto oom;
        t->rcpt = l;
        p += n + (p[n] == ',');
    }
    const char *fmt = "Date: %s\r\n"
                      "From: trainwatch <%s>\r\n"
                      "To: %s\r\n"
                      "Subject: %s\r\n"
                      "Message-ID: <%llx.%s@trainwatch>\r\n"
                      "X-Trainwatch-Action-Id: %s\r\n"
                      "MIME-Version: 1.0\r\n"
                      "Content-Type: text/plain; charset=utf-8\r\n"
                      "Content-Transfer-Encoding: 8bit\r\n"
                      "\r\n"
                      "Rule: %s\r\n"
                      "Job: %s\r\n"
                      "%s%s\r\n"
                      "Report: %s\r\n"
                      "Alert id: %s\r\n"
                      "Action id: %s\r\n";
    char id[400];
    header_safe(id, sizeof(id), t->id);
    char mid[64];
    snprintf(mid, sizeof(mid), "%d", sp->index);
    /* the finding as paragraphs when the engine wrote them, else a line */
    const char *finding_label = t->mail_text ? "\r\n" : "Finding: ";
    const char *finding = t->mail_text ? t->mail_text
                          : t->finding ? t->finding
                                       : "(none)";
    const char *report = t->report ? t->report : "(none)";
    const char *alert = t->alert_id ? t->alert_id : "(none)";
    int n = snprintf(NULL, 0, fmt, date, sp->from, sp->to, subject,
                     (unsigned long long)t->time_us, mid, id, t->rule, t->job,
                     finding_label, finding, report, alert, t->id);
    if (n < 0)
        goto oom;
    t->body = malloc((size_t)n + 1);
    if (t->body == NULL)
        goto oom;
    snprintf(t->body, (size_t)n + 1, fmt, date, sp->from, sp->to, subject,
             (unsigned long long)t->time_us, mid, id, t->rule, t->job,
             finding_label, finding, report, alert, t->id);
    t->body_len = (size_t)n;
    t->body_off = 0;

    snprintf(addr, sizeof(addr), "<%s>", sp->from);
    curl_easy_setopt(t->easy, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    curl_easy_setopt(t->easy, CURLOPT_URL, sp->smtp_url);
    curl_easy_setopt(t->easy, CURLOPT_MAIL_FROM, addr);
    curl_easy_setopt(t->easy, CURLOPT_MAIL_RCPT, t->rcpt);
    curl_easy_setopt(t->easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(t->easy, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(t->easy, CURLOPT_READDATA, t);
    curl_easy_setopt(t->easy, CURLOPT_INFILESIZE_LARGE,
                     (curl_off_t)t->body_len);
    if (sp->use_tls)
        curl_easy_setopt(t->easy, CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
    if (sp->username != NULL)
        curl_easy_setopt(t->easy, CURLOPT_USERNAME, sp->username);
    if (sp->password != NULL)
        curl_easy_setopt(t->easy, CURLOPT_PASSWORD, sp->password);
    return TW_OK;
oom:
    snprintf(err, errlen, "out of memory building the e-mail");
    return TW_ERR;
}

tw_act_outcome tw_action_smtp_done(tw_action_task *t, CURLcode rc, long status)
{
    (void)t;
    if (rc == CURLE_OK)
        return TW_ACT_DONE;
    /* a 5xx reply (bad recipient, auth refused) will not get better */
    if (rc == CURLE_LOGIN_DENIED || rc == CURLE_URL_MALFORMAT ||
        rc == CURLE_UNSUPPORTED_PROTOCOL || (status >= 500 && status < 600))
        return TW_ACT_FAIL;
    return TW_ACT_RETRY;
}
