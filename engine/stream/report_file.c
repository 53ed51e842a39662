/*
 * report_file.c - the HTML report next to a finished job's results file
 * (report_file.h).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "report_file.h"
#include "report_html.h"
#include "results_file.h"
#include "trainwatch/plugin.h"

int tw_report_file_write(const char *dir, const char *id,
                         const char *results_json, tw_registry *reg, char *err,
                         size_t errlen)
{
    char name[TW_RESULTS_NAME_LEN], path[4400], tmp[4400];
    tw_results_file_name(id, name);
    snprintf(path, sizeof(path), "%s/%s.html", dir, name);
    /* a leading '.' keeps the temporary file out of /jobs/<id>/report */
    snprintf(tmp, sizeof(tmp), "%s/.%s.html.tmp", dir, name);
    json_error_t je;
    json_t *results = json_loads(results_json, 0, &je);
    if (results == NULL) {
        snprintf(err, errlen, "%.600s: the results do not parse: %s", path,
                 je.text);
        return TW_ERR;
    }
    tw_report_input in = {.results = results,
                          .describe = tw_report_describe_registry,
                          .describe_ud = reg};
    char why[512] = "";
    int rc = TW_ERR;
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        snprintf(why, sizeof(why), "%s", strerror(errno));
    } else {
        rc = tw_report_html_write(f, &in, why, sizeof(why));
        /* on disk before the rename, so a power loss cannot leave an empty
         * page under the report's name */
        if (rc == TW_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0)) {
            snprintf(why, sizeof(why), "syncing: %s", strerror(errno));
            rc = TW_ERR;
        }
        if (fclose(f) != 0 && rc == TW_OK) {
            snprintf(why, sizeof(why), "closing: %s", strerror(errno));
            rc = TW_ERR;
        }
        if (rc == TW_OK && rename(tmp, path) != 0) {
            snprintf(why, sizeof(why), "renaming: %s", strerror(errno));
            rc = TW_ERR;
        }
        if (rc != TW_OK)
            unlink(tmp);
    }
    if (rc != TW_OK)
        snprintf(err, errlen, "%.600s: %s", path, why);
    json_decref(results);
    return rc;
}
