/*
 * action_http.c - the HTTP actions: SageMaker StopTrainingJob (after a
 * ListTrainingJobs lookup when a prefix is configured, RULES.md §5), SNS
 * Publish for SMS, and the webhook (alert JSON, optional HMAC-SHA256
 * signature). AWS requests are signed by libcurl (CURLOPT_AWS_SIGV4).
 *
 * Ownership: request bodies, headers and responses hang off the task and are
 * freed by tw_action_task_reset(); t->job_name / t->next_token by the
 * dispatcher when the task ends. Secrets go to libcurl only, never to logs.
 */
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "action_internal.h"
#include "json_writer.h"

tw_act_outcome tw_action_http_classify(CURLcode rc, long status)
{
    if (rc != CURLE_OK) {
        switch (rc) {
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
        case CURLE_LOGIN_DENIED:
        case CURLE_REMOTE_ACCESS_DENIED:
        case CURLE_OUT_OF_MEMORY:
            return TW_ACT_FAIL;
        default:
            return TW_ACT_RETRY; /* connect, timeout, reset, TLS hiccups */
        }
    }
    if (status >= 200 && status < 300)
        return TW_ACT_DONE;
    if (status == 408 || status == 429 || status >= 500)
        return TW_ACT_RETRY;
    return TW_ACT_FAIL;
}

static int add_header(tw_action_task *t, const char *fmt, const char *v)
{
    char line[1200];
    snprintf(line, sizeof(line), fmt, v);
    struct curl_slist *l = curl_slist_append(t->headers, line);
    if (l == NULL)
        return TW_ERR;
    t->headers = l;
    return TW_OK;
}

/* Common AWS signing setup: service "sagemaker" or "sns". */
static int aws_setup(tw_action_task *t, const char *service)
{
    const tw_action_spec *sp = t->spec;
    char sig[160];
    snprintf(sig, sizeof(sig), "aws:amz:%s:%s", sp->region, service);
    if (curl_easy_setopt(t->easy, CURLOPT_AWS_SIGV4, sig) != CURLE_OK)
        return TW_ERR;
    curl_easy_setopt(t->easy, CURLOPT_USERNAME, sp->creds.access_key_id);
    curl_easy_setopt(t->easy, CURLOPT_PASSWORD, sp->creds.secret_access_key);
    if (sp->creds.session_token != NULL &&
        add_header(t, "X-Amz-Security-Token: %s", sp->creds.session_token))
        return TW_ERR;
    char url[1100];
    snprintf(url, sizeof(url), "%s/", sp->endpoint);
    curl_easy_setopt(t->easy, CURLOPT_URL, url);
    return TW_OK;
}

static int post(tw_action_task *t)
{
    curl_easy_setopt(t->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(t->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, t->body);
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE, (long)t->body_len);
    /* no "Expect: 100-continue" round trip for small bodies */
    if (add_header(t, "%s", "Expect:") != TW_OK)
        return TW_ERR;
    curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
    return TW_OK;
}

static int json_body(tw_action_task *t, json_t *doc)
{
    if (doc == NULL)
        return TW_ERR;
    t->body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (t->body == NULL)
        return TW_ERR;
    t->body_len = strlen(t->body);
    return TW_OK;
}

static int sagemaker_prepare(tw_action_task *t, char *err, size_t errlen)
{
    const tw_action_spec *sp = t->spec;
    if (t->stage == 0 && sp->prefix == NULL)
        t->stage = 1;
    const char *target;
    json_t *doc;
    if (t->stage == 0) {
        target = "SageMaker.ListTrainingJobs";
        doc = json_pack("{s:s, s:s, s:s, s:s, s:i}", "NameContains", sp->prefix,
                        "SortBy", "CreationTime", "SortOrder", "Descending",
                        "StatusEquals", "InProgress", "MaxResults", 100);
        if (doc != NULL && t->next_token != NULL)
            json_object_set_new(doc, "NextToken", json_string(t->next_token));
    } else {
        target = "SageMaker.StopTrainingJob";
        doc = json_pack("{s:s}", "TrainingJobName",
                        t->job_name ? t->job_name : t->job);
    }
    if (json_body(t, doc) != TW_OK ||
        add_header(t, "%s", "Content-Type: application/x-amz-json-1.1") ||
        add_header(t, "X-Amz-Target: %s", target) ||
        aws_setup(t, "sagemaker") != TW_OK || post(t) != TW_OK) {
        snprintf(err, errlen, "cannot build the %s request", target);
        return TW_ERR;
    }
    return TW_OK;
}

/* ListTrainingJobs answer -> the one job to stop (RULES.md §5: names that
 * start with the prefix; exactly one, else nothing is stopped). */
static tw_act_outcome list_done(tw_action_task *t)
{
    const tw_action_spec *sp = t->spec;
    json_error_t jerr;
    json_t *doc = t->resp ? json_loads(t->resp, 0, &jerr) : NULL;
    json_t *jobs = doc ? json_object_get(doc, "TrainingJobSummaries") : NULL;
    if (!json_is_array(jobs)) {
        json_decref(doc);
        t->resp_text = strdup("ListTrainingJobs: no TrainingJobSummaries");
        return TW_ACT_RETRY;
    }
    size_t i, matches = 0;
    json_t *j;
    const char *match = NULL;
    json_array_foreach(jobs, i, j)
    {
        const char *name =
            json_string_value(json_object_get(j, "TrainingJobName"));
        if (name != NULL &&
            strncmp(name, sp->prefix, strlen(sp->prefix)) == 0) {
            matches++;
            match = name;
        }
    }
    const char *token = json_string_value(json_object_get(doc, "NextToken"));
    tw_act_outcome o;
    char msg[300];
    t->pages++;
    free(t->next_token);
    t->next_token = NULL;
    if (matches == 1) {
        free(t->job_name);
        t->job_name = strdup(match);
        t->stage = 1;
        o = t->job_name ? TW_ACT_NEXT : TW_ACT_RETRY;
        msg[0] = '\0';
    } else if (matches == 0 && token != NULL && t->pages < 50) {
        t->next_token = strdup(token);
        o = t->next_token ? TW_ACT_NEXT : TW_ACT_RETRY;
        msg[0] = '\0';
    } else {
        snprintf(msg, sizeof(msg),
                 "%zu InProgress training jobs start with prefix '%s' "
                 "(exactly one is stopped)",
                 matches, sp->prefix);
        o = TW_ACT_SKIP;
    }
    if (msg[0])
        t->resp_text = strdup(msg);
    json_decref(doc);
    return o;
}

/* Form-encode key=value (value escaped) onto the body. */
static int form_add(tw_action_task *t, const char *key, const char *value)
{
    char *v = curl_easy_escape(t->easy, value, 0);
    if (v == NULL)
        return TW_ERR;
    size_t add = strlen(key) + strlen(v) + 2;
    char *p = realloc(t->body, t->body_len + add + 1);
    if (p == NULL) {
        curl_free(v);
        return TW_ERR;
    }
    t->body = p;
    t->body_len += (size_t)snprintf(p + t->body_len, add + 1, "%s%s=%s",
                                    t->body_len ? "&" : "", key, v);
    curl_free(v);
    return TW_OK;
}

/* Cut s to at most n bytes without splitting a UTF-8 sequence. */
static void utf8_cut(char *s, size_t n)
{
    if (strlen(s) <= n)
        return;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    s[n] = '\0';
}

static int sns_prepare(tw_action_task *t, char *err, size_t errlen)
{
    const tw_action_spec *sp = t->spec;
    char subject[128], message[1600];
    /* The reference's wording (RULES.md §5), then ours. */
    snprintf(subject, sizeof(subject), "SMDebugRule:%s fired", t->rule);
    utf8_cut(subject, 100);
    /* an SMS: the engine's short text (<= 160 bytes), else the long form */
    if (t->sms_text != NULL) {
        snprintf(message, sizeof(message), "%s", t->sms_text);
        utf8_cut(message, 160);
    } else {
        snprintf(message, sizeof(message),
                 "SMDebugRule:%s fired. trainwatch: job %s: %s%s%s", t->rule,
                 t->job, t->finding ? t->finding : "issue found",
                 t->report ? " Report: " : "", t->report ? t->report : "");
        utf8_cut(message, 1400);
    }
    int rc = form_add(t, "Action", "Publish") ||
             form_add(t, "Version", "2010-03-31") ||
             form_add(t, "Subject", subject) || form_add(t, "Message", message);
    if (rc == TW_OK && sp->topic_arn != NULL)
        rc =
            form_add(t, "TopicArn", sp->topic_arn) ||
            form_add(t, "MessageAttributes.entry.1.Name", "phone_num") ||
            form_add(t, "MessageAttributes.entry.1.Value.DataType", "String") ||
            form_add(t, "MessageAttributes.entry.1.Value.StringValue",
                     sp->phone);
    else if (rc == TW_OK)
        rc = form_add(t, "PhoneNumber", sp->phone);
    if (rc != TW_OK ||
        add_header(t, "%s",
                   "Content-Type: application/x-www-form-urlencoded; "
                   "charset=utf-8") ||
        aws_setup(t, "sns") != TW_OK || post(t) != TW_OK) {
        snprintf(err, errlen, "cannot build the SNS Publish request");
        return TW_ERR;
    }
    return TW_OK;
}

/* The body when the caller gave no alert JSON. */
static char *default_alert(const tw_action_task *t)
{
    tw_json *j = tw_json_new();
    if (j == NULL)
        return NULL;
    tw_json_set_compact(j, 1);
    tw_json_object_begin(j);
    tw_json_key(j, "job_id");
    tw_json_string(j, t->job);
    tw_json_key(j, "rule");
    tw_json_string(j, t->rule);
    tw_json_key(j, "alert_id");
    if (t->alert_id)
        tw_json_string(j, t->alert_id);
    else
        tw_json_null(j);
    tw_json_key(j, "finding");
    tw_json_string(j, t->finding ? t->finding : "");
    tw_json_key(j, "report");
    if (t->report)
        tw_json_string(j, t->report);
    else
        tw_json_null(j);
    tw_json_key(j, "time_us");
    tw_json_int(j, t->time_us);
    tw_json_object_end(j);
    char *s = tw_json_failed(j) ? NULL : tw_json_take(j);
    tw_json_free(j);
    return s;
}

static int webhook_prepare(tw_action_task *t, char *err, size_t errlen)
{
    const tw_action_spec *sp = t->spec;
    t->body = t->alert_json ? strdup(t->alert_json) : default_alert(t);
    if (t->body == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    t->body_len = strlen(t->body);
    int rc = add_header(t, "%s", "Content-Type: application/json") ||
             add_header(t, "X-Trainwatch-Action-Id: %s", t->id);
    if (rc == TW_OK && sp->hmac_secret != NULL) {
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        if (HMAC(EVP_sha256(), sp->hmac_secret, (int)strlen(sp->hmac_secret),
                 (const unsigned char *)t->body, t->body_len, mac, &n) == NULL)
            rc = TW_ERR;
        char hex[2 * EVP_MAX_MD_SIZE + 1];
        for (unsigned int i = 0; i < n; i++)
            snprintf(hex + 2 * i, 3, "%02x", mac[i]);
        hex[2 * n] = '\0';
        if (rc == TW_OK)
            rc = add_header(t, "X-Trainwatch-Signature: sha256=%s", hex);
    }
    curl_easy_setopt(t->easy, CURLOPT_URL, sp->url);
    if (rc != TW_OK || post(t) != TW_OK) {
        snprintf(err, errlen, "cannot build the webhook request");
        return TW_ERR;
    }
    return TW_OK;
}

/* Alertmanager's v2 API: a list of one alert, the action's severity
 * added to its labels. */
static int alertmanager_prepare(tw_action_task *t, char *err, size_t errlen)
{
    const tw_action_spec *sp = t->spec;
    json_error_t je;
    json_t *alert = json_loads(t->am_alert, 0, &je);
    json_t *labels = alert ? json_object_get(alert, "labels") : NULL;
    if (labels == NULL || json_object_set_new(labels, "severity",
                                              json_string(sp->severity)) != 0) {
        json_decref(alert);
        snprintf(err, errlen, "malformed alert for Alertmanager");
        return TW_ERR;
    }
    if (sp->report_base != NULL) {
        char *esc = curl_easy_escape(t->easy, t->job, 0);
        char link[2400];
        snprintf(link, sizeof(link), "%s/jobs/%s/report", sp->report_base,
                 esc ? esc : "");
        curl_free(esc);
        json_t *ann = json_object_get(alert, "annotations");
        if (ann != NULL)
            json_object_set_new(ann, "report_url", json_string(link));
    }
    json_t *list = json_array();
    if (list == NULL || json_array_append_new(list, alert) != 0) {
        json_decref(list);
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    char url[1200];
    snprintf(url, sizeof(url), "%s/api/v2/alerts", sp->url);
    curl_easy_setopt(t->easy, CURLOPT_URL, url);
    if (json_body(t, list) != TW_OK ||
        add_header(t, "%s", "Content-Type: application/json") ||
        post(t) != TW_OK) {
        snprintf(err, errlen, "cannot build the Alertmanager request");
        return TW_ERR;
    }
    return TW_OK;
}

int tw_action_http_prepare(tw_action_task *t, char *err, size_t errlen)
{
    switch (t->spec->type) {
    case TW_ACTION_STOP_TRAINING:
        return sagemaker_prepare(t, err, errlen);
    case TW_ACTION_SMS:
        return sns_prepare(t, err, errlen);
    case TW_ACTION_WEBHOOK:
        return webhook_prepare(t, err, errlen);
    case TW_ACTION_ALERTMANAGER:
        return alertmanager_prepare(t, err, errlen);
    default:
        snprintf(err, errlen, "not an HTTP action");
        return TW_ERR;
    }
}

/* The first line of a response body, printable ASCII only, for logs. */
static char *short_text(const char *s, size_t n)
{
    char out[201];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof(out) - 1 && s[i] != '\n'; i++)
        out[k++] = s[i] >= 32 && s[i] < 127 ? s[i] : '?';
    out[k] = '\0';
    return k ? strdup(out) : NULL;
}

tw_act_outcome tw_action_http_done(tw_action_task *t, CURLcode rc, long status)
{
    tw_act_outcome o = tw_action_http_classify(rc, status);
    /* AWS throttles with 400 ThrottlingException: worth a retry */
    if (o == TW_ACT_FAIL && rc == CURLE_OK && status == 400 && t->resp &&
        strstr(t->resp, "Throttl") != NULL)
        o = TW_ACT_RETRY;
    if (o == TW_ACT_DONE && t->spec->type == TW_ACTION_STOP_TRAINING &&
        t->stage == 0)
        return list_done(t);
    if (o != TW_ACT_DONE && rc == CURLE_OK && t->resp != NULL)
        t->resp_text = short_text(t->resp, t->resp_len);
    return o;
}
