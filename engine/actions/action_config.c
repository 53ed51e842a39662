/*
 * action_config.c - one rule's `actions:` settings -> typed specs.
 *
 * Keys, their types, bounds and defaults: config_schema.c (`trainwatch
 * config --describe`). Every type: type (required), timeout, retries,
 * backoff (doubled per retry), backoff_max; repeat_after only for the
 * notifications (email, sms, webhook).
 *   stop_training: region ($AWS_REGION, else us-east-1), endpoint
 *     (https://api.sagemaker.<region>.amazonaws.com), training_job_prefix
 *     (^[A-Za-z0-9-]+$; default: the job id), credentials_file, profile
 *   webhook: url, hmac_secret_env
 *   signal: pid | pid_file, signal (TERM)
 *   stop_file: path
 *   email: to (list), from (trainwatch@localhost), smtp_url
 *     (smtp:// or smtps://), use_tls, username, password_env
 *   sms: phone (^\+[0-9]{1,15}$), topic_arn (optional), region, endpoint
 *     (https://sns.<region>.amazonaws.com), credentials_file, profile
 *   capture: ranks (list of ranks; default all), steps (5) or duration,
 *     what (list of trace, stacks; default both), topic
 *     (trainwatch.control), wait (120s), min_interval (10m, per job)
 * AWS credentials: credentials_file (INI, [profile] or [default]) when
 * given, else $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY[/$AWS_SESSION_TOKEN],
 * else $AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials.
 *
 * Ownership: every string of a spec is copied into the caller's arena.
 * Secrets are read here and never appear in error messages.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "action_internal.h"
#include "config_schema.h"
#include "secret_file.h"

static const char *const type_names[TW_ACTION_NTYPES] = {
    "stop_training", "webhook", "signal",       "stop_file",
    "email",         "sms",     "alertmanager", "capture"};

const char *tw_action_type_name(tw_action_type t)
{
    return (unsigned)t < TW_ACTION_NTYPES ? type_names[t] : "unknown";
}

static int valid_prefix(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-')
            return 0;
    return 1;
}

static int valid_phone(const char *s)
{
    if (s[0] != '+')
        return 0;
    size_t n = strlen(s + 1);
    if (n < 1 || n > 15)
        return 0;
    for (size_t i = 1; s[i]; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* local@domain.tld with no spaces, quotes or angle brackets: enough to catch
 * typos; the SMTP server has the last word. */
static int valid_email(const char *s, size_t n)
{
    const char *at = memchr(s, '@', n);
    if (at == NULL || at == s || memchr(at + 1, '@', n - (size_t)(at - s) - 1))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (isspace((unsigned char)s[i]) || strchr("<>\"(),;:", s[i]))
            return 0;
    const char *dom = at + 1;
    size_t dn = n - (size_t)(dom - s);
    const char *dot = memchr(dom, '.', dn);
    return dn >= 3 && dot != NULL && dot != dom && dom[dn - 1] != '.';
}

static int has_scheme(const char *url, const char *const *schemes)
{
    for (size_t i = 0; schemes[i]; i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0 &&
            url[strlen(schemes[i])] != '\0')
            return 1;
    return 0;
}

static int parse_signal(const char *v, int *out)
{
    static const struct {
        const char *name;
        int signo;
    } names[] = {{"TERM", SIGTERM}, {"INT", SIGINT},   {"KILL", SIGKILL},
                 {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
                 {"USR2", SIGUSR2}};
    if (strncmp(v, "SIG", 3) == 0)
        v += 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(v, names[i].name) == 0) {
            *out = names[i].signo;
            return TW_OK;
        }
    char *end;
    long n = strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 1 && n <= 64) {
        *out = (int)n;
        return TW_OK;
    }
    return TW_ERR;
}

/* A copy of `s` with a leading "~/" expanded from $HOME. */
static char *expand_home(tw_arena *arena, const char *s)
{
    const char *home = getenv("HOME");
    if (strncmp(s, "~/", 2) != 0 || home == NULL)
        return tw_arena_strdup(arena, s);
    size_t n = strlen(home) + strlen(s);
    char *p = tw_arena_alloc(arena, n);
    if (p != NULL)
        snprintf(p, n, "%s%s", home, s + 1);
    return p;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* The [profile] section of an AWS credentials file. The message names the
 * file and profile, never a value read from it. */
static int read_credentials_file(const char *path, const char *profile,
                                 tw_arena *arena, tw_aws_creds *c, char *msg,
                                 size_t msglen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(msg, msglen, "cannot read credentials file %s: %s", path,
                 strerror(errno));
        return TW_ERR;
    }
    if (tw_secret_file_check(f, path, msg, msglen) != TW_OK) {
        fclose(f);
        return TW_ERR;
    }
    char line[1024];
    int in = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *s = trim(line);
        if (*s == '#' || *s == ';' || *s == '\0')
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e != NULL)
                *e = '\0';
            in = strcmp(trim(s + 1), profile) == 0;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in || eq == NULL)
            continue;
        *eq = '\0';
        const char *k = trim(s);
        char *v = trim(eq + 1);
        const char **dst =
            strcmp(k, "aws_access_key_id") == 0       ? &c->access_key_id
            : strcmp(k, "aws_secret_access_key") == 0 ? &c->secret_access_key
            : strcmp(k, "aws_session_token") == 0     ? &c->session_token
                                                      : NULL;
        if (dst != NULL)
            *dst = tw_arena_strdup(arena, v);
    }
    fclose(f);
    if (c->access_key_id == NULL || c->secret_access_key == NULL) {
        snprintf(msg, msglen,
                 "credentials file %s has no aws_access_key_id and "
                 "aws_secret_access_key in profile [%s]",
                 path, profile);
        return TW_ERR;
    }
    return TW_OK;
}

static int aws_creds(const tw_settings *s, tw_arena *arena, tw_aws_creds *c,
                     char *err, size_t errlen)
{
    const char *file = tw_schema_str(s, TW_SECTION_ACTION, "credentials_file");
    const char *profile = tw_schema_str(s, TW_SECTION_ACTION, "profile");
    char msg[512];
    if (file != NULL) {
        char *path = expand_home(arena, file);
        if (path == NULL || read_credentials_file(path, profile, arena, c, msg,
                                                  sizeof(msg)) != TW_OK)
            return tw_settings_error(s, tw_settings_find(s, "credentials_file"),
                                     err, errlen, "%s",
                                     path ? msg : "out of memory");
        return TW_OK;
    }
    const char *id = getenv("AWS_ACCESS_KEY_ID");
    const char *key = getenv("AWS_SECRET_ACCESS_KEY");
    if (id != NULL && *id && key != NULL && *key) {
        const char *tok = getenv("AWS_SESSION_TOKEN");
        c->access_key_id = tw_arena_strdup(arena, id);
        c->secret_access_key = tw_arena_strdup(arena, key);
        c->session_token = tok && *tok ? tw_arena_strdup(arena, tok) : NULL;
        return TW_OK;
    }
    const char *shared = getenv("AWS_SHARED_CREDENTIALS_FILE");
    char *path = expand_home(arena, shared ? shared : "~/.aws/credentials");
    if (path != NULL && read_credentials_file(path, profile, arena, c, msg,
                                              sizeof(msg)) == TW_OK)
        return TW_OK;
    return tw_settings_error(
        s, NULL, err, errlen,
        "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "or key 'credentials_file' (%s)",
        path ? msg : "out of memory");
}

/* A required string setting. */
static int need(const tw_settings *s, const char *key, const char *type,
                const char **out, char *err, size_t errlen)
{
    *out = NULL;
    tw_settings_get_str(s, key, out);
    if (*out == NULL || **out == '\0')
        return tw_settings_error(s, NULL, err, errlen,
                                 "missing key '%s' (required for type %s)", key,
                                 type);
    return TW_OK;
}

/* The secret in environment variable named by setting `key`. */
static int secret_from_env(const tw_settings *s, const char *key,
                           tw_arena *arena, const char **out, char *err,
                           size_t errlen)
{
    const char *var = NULL;
    tw_settings_get_str(s, key, &var);
    if (var == NULL)
        return TW_OK;
    const char *v = getenv(var);
    if (v == NULL || *v == '\0')
        return tw_settings_error(s, tw_settings_find(s, key), err, errlen,
                                 "environment variable '%s' is not set", var);
    *out = tw_arena_strdup(arena, v);
    return TW_OK;
}

static int region_endpoint(const tw_settings *s, tw_arena *arena,
                           const char *host_fmt, tw_action_spec *sp, char *err,
                           size_t errlen)
{
    static const char *const http[] = {"http://", "https://", NULL};
    const char *region = getenv("AWS_REGION");
    if (region == NULL || *region == '\0')
        region = "us-east-1";
    tw_settings_get_str(s, "region", &region);
    for (const char *p = region; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-')
            return tw_settings_error(s, tw_settings_find(s, "region"), err,
                                     errlen, "'%s' is not a region name",
                                     region);
    sp->region = tw_arena_strdup(arena, region);
    const char *ep = NULL;
    tw_settings_get_str(s, "endpoint", &ep);
    char def[256];
    if (ep == NULL) {
        snprintf(def, sizeof(def), host_fmt, region);
        ep = def;
    } else if (!has_scheme(ep, http))
        return tw_settings_error(s, tw_settings_find(s, "endpoint"), err,
                                 errlen,
                                 "'%s' is not an http:// or https:// URL", ep);
    char *copy = tw_arena_strdup(arena, ep);
    if (copy == NULL)
        return tw_settings_error(s, NULL, err, errlen, "out of memory");
    size_t n = strlen(copy);
    while (n > 0 && copy[n - 1] == '/')
        copy[--n] = '\0';
    sp->endpoint = copy;
    return TW_OK;
}

/* "0, 2, 3" -> ranks (each 0..1048575, no repeats) in the arena. */
static int capture_ranks(const tw_settings *s, tw_arena *arena,
                         tw_action_spec *sp, char *err, size_t errlen)
{
    const tw_setting *r = tw_settings_find(s, "ranks");
    if (r == NULL)
        return TW_OK;
    size_t cap = 1;
    for (const char *p = r->value; *p; p++)
        cap += *p == ',';
    int *v = tw_arena_alloc(arena, cap * sizeof(*v));
    if (v == NULL)
        return tw_settings_error(s, r, err, errlen, "out of memory");
    size_t n = 0;
    for (const char *p = r->value; *p;) {
        size_t len = strcspn(p, ",");
        char item[32];
        snprintf(item, sizeof(item), "%.*s", (int)(len < 31 ? len : 31), p);
        char *t = trim(item), *end;
        long x = strtol(t, &end, 10);
        if (*t == '\0' || *end != '\0' || x < 0 || x > 1048575)
            return tw_settings_error(s, r, err, errlen,
                                     "'%.*s' is not a rank (0 to 1048575)",
                                     (int)len, p);
        for (size_t i = 0; i < n; i++)
            if (v[i] == (int)x)
                return tw_settings_error(s, r, err, errlen,
                                         "rank %ld listed twice", x);
        v[n++] = (int)x;
        p += len + (p[len] == ',');
    }
    if (n == 0)
        return tw_settings_error(s, r, err, errlen,
                                 "is empty (leave it out for all ranks)");
    sp->ranks = v;
    sp->nranks = n;
    return TW_OK;
}

static int capture_spec(const tw_settings *s, tw_arena *arena,
                        tw_action_spec *sp, char *err, size_t errlen)
{
    if (capture_ranks(s, arena, sp, err, errlen) != TW_OK)
        return TW_ERR;
    sp->steps = (int)tw_schema_int(s, TW_SECTION_ACTION, "steps");
    sp->duration_us = tw_schema_duration_us(s, TW_SECTION_ACTION, "duration");
    if (tw_settings_find(s, "steps") != NULL &&
        tw_settings_find(s, "duration") != NULL)
        return tw_settings_error(s, tw_settings_find(s, "duration"), err,
                                 errlen,
                                 "give 'steps' or 'duration', not both");
    sp->wait_us = tw_schema_duration_us(s, TW_SECTION_ACTION, "wait");
    sp->min_interval_us =
        tw_schema_duration_us(s, TW_SECTION_ACTION, "min_interval");
    sp->topic =
        tw_arena_strdup(arena, tw_schema_str(s, TW_SECTION_ACTION, "topic"));
    const tw_setting *w = tw_settings_find(s, "what");
    const char *what = w ? w->value : "trace,stacks";
    for (const char *p = what; *p;) {
        size_t len = strcspn(p, ",");
        char item[32];
        snprintf(item, sizeof(item), "%.*s", (int)(len < 31 ? len : 31), p);
        char *t = trim(item);
        if (strcmp(t, "trace") == 0)
            sp->trace = 1;
        else if (strcmp(t, "stacks") == 0)
            sp->stacks = 1;
        else
            return tw_settings_error(s, w, err, errlen,
                                     "'%s' is not trace or stacks", t);
        p += len + (p[len] == ',');
    }
    if (!sp->trace && !sp->stacks)
        return tw_settings_error(s, w, err, errlen,
                                 "is empty (trace, stacks or both)");
    return sp->topic ? TW_OK
                     : tw_settings_error(s, NULL, err, errlen, "out of memory");
}

static int build_one(const tw_settings *s, const char *rule_name, int index,
                     tw_arena *arena, tw_action_spec *sp, char *err,
                     size_t errlen)
{
    static const char *const http[] = {"http://", "https://", NULL};
    static const char *const smtp[] = {"smtp://", "smtps://", NULL};

    const char *type = NULL;
    if (need(s, "type", "every action", &type, err, errlen) != TW_OK)
        return TW_ERR;
    int t = -1;
    for (int i = 0; i < TW_ACTION_NTYPES; i++)
        if (strcmp(type, type_names[i]) == 0)
            t = i;
    if (t < 0)
        return tw_settings_error(s, tw_settings_find(s, "type"), err, errlen,
                                 "unknown action type '%s' (known: "
                                 "stop_training, webhook, signal, stop_file, "
                                 "email, sms, alertmanager, capture)",
                                 type);
    /* Keys, types and bounds: config_schema.c (a key of another type is
     * unknown here). */
    if (tw_schema_check_settings(s, TW_SECTION_ACTION, type_names[t], err,
                                 errlen) != TW_OK)
        return TW_ERR;

    memset(sp, 0, sizeof(*sp));
    sp->type = (tw_action_type)t;
    sp->what = s->what ? tw_arena_strdup(arena, s->what) : "action";
    sp->rule_name = tw_arena_strdup(arena, rule_name);
    sp->index = index;
    sp->timeout_us = tw_schema_duration_us(s, TW_SECTION_ACTION, "timeout");
    sp->retries = (int)tw_schema_int(s, TW_SECTION_ACTION, "retries");
    sp->backoff_us = tw_schema_duration_us(s, TW_SECTION_ACTION, "backoff");
    sp->backoff_max_us =
        tw_schema_duration_us(s, TW_SECTION_ACTION, "backoff_max");
    sp->repeat_after_us =
        tw_schema_duration_us(s, TW_SECTION_ACTION, "repeat_after");
    if (sp->backoff_max_us < sp->backoff_us)
        return tw_settings_error(s, tw_settings_find(s, "backoff_max"), err,
                                 errlen, "is below 'backoff'");

    switch (sp->type) {
    case TW_ACTION_STOP_TRAINING: {
        const char *prefix = NULL;
        tw_settings_get_str(s, "training_job_prefix", &prefix);
        if (prefix != NULL && !valid_prefix(prefix))
            return tw_settings_error(
                s, tw_settings_find(s, "training_job_prefix"), err, errlen,
                "'%s' is not a job name prefix (letters, digits and '-')",
                prefix);
        sp->prefix = prefix ? tw_arena_strdup(arena, prefix) : NULL;
        if (region_endpoint(s, arena, "https://api.sagemaker.%s.amazonaws.com",
                            sp, err, errlen) != TW_OK)
            return TW_ERR;
        return aws_creds(s, arena, &sp->creds, err, errlen);
    }
    case TW_ACTION_ALERTMANAGER: {
        const char *url;
        if (need(s, "url", type, &url, err, errlen) != TW_OK)
            return TW_ERR;
        if (!has_scheme(url, http))
            return tw_settings_error(s, tw_settings_find(s, "url"), err, errlen,
                                     "'%s' is not an http:// or https:// URL",
                                     url);
        char *base = tw_arena_strdup(arena, url);
        size_t n = base ? strlen(base) : 0;
        while (n > 0 && base[n - 1] == '/')
            base[--n] = '\0';
        sp->url = base;
        sp->severity = tw_arena_strdup(
            arena, tw_schema_str(s, TW_SECTION_ACTION, "severity"));
        const char *rb = tw_schema_str(s, TW_SECTION_ACTION, "report_url");
        if (rb != NULL && !has_scheme(rb, http))
            return tw_settings_error(
                s, tw_settings_find(s, "report_url"), err, errlen,
                "'%s' is not an http:// or https:// URL", rb);
        sp->report_base = rb ? tw_arena_strdup(arena, rb) : NULL;
        return sp->url && sp->severity ? TW_OK : TW_ERR;
    }
    case TW_ACTION_WEBHOOK: {
        const char *url;
        if (need(s, "url", type, &url, err, errlen) != TW_OK)
            return TW_ERR;
        if (!has_scheme(url, http))
            return tw_settings_error(s, tw_settings_find(s, "url"), err, errlen,
                                     "'%s' is not an http:// or https:// URL",
                                     url);
        sp->url = tw_arena_strdup(arena, url);
        return secret_from_env(s, "hmac_secret_env", arena, &sp->hmac_secret,
                               err, errlen);
    }
    case TW_ACTION_SIGNAL: {
        const tw_setting *pid = tw_settings_find(s, "pid");
        const tw_setting *pf = tw_settings_find(s, "pid_file");
        if ((pid == NULL) == (pf == NULL))
            return tw_settings_error(s, pid ? pid : NULL, err, errlen,
                                     "give exactly one of 'pid' and "
                                     "'pid_file' (type signal)");
        sp->pid = (int)tw_schema_int(s, TW_SECTION_ACTION, "pid");
        sp->pid_file = pf ? expand_home(arena, pf->value) : NULL;
        sp->signo = SIGTERM;
        const tw_setting *sig = tw_settings_find(s, "signal");
        if (sig != NULL && parse_signal(sig->value, &sp->signo) != TW_OK)
            return tw_settings_error(s, sig, err, errlen,
                                     "'%s' is not a signal (TERM, INT, KILL, "
                                     "HUP, QUIT, USR1, USR2 or a number)",
                                     sig->value);
        return TW_OK;
    }
    case TW_ACTION_STOP_FILE: {
        const char *path;
        if (need(s, "path", type, &path, err, errlen) != TW_OK)
            return TW_ERR;
        sp->path = expand_home(arena, path);
        return TW_OK;
    }
    case TW_ACTION_EMAIL: {
        const char *to, *url;
        const char *from = tw_schema_str(s, TW_SECTION_ACTION, "from");
        if (need(s, "to", type, &to, err, errlen) != TW_OK ||
            need(s, "smtp_url", type, &url, err, errlen) != TW_OK)
            return TW_ERR;
        for (const char *p = to; *p;) {
            size_t n = strcspn(p, ",");
            if (!valid_email(p, n))
                return tw_settings_error(
                    s, tw_settings_find(s, "to"), err, errlen,
                    "'%.*s' is not an e-mail address", (int)n, p);
            p += n + (p[n] == ',');
        }
        const tw_setting *fs = tw_settings_find(s, "from");
        if (fs != NULL && !valid_email(from, strlen(from)))
            return tw_settings_error(s, tw_settings_find(s, "from"), err,
                                     errlen, "'%s' is not an e-mail address",
                                     from);
        if (!has_scheme(url, smtp))
            return tw_settings_error(
                s, tw_settings_find(s, "smtp_url"), err, errlen,
                "'%s' is not an smtp:// or smtps:// URL", url);
        sp->to = tw_arena_strdup(arena, to);
        sp->from = tw_arena_strdup(arena, from);
        sp->smtp_url = tw_arena_strdup(arena, url);
        const char *user = NULL;
        tw_settings_get_str(s, "username", &user);
        sp->username = user ? tw_arena_strdup(arena, user) : NULL;
        sp->use_tls = tw_schema_bool(s, TW_SECTION_ACTION, "use_tls");
        if (secret_from_env(s, "password_env", arena, &sp->password, err,
                            errlen))
            return TW_ERR;
        if (sp->password != NULL && sp->username == NULL)
            return tw_settings_error(s, tw_settings_find(s, "password_env"),
                                     err, errlen, "needs key 'username'");
        return TW_OK;
    }
    case TW_ACTION_SMS: {
        const char *phone, *arn = NULL;
        if (need(s, "phone", type, &phone, err, errlen) != TW_OK)
            return TW_ERR;
        if (!valid_phone(phone))
            return tw_settings_error(s, tw_settings_find(s, "phone"), err,
                                     errlen,
                                     "'%s' is not an E.164 number (+ and 1 "
                                     "to 15 digits)",
                                     phone);
        tw_settings_get_str(s, "topic_arn", &arn);
        if (arn != NULL && strncmp(arn, "arn:", 4) != 0)
            return tw_settings_error(s, tw_settings_find(s, "topic_arn"), err,
                                     errlen, "'%s' is not an ARN", arn);
        sp->phone = tw_arena_strdup(arena, phone);
        sp->topic_arn = arn ? tw_arena_strdup(arena, arn) : NULL;
        if (region_endpoint(s, arena, "https://sns.%s.amazonaws.com", sp, err,
                            errlen) != TW_OK)
            return TW_ERR;
        return aws_creds(s, arena, &sp->creds, err, errlen);
    }
    case TW_ACTION_CAPTURE:
        return capture_spec(s, arena, sp, err, errlen);
    default:
        break;
    }
    return TW_ERR;
}

int tw_action_specs_build(const tw_settings *items, size_t n,
                          const char *rule_name, tw_arena *arena,
                          tw_action_spec **out, char *err, size_t errlen)
{
    *out = NULL;
    if (n == 0)
        return TW_OK;
    tw_action_spec *specs = tw_arena_alloc(arena, n * sizeof(*specs));
    if (specs == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    for (size_t i = 0; i < n; i++)
        if (build_one(&items[i], rule_name, (int)i + 1, arena, &specs[i], err,
                      errlen) != TW_OK)
            return TW_ERR;
    *out = specs;
    return TW_OK;
}
