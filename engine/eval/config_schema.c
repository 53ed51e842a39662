/* config_schema.c - the configuration key table, lookups, validation and
 * typed values (config_schema.h); config_schema_doc.c prints it. */
#include "config_schema.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SEC 1000000LL
#define MS 1000LL
#define DMAX TW_DURATION_MAX_US

/* Shorthands for the table: section, path, default, then what differs. */
#define DUR(s, p, d, lo, doc)                                                  \
    {                                                                          \
        s, p, TW_TYPE_DURATION, d, lo, DMAX, NULL, NULL, "30s", doc            \
    }
#define STR(s, p, d, lo, ex, doc)                                              \
    {                                                                          \
        s, p, TW_TYPE_STRING, d, lo, 4096, NULL, NULL, ex, doc                 \
    }
#define PATH(s, p, ex, doc)                                                    \
    {                                                                          \
        s, p, TW_TYPE_PATH, NULL, 1, 4096, NULL, NULL, ex, doc                 \
    }
#define INT(s, p, d, lo, hi, doc)                                              \
    {                                                                          \
        s, p, TW_TYPE_INT, d, lo, hi, NULL, NULL, d, doc                       \
    }
#define ENUM(s, p, d, words, doc)                                              \
    {                                                                          \
        s, p, TW_TYPE_ENUM, d, 0, 0, words, NULL, d, doc                       \
    }
/* Action keys: `types` = the action types a key applies to (NULL: all). */
#define ASTR(p, d, types, ex, doc)                                             \
    {                                                                          \
        TW_SECTION_ACTION, p, TW_TYPE_STRING, d, 1, 4096, NULL, types, ex, doc \
    }
#define ADUR(p, d, lo, types, doc)                                             \
    {                                                                          \
        TW_SECTION_ACTION, p, TW_TYPE_DURATION, d, lo, DMAX, NULL, types,      \
            "30m", doc                                                         \
    }

#define NOTIFY "webhook|email|sms"
#define AWS "stop_training|sms"

static const tw_key_spec schema[] = {
    /* ---- top level --------------------------------------------------- */
    {TW_SECTION_TOP, "semantics", TW_TYPE_ENUM, "fixed", 0, 0,
     "fixed|reference", NULL, NULL,
     "built-in rules: fixed corrects the reference's known quirks, "
     "reference reproduces its numbers (a rule may override)"},
    {TW_SECTION_TOP, "tick", TW_TYPE_DURATION, "60s", 1, DMAX, "continuous",
     NULL, NULL,
     "scan interval in event time, or continuous (evaluate whenever the "
     "watermark advances)"},
    DUR(TW_SECTION_TOP, "lateness", "60s", 0,
        "how long a scan waits for a slow node; later events are counted and "
        "dropped"),
    DUR(TW_SECTION_TOP, "idle_node", "5m", 0,
        "a node this far behind the newest one stops holding the clock back"),
    {TW_SECTION_TOP, "clock_skew", TW_TYPE_DURATION, NULL, 0, DMAX, "off", NULL,
     "5m",
     "run: times further ahead of the job's newest than this are refused "
     "and dead-lettered (default 10 ticks, at most idle_node); off = no "
     "bound"},
    ENUM(TW_SECTION_TOP, "plugin_isolation", "custom", "custom|all|off",
         "which rules' plugin calls run guarded: a crash, hang or runaway "
         "allocation puts the rule in Error instead of stopping the engine "
         "(custom: rules with a source .so)"),
    {TW_SECTION_TOP, "plugin_timeout", TW_TYPE_DURATION, "30s", MS, DMAX, "off",
     NULL, NULL, "isolated rules: one plugin call running longer is stopped"},
    INT(TW_SECTION_TOP, "plugin_memory_mb", "1024", 0, 1048576,
        "isolated rules: one plugin call growing the engine's resident "
        "memory by more MiB is stopped (0: no cap)"),
    {TW_SECTION_TOP, "rules", TW_TYPE_ENTRIES, NULL, 0, 0, NULL, NULL, NULL,
     "the rules to run, in order (absent: ProfilerReport, else every "
     "built-in profiler rule)"},
    {TW_SECTION_TOP, "kafka", TW_TYPE_SECTION, NULL, 0, 0, NULL, NULL, NULL,
     "run: the consumer group, topics and librdkafka properties"},
    {TW_SECTION_TOP, "engine", TW_TYPE_SECTION, NULL, 0, 0, NULL, NULL, NULL,
     "run: job lifetime, results files, commit and progress pacing"},
    {TW_SECTION_TOP, "state", TW_TYPE_SECTION, NULL, 0, 0, NULL, NULL, NULL,
     "run: where job state is checkpointed (memory or redis)"},
    {TW_SECTION_TOP, "http", TW_TYPE_SECTION, NULL, 0, 0, NULL, NULL, NULL,
     "run: HTTP endpoints /healthz /readyz /metrics /jobs"},
    {TW_SECTION_TOP, "alertmanager", TW_TYPE_SECTION, NULL, 0, 0, NULL, NULL,
     NULL,
     "run: every rule's alerts to Alertmanager (an alertmanager action "
     "added to each rule)"},

    /* ---- one rule ---------------------------------------------------- */
    STR(TW_SECTION_RULE, "name", NULL, 1, "LowGPUUtilization",
        "the rule's unique name; alone, the built-in rule of that name"),
    STR(TW_SECTION_RULE, "rule", NULL, 1, "LowGPUUtilization",
        "the built-in rule to run under `name` (to run one twice)"),
    PATH(TW_SECTION_RULE, "source", "/opt/trainwatch/rules/my_rule.so",
         "a custom rule: the plugin's shared object (docs/plugins.md)"),
    STR(TW_SECTION_RULE, "rule_to_invoke", NULL, 1, "my_rule",
        "with source: the function returning the rule's descriptor"),
    {TW_SECTION_RULE, "parameters", TW_TYPE_MAPPING, NULL, 0, 0, NULL, NULL,
     "{threshold_p95: 70}",
     "the rule's parameters (docs/rules.md lists each rule's)"},
    {TW_SECTION_RULE, "semantics", TW_TYPE_ENUM, NULL, 0, 0, "fixed|reference",
     NULL, "reference", "this rule's semantics (default: the top-level key)"},
    {TW_SECTION_RULE, "act_on_consequences", TW_TYPE_BOOL, "false", 0, 0, NULL,
     NULL, NULL,
     "fixed semantics: also run the actions for a finding that another "
     "rule's finding explains (caused_by)"},
    {TW_SECTION_RULE, "actions", TW_TYPE_ENTRIES, NULL, 0, 0, NULL, NULL, NULL,
     "run: what to do when the rule finds a problem"},

    /* ---- kafka ------------------------------------------------------- */
    STR(TW_SECTION_KAFKA, "brokers", NULL, 1, "localhost:9092",
        "bootstrap servers host:port[,host:port]; --brokers overrides"),
    STR(TW_SECTION_KAFKA, "group", "trainwatch", 1, NULL,
        "the consumer group the engines share"),
    STR(TW_SECTION_KAFKA, "metrics_topic", "trainwatch.metrics", 1, NULL,
        "where agents publish metric batches"),
    STR(TW_SECTION_KAFKA, "alerts_topic", "trainwatch.alerts", 1, NULL,
        "where alerts go (schemas/alert.schema.json)"),
    STR(TW_SECTION_KAFKA, "deadletter_topic", "trainwatch.deadletter", 1, NULL,
        "where messages that fail verification or decoding go"),
    STR(TW_SECTION_KAFKA, "client_id", NULL, 1, "trainwatch-1",
        "client id shown by the brokers (default: librdkafka's)"),
    {TW_SECTION_KAFKA, "properties.*", TW_TYPE_STRING, NULL, 0, 4096, NULL,
     NULL, "SASL_SSL",
     "librdkafka properties passed unchanged to the consumer and producer "
     "(security.protocol, sasl.*, ssl.*)"},

    /* ---- engine ------------------------------------------------------ */
    DUR(TW_SECTION_ENGINE, "job_idle", "10m", 1,
        "a job without a message for this long (wall time) is finalized"),
    PATH(TW_SECTION_ENGINE, "results_dir", "/var/lib/trainwatch/results",
         "an existing folder: <job>.json per finished job (default: none)"),
    {TW_SECTION_ENGINE, "report_html", TW_TYPE_BOOL, "true", 0, 0, NULL, NULL,
     NULL,
     "also write results_dir/<job>.html, the job's HTML report (as "
     "`trainwatch report --results`), when a job finishes"},
    DUR(TW_SECTION_ENGINE, "commit_interval", "1s", 1,
        "offset commits (and the plain memory store's checkpoints) at most "
        "this often"),
    DUR(TW_SECTION_ENGINE, "progress_interval", "10s", 0,
        "a progress: log line this often; 0 = never"),
    {TW_SECTION_ENGINE, "finding_every", TW_TYPE_DURATION, NULL, 0, DMAX, NULL,
     NULL, "5m",
     "at most one finding alert per rule in this much event time (its "
     "first is never held; the next carries the violations so far); "
     "default 60s with tick: continuous, 0 (every scan that finds) "
     "otherwise"},
    ENUM(TW_SECTION_ENGINE, "on_data_loss", "evaluate", "evaluate|skip",
         "a job whose beginning was lost: evaluate what is left (partial) "
         "or skip it"),
    INT(TW_SECTION_ENGINE, "quarantine_after", "3", 1, 1000000,
        "a message that made run fail this many times at one offset "
        "(restarts included) is quarantined"),
    PATH(TW_SECTION_ENGINE, "failure_ledger", "/var/lib/trainwatch/failures",
         "file counting those failures across restarts (default: "
         "results_dir/.trainwatch-failures, else in memory)"),

    /* ---- state ------------------------------------------------------- */
    ENUM(TW_SECTION_STATE, "store", "memory", "memory|redis",
         "memory (in the process; optional snapshot file) or redis"),
    DUR(TW_SECTION_STATE, "checkpoint_interval", "1s", 0,
        "at most one checkpoint per partition per interval"),
    INT(TW_SECTION_STATE, "checkpoint_slice_bytes", "262144", 0,
        (int64_t)1 << 30,
        "after a scan a job's windows and rule state go to the store in "
        "slices of this size (before compression), over the next "
        "checkpoints; a restore before the last slice runs those scans "
        "again (0 = whole, at once)"),
    INT(TW_SECTION_STATE, "checkpoint_target_bytes", "1572864", 0,
        (int64_t)1 << 30,
        "a job's checkpoint takes as many state slices as fit in this "
        "many bytes beside its new input, at least one, and at least "
        "enough to finish the snapshot before the next scan's (0 = one "
        "slice per checkpoint)"),
    DUR(TW_SECTION_STATE, "finished_ttl", "7d", SEC,
        "how long tombstones of finished jobs and sent-action ids are kept"),
    PATH(TW_SECTION_STATE, "snapshot", "/var/lib/trainwatch/state.snap",
         "memory store: a snapshot file that survives restarts (default: "
         "none)"),
    DUR(TW_SECTION_STATE, "snapshot_interval", "0s", 0,
        "memory store: snapshot at most this often; 0 = at every checkpoint"),
    DUR(TW_SECTION_STATE, "pending_check", "60s", SEC,
        "how often run looks for claims whose delivery was never confirmed"),
    DUR(TW_SECTION_STATE, "pending_after", "5m", SEC,
        "a claim unconfirmed this long is reported (longer than any send's "
        "retries)"),
    STR(TW_SECTION_STATE, "redis.host", "127.0.0.1", 1, NULL,
        "Redis server host (or redis.socket)"),
    INT(TW_SECTION_STATE, "redis.port", "6379", 1, 65535, "Redis server port"),
    PATH(TW_SECTION_STATE, "redis.socket", "/run/redis/redis.sock",
         "a Unix socket instead of host and port (give neither then)"),
    INT(TW_SECTION_STATE, "redis.db", "0", 0, 1000000, "database number"),
    STR(TW_SECTION_STATE, "redis.prefix", "tw:", 0, NULL,
        "prepended to every key"),
    STR(TW_SECTION_STATE, "redis.user", NULL, 1, "trainwatch",
        "ACL user for AUTH (default: none, the default user)"),
    STR(TW_SECTION_STATE, "redis.password_env", NULL, 1, "TW_REDIS_PASSWORD",
        "environment variable holding the password"),
    PATH(TW_SECTION_STATE, "redis.password_file", "/run/secrets/redis",
         "file holding the password (not readable by every user)"),
    DUR(TW_SECTION_STATE, "redis.connect_timeout", "2s", MS,
        "connection timeout"),
    DUR(TW_SECTION_STATE, "redis.command_timeout", "5s", MS,
        "timeout of one command"),
    DUR(TW_SECTION_STATE, "redis.retry_initial", "100ms", MS,
        "first reconnect delay, doubling up to redis.retry_max"),
    DUR(TW_SECTION_STATE, "redis.retry_max", "10s", MS,
        "longest reconnect delay"),
    INT(TW_SECTION_STATE, "redis.chunk_bytes", "67108864", 1024,
        (int64_t)1 << 29,
        "longer values are stored as a hash of chunks of this size"),

    /* ---- http -------------------------------------------------------- */
    {TW_SECTION_HTTP, "enabled", TW_TYPE_BOOL, "false", 0, 0, NULL, NULL, NULL,
     "serve /healthz /readyz /metrics /jobs (off unless asked: no port is "
     "opened by default)"},
    STR(TW_SECTION_HTTP, "listen", "127.0.0.1", 1, NULL,
        "IPv4 or IPv6 address to bind (0.0.0.0 or :: for every interface)"),
    INT(TW_SECTION_HTTP, "port", "9468", 0, 65535,
        "TCP port (0: any free port, logged at start)"),
    STR(TW_SECTION_HTTP, "token_env", NULL, 1, "TW_HTTP_TOKEN",
        "environment variable with a bearer token required on /metrics and "
        "/jobs"),
    PATH(TW_SECTION_HTTP, "token_file", "/run/secrets/trainwatch-http",
         "file with the bearer token (not readable by every user)"),
    PATH(TW_SECTION_HTTP, "tls_cert", "/etc/trainwatch/tls.crt",
         "PEM certificate: serve HTTPS (with tls_key)"),
    PATH(TW_SECTION_HTTP, "tls_key", "/etc/trainwatch/tls.key",
         "PEM private key (not readable by every user)"),
    DUR(TW_SECTION_HTTP, "jobs_ttl", "10m", 0,
        "a finished job's per-rule series and /jobs entry last this long"),
    INT(TW_SECTION_HTTP, "max_jobs", "1000", 1, 1000000,
        "most jobs with per-rule series (label cardinality bound)"),
    DUR(TW_SECTION_HTTP, "refresh", "250ms", MS,
        "how often the consuming thread publishes a new snapshot"),

    /* ---- alertmanager (engine-wide sink) ------------------------------ */
    STR(TW_SECTION_AM, "url", NULL, 1, "http://alertmanager:9093",
        "required: Alertmanager's base URL (alerts go to <url>/api/v2/alerts)"),
    STR(TW_SECTION_AM, "severity", "warning", 1, NULL,
        "the alerts' severity label"),
    STR(TW_SECTION_AM, "report_url", NULL, 1, "https://trainwatch.example.com",
        "base URL of the engine's HTTP endpoints (annotation report_url)"),
    DUR(TW_SECTION_AM, "timeout", "10s", MS, "time allowed for one attempt"),
    INT(TW_SECTION_AM, "retries", "3", 0, 100,
        "attempts after the first one fails"),
    DUR(TW_SECTION_AM, "backoff", "1s", 0,
        "delay before the first retry, doubling"),
    DUR(TW_SECTION_AM, "backoff_max", "60s", 0,
        "longest delay between retries (not below backoff)"),

    /* ---- one action -------------------------------------------------- */
    {TW_SECTION_ACTION, "type", TW_TYPE_ENUM, NULL, 0, 0,
     "stop_training|webhook|signal|stop_file|email|sms|alertmanager|capture",
     NULL, "webhook", "required: what the action does"},
    ADUR("timeout", "10s", MS, NULL, "time allowed for one attempt"),
    {TW_SECTION_ACTION, "retries", TW_TYPE_INT, "3", 0, 100, NULL, NULL, NULL,
     "attempts after the first one fails"},
    ADUR("backoff", "1s", 0, NULL, "delay before the first retry, doubling"),
    ADUR("backoff_max", "60s", 0, NULL,
         "longest delay between retries (not below backoff)"),
    ADUR("repeat_after", NULL, 0, NOTIFY,
         "notify again after this long (default: once per job and rule)"),
    ASTR("region", NULL, AWS, "us-east-1",
         "AWS region (default: $AWS_REGION, else us-east-1)"),
    ASTR("endpoint", NULL, AWS, "https://api.sagemaker.us-east-1.amazonaws.com",
         "http(s) URL of the AWS API (default: the region's)"),
    ASTR("training_job_prefix", NULL, "stop_training", "my-job",
         "stop the newest training job named with this prefix (default: "
         "the job id)"),
    {TW_SECTION_ACTION, "credentials_file", TW_TYPE_PATH, NULL, 1, 4096, NULL,
     AWS, "~/.aws/credentials",
     "AWS credentials file (default: $AWS_ACCESS_KEY_ID..., then "
     "~/.aws/credentials)"},
    ASTR("profile", "default", AWS, NULL, "profile in the credentials file"),
    ASTR("url", NULL, "webhook|alertmanager",
         "https://hooks.example.com/trainwatch",
         "required: http(s) URL receiving the alert JSON (POST); "
         "alertmanager: its base URL (alerts go to <url>/api/v2/alerts)"),
    ASTR("severity", "warning", "alertmanager", NULL,
         "the alerts' severity label"),
    ASTR("report_url", NULL, "alertmanager", "https://trainwatch.example.com",
         "base URL of the engine's HTTP endpoints: annotation report_url = "
         "<it>/jobs/<job>/report"),
    ASTR("hmac_secret_env", NULL, "webhook", "TW_HOOK_SECRET",
         "environment variable with the HMAC key signing the body"),
    {TW_SECTION_ACTION, "pid", TW_TYPE_INT, NULL, 2, 4194304, NULL, "signal",
     "12345", "process to signal (or pid_file)"},
    {TW_SECTION_ACTION, "pid_file", TW_TYPE_PATH, NULL, 1, 4096, NULL, "signal",
     "/run/train.pid", "file holding the process id (or pid)"},
    ASTR("signal", "TERM", "signal", NULL,
         "TERM, INT, KILL, HUP, QUIT, USR1, USR2 or a number"),
    {TW_SECTION_ACTION, "path", TW_TYPE_PATH, NULL, 1, 4096, NULL, "stop_file",
     "/shared/stop", "required: the file to create"},
    {TW_SECTION_ACTION, "to", TW_TYPE_LIST, NULL, 1, 4096, NULL, "email",
     "[oncall@example.com]", "required: recipients"},
    ASTR("from", "trainwatch@localhost", "email", NULL, "sender address"),
    ASTR("smtp_url", NULL, "email", "smtps://smtp.example.com",
         "required: smtp:// or smtps:// server URL"),
    {TW_SECTION_ACTION, "use_tls", TW_TYPE_BOOL, "false", 0, 0, NULL, "email",
     NULL, "require STARTTLS on smtp://"},
    ASTR("username", NULL, "email", "trainwatch", "SMTP user"),
    ASTR("password_env", NULL, "email", "TW_SMTP_PASSWORD",
         "environment variable with the SMTP password (needs username)"),
    ASTR("phone", NULL, "sms", "\"+15555550100\"",
         "required: E.164 number (+ and 1 to 15 digits)"),
    ASTR("topic_arn", NULL, "sms", "arn:aws:sns:us-east-1:123456789012:ops",
         "publish to this SNS topic instead of the phone"),
    {TW_SECTION_ACTION, "ranks", TW_TYPE_LIST, NULL, 1, 4096, NULL, "capture",
     "[0, 3]", "the ranks to capture (default: all)"},
    {TW_SECTION_ACTION, "steps", TW_TYPE_INT, "5", 1, 100000, NULL, "capture",
     NULL, "profile the next N steps of each rank"},
    ADUR("duration", NULL, MS, "capture",
         "profile this long instead of a number of steps"),
    {TW_SECTION_ACTION, "what", TW_TYPE_LIST, "trace,stacks", 1, 64, NULL,
     "capture", "[stacks]",
     "trace (torch.profiler), stacks (every thread's Python stack)"},
    ASTR("topic", "trainwatch.control", "capture", NULL,
         "the control topic the hooks listen on (key: the job id)"),
    ADUR("wait", "120s", MS, "capture",
         "how long the ranks have to answer; then timed out / rank "
         "unreachable"),
    ADUR("min_interval", "10m", 0, "capture",
         "per job: at most one capture this often (later ones skipped)"),
};

const tw_key_spec *tw_schema_table(size_t *n)
{
    *n = sizeof(schema) / sizeof(schema[0]);
    return schema;
}

const char *tw_section_name(tw_section s)
{
    static const char *const names[TW_SECTION_COUNT] = {
        "",      "rules[]",   "kafka", "engine",
        "state", "actions[]", "http",  "alertmanager"};
    return (unsigned)s < TW_SECTION_COUNT ? names[s] : "?";
}

/* Whether `path` is matched by spec path p ("x.*" matches "x.<k>"). */
static int path_matches(const char *p, const char *path)
{
    size_t n = strlen(p);
    if (n >= 2 && strcmp(p + n - 2, ".*") == 0)
        return strncmp(path, p, n - 1) == 0 && path[n - 1] != '\0';
    return strcmp(p, path) == 0;
}

const tw_key_spec *tw_schema_find(tw_section section, const char *path)
{
    for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]); i++)
        if (schema[i].section == section && path_matches(schema[i].path, path))
            return &schema[i];
    return NULL;
}

/* Whether `word` is one of the '|'-separated words of `list`. */
static int in_words(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p != NULL && *p;) {
        size_t m = strcspn(p, "|");
        if (m == n && strncmp(p, word, n) == 0)
            return 1;
        p += m + (p[m] == '|');
    }
    return 0;
}

int tw_schema_applies(const tw_key_spec *k, const char *type)
{
    if (k->section != TW_SECTION_ACTION || k->actions == NULL || type == NULL)
        return 1;
    return in_words(k->actions, type);
}

/* Levenshtein distance, 0..64 (longer strings count as far apart). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 64;
    size_t row[64];
    for (size_t j = 0; j <= m; j++)
        row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

const char *tw_schema_closest(tw_section section, const char *path,
                              const char *action_type)
{
    const char *best = NULL;
    size_t best_d = 64;
    for (size_t i = 0; i < sizeof(schema) / sizeof(schema[0]); i++) {
        const tw_key_spec *k = &schema[i];
        if (k->section != section || !tw_schema_applies(k, action_type))
            continue;
        size_t d = edit_distance(path, k->path);
        if (d < best_d) {
            best_d = d;
            best = k->path;
        }
    }
    /* Suggest only a near miss: a third of the key's letters at most. */
    size_t limit = strlen(path) / 3 > 2 ? strlen(path) / 3 : 2;
    return best_d <= limit ? best : NULL;
}

void tw_schema_format_duration(int64_t us, char *out, size_t len)
{
    static const struct {
        int64_t unit;
        const char *suffix;
    } units[] = {{86400 * SEC, "d"}, {3600 * SEC, "h"}, {60 * SEC, "m"},
                 {SEC, "s"},         {MS, "ms"},        {1, "us"}};
    if (us == 0) {
        snprintf(out, len, "0s");
        return;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (us % units[i].unit == 0) {
            snprintf(out, len, "%lld%s", (long long)(us / units[i].unit),
                     units[i].suffix);
            return;
        }
}

static int parse_int(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end != '\0' || errno != 0)
        return TW_ERR;
    *out = x;
    return TW_OK;
}

static int parse_bool(const char *v, int *out)
{
    if (in_words("true|yes|on|1", v))
        *out = 1;
    else if (in_words("false|no|off|0", v))
        *out = 0;
    else
        return TW_ERR;
    return TW_OK;
}

int tw_schema_check_value(const tw_key_spec *k, const char *v, char *msg,
                          size_t msglen)
{
    switch (k->type) {
    case TW_TYPE_STRING:
    case TW_TYPE_PATH:
    case TW_TYPE_LIST:
        if ((int64_t)strlen(v) < k->min) {
            snprintf(msg, msglen, "must not be empty");
            return TW_ERR;
        }
        if ((int64_t)strlen(v) > k->max) {
            snprintf(msg, msglen, "is longer than %lld bytes",
                     (long long)k->max);
            return TW_ERR;
        }
        return TW_OK;
    case TW_TYPE_INT: {
        int64_t x;
        if (parse_int(v, &x) != TW_OK) {
            snprintf(msg, msglen, "'%s' is not an integer", v);
            return TW_ERR;
        }
        if (x < k->min || x > k->max) {
            snprintf(msg, msglen, "%lld is outside [%lld, %lld]", (long long)x,
                     (long long)k->min, (long long)k->max);
            return TW_ERR;
        }
        return TW_OK;
    }
    case TW_TYPE_DURATION: {
        if (k->word != NULL && strcmp(v, k->word) == 0)
            return TW_OK;
        char lo[32];
        tw_schema_format_duration(k->min, lo, sizeof(lo));
        int64_t us;
        if (tw_parse_duration_us(v, &us) != TW_OK) {
            snprintf(msg, msglen,
                     "'%s' is not a duration from %s to %s (examples: 500ms, "
                     "30s, 2m, 1h, 7d)%s%s%s",
                     v, lo, TW_DURATION_MAX_TEXT, k->word ? " or '" : "",
                     k->word ? k->word : "", k->word ? "'" : "");
            return TW_ERR;
        }
        if (us < k->min) {
            snprintf(msg, msglen, "'%s' is shorter than %s%s%s%s", v, lo,
                     k->word ? ": give a longer duration or '" : "",
                     k->word ? k->word : "", k->word ? "'" : "");
            return TW_ERR;
        }
        return TW_OK;
    }
    case TW_TYPE_BOOL: {
        int b;
        if (parse_bool(v, &b) != TW_OK) {
            snprintf(msg, msglen, "'%s' is not true or false", v);
            return TW_ERR;
        }
        return TW_OK;
    }
    case TW_TYPE_ENUM:
        if (!in_words(k->word, v)) {
            snprintf(msg, msglen, "'%s' is not one of %s", v, k->word);
            return TW_ERR;
        }
        return TW_OK;
    default:
        snprintf(msg, msglen, "must be a %s",
                 k->type == TW_TYPE_MAPPING || k->type == TW_TYPE_SECTION
                     ? "mapping"
                     : "list of mappings");
        return TW_ERR;
    }
}

int tw_schema_check_settings(const tw_settings *s, tw_section section,
                             const char *action_type, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->n; i++) {
        const tw_setting *it = &s->items[i];
        const tw_key_spec *k = tw_schema_find(section, it->key);
        if (k != NULL && !tw_schema_applies(k, action_type))
            return tw_settings_error(s, it, err, errlen,
                                     "unknown key for type %s (it applies to "
                                     "%s)",
                                     action_type, k->actions);
        if (k == NULL) {
            const char *near = tw_schema_closest(section, it->key, action_type);
            return tw_settings_error(
                s, it, err, errlen,
                "unknown key%s%s%s (trainwatch config --describe lists them)",
                near ? " (did you mean '" : "", near ? near : "",
                near ? "'?)" : "");
        }
        char msg[256];
        if (tw_schema_check_value(k, it->value, msg, sizeof(msg)) != TW_OK)
            return tw_settings_error(s, it, err, errlen, "%s", msg);
    }
    return TW_OK;
}

/* The present value of path, else its default (spec asserted to exist). */
static const char *value_of(const tw_settings *s, tw_section section,
                            const char *path, const tw_key_spec **spec)
{
    *spec = tw_schema_find(section, path);
    assert(*spec != NULL && "key missing from the schema table");
    const tw_setting *v = s != NULL ? tw_settings_find(s, path) : NULL;
    return v != NULL ? v->value : (*spec)->def;
}

const char *tw_schema_str(const tw_settings *s, tw_section section,
                          const char *path)
{
    const tw_key_spec *k;
    return value_of(s, section, path, &k);
}

int64_t tw_schema_int(const tw_settings *s, tw_section section,
                      const char *path)
{
    const tw_key_spec *k;
    const char *v = value_of(s, section, path, &k);
    int64_t x = 0;
    if (v != NULL && parse_int(v, &x) != TW_OK)
        assert(0 && "integer setting read before tw_schema_check_settings");
    return x;
}

int64_t tw_schema_duration_us(const tw_settings *s, tw_section section,
                              const char *path)
{
    const tw_key_spec *k;
    const char *v = value_of(s, section, path, &k);
    int64_t us = 0;
    if (v != NULL && tw_parse_duration_us(v, &us) != TW_OK)
        assert(0 && "duration setting read before tw_schema_check_settings");
    return us;
}

int tw_schema_bool_value(const char *v)
{
    int b = 0;
    if (parse_bool(v, &b) != TW_OK)
        assert(0 && "boolean value read before tw_schema_check_value");
    return b;
}

int tw_schema_bool(const tw_settings *s, tw_section section, const char *path)
{
    const tw_key_spec *k;
    const char *v = value_of(s, section, path, &k);
    int b = 0;
    if (v != NULL && parse_bool(v, &b) != TW_OK)
        assert(0 && "boolean setting read before tw_schema_check_settings");
    return b;
}
