/*
 * action_local.c - StopTraining for self-hosted training: a signal to a PID
 * (given, or read from a pid file at send time) or a stop file that the
 * training loop polls. `{job}` in a stop file path becomes the job id ('/'
 * replaced by '_'). Both are a few syscalls, run on the worker thread.
 *
 * Ownership: nothing is kept; messages go to the caller's buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "action_internal.h"

static tw_act_outcome send_signal(tw_action_task *t, char *msg, size_t msglen)
{
    const tw_action_spec *sp = t->spec;
    long pid = sp->pid;
    if (pid == 0) {
        FILE *f = fopen(sp->pid_file, "r");
        if (f == NULL) {
            /* the training may not have written it yet */
            snprintf(msg, msglen, "cannot read pid file %s: %s", sp->pid_file,
                     strerror(errno));
            return TW_ACT_RETRY;
        }
        char line[64] = "";
        char *end = NULL;
        if (fgets(line, sizeof(line), f) != NULL)
            pid = strtol(line, &end, 10);
        fclose(f);
        if (end == line || pid < 2 ||
            (end != NULL && *end != '\0' && *end != '\n')) {
            snprintf(msg, msglen, "pid file %s holds no process id",
                     sp->pid_file);
            return TW_ACT_FAIL;
        }
    }
    if (kill((pid_t)pid, sp->signo) != 0) {
        int e = errno;
        snprintf(msg, msglen, "kill(%ld, %s): %s", pid, strsignal(sp->signo),
                 strerror(e));
        return e == ESRCH ? TW_ACT_SKIP : TW_ACT_FAIL;
    }
    snprintf(msg, msglen, "sent %s to pid %ld", strsignal(sp->signo), pid);
    return TW_ACT_DONE;
}

static tw_act_outcome stop_file(tw_action_task *t, char *msg, size_t msglen)
{
    char path[4096], tmp[4200];
    size_t k = 0;
    for (const char *p = t->spec->path; *p && k < sizeof(path) - 1;) {
        if (strncmp(p, "{job}", 5) == 0) {
            for (const char *j = t->job; *j && k < sizeof(path) - 1; j++)
                path[k++] = *j == '/' ? '_' : *j;
            p += 5;
        } else
            path[k++] = *p++;
    }
    path[k] = '\0';
    /* write a temporary file and rename it: readers see all or nothing */
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot create %s: %s", tmp, strerror(errno));
        return TW_ACT_RETRY;
    }
    char text[2048];
    int n = snprintf(text, sizeof(text), "job=%s\nrule=%s\nfinding=%s\n",
                     t->job, t->rule, t->finding ? t->finding : "");
    if (n < 0 || (size_t)n >= sizeof(text))
        n = (int)strlen(text);
    int ok = write(fd, text, (size_t)n) == n;
    int e = errno;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        e = ok ? errno : e;
        unlink(tmp);
        snprintf(msg, msglen, "cannot write %s: %s", path, strerror(e));
        return TW_ACT_RETRY;
    }
    snprintf(msg, msglen, "created %s", path);
    return TW_ACT_DONE;
}

tw_act_outcome tw_action_local_run(tw_action_task *t, char *msg, size_t msglen)
{
    if (t->spec->type == TW_ACTION_SIGNAL)
        return send_signal(t, msg, msglen);
    return stop_file(t, msg, msglen);
}
