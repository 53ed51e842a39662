/* secret_file.c - refusing world-readable files that hold a secret
 * (secret_file.h). */
#include "secret_file.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "trainwatch/plugin.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int tw_secret_key(const char *key)
{
    /* Names of where a secret is kept are not secrets. */
    if (ends_with(key, "_env") || ends_with(key, "_file"))
        return 0;
    /* librdkafka's sasl.password, ssl.key.password, ssl.keystore.password,
     * sasl.oauthbearer.client.secret; ssl.key.pem is a private key and
     * sasl.oauthbearer.config may carry a client secret. */
    return strstr(key, "password") != NULL || strstr(key, "secret") != NULL ||
           ends_with(key, "ssl.key.pem") ||
           ends_with(key, "sasl.oauthbearer.config");
}

int tw_secret_file_check(FILE *f, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        snprintf(err, errlen, "cannot check the permissions of %s: %s", path,
                 strerror(errno));
        return TW_ERR;
    }
    if ((st.st_mode & S_IROTH) == 0)
        return TW_OK;
    snprintf(err, errlen,
             "every user can read %s (mode %04o): refused, run 'chmod o-r "
             "%s'",
             path, (unsigned)(st.st_mode & 07777), path);
    return TW_ERR;
}
