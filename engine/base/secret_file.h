/*
 * secret_file.h - files that hold a secret (a configuration with a
 * password in it, state.redis.password_file, an AWS credentials file) must
 * not be readable by every user of the machine. trainwatch refuses such a
 * file rather than warn, as ssh does with a private key: a warning scrolls
 * by in a log while the secret stays exposed. The error names the file,
 * its mode and the fix, never the secret.
 */
#ifndef TW_SECRET_FILE_H
#define TW_SECRET_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Non-zero when a setting named `key` (dotted, as in tw_setting) holds a
 * secret itself, e.g. "properties.sasl.password"; keys that only name
 * where a secret is ("password_env", "password_file") do not. */
int tw_secret_key(const char *key);

/* TW_ERR when the open file f (at path) is readable by others (mode o+r)
 * or cannot be checked, with err saying so and the fix ("every user can
 * read PATH (mode 0644): refused, run 'chmod o-r PATH'") for the caller to
 * put after what the file holds and where. Checked on the open file, so
 * the file read is the file checked. */
int tw_secret_file_check(FILE *f, const char *path, char *err, size_t errlen);

#endif /* TW_SECRET_FILE_H */
