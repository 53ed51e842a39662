#!/usr/bin/env bash
# Locale independence end to end: `trainwatch eval` (table and --json)
# prints the same bytes under LC_ALL=de_DE.UTF-8 (a comma-decimal locale)
# as under LC_ALL=C. The locale is the system's if installed, else
# compiled with localedef into a temporary LOCPATH; without either the
# test says so and skips (exit 0). Usage: eval_locale.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

LOC=de_DE.UTF-8
if ! locale -a 2>/dev/null | grep -qi '^de_DE\.utf-\?8$'; then
  if [ -r /usr/share/i18n/locales/de_DE ] && command -v localedef >/dev/null &&
     localedef -i de_DE -f UTF-8 "$WORK/de_DE.UTF-8" >/dev/null 2>&1; then
    export LOCPATH="$WORK"
    # glibc keeps LOCPATH's parsed copy (argz) to the end: not ours, but
    # LeakSanitizer (the ASan pass) would fail every command on it
    echo 'leak:__argz_add_sep' >"$WORK/lsan.supp"
    export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$WORK/lsan.supp"
  else
    echo "skip: no de_DE locale and no localedef sources"; exit 0
  fi
fi
# the locale is real: it writes 1.5 as 1,5
[ "$(LC_ALL=$LOC printf '%.1f' 1,5 2>/dev/null)" = "1,5" ] ||
  fail "$LOC does not have a comma decimal separator here"

"$TW" synth "$WORK/job" --preset step_outliers --seed 5 2>/dev/null
for loc in C "$LOC"; do
  # line 1 has the wall time of the evaluation
  LC_ALL=$loc "$TW" eval "$WORK/job" | sed 1d >"$WORK/table.$loc"
  LC_ALL=$loc "$TW" eval "$WORK/job" --json |
    sed 's/"seconds": [0-9.e-]*//' >"$WORK/json.$loc"
done
cmp -s "$WORK/table.C" "$WORK/table.$LOC" ||
  fail "eval's table differs under $LOC: $(diff "$WORK/table.C" "$WORK/table.$LOC" | head -5)"
cmp -s "$WORK/json.C" "$WORK/json.$LOC" ||
  fail "eval --json differs under $LOC"
grep -q '[0-9]\.[0-9]' "$WORK/table.C" || fail "no decimal number to compare"
grep -q 'how much: .*[0-9]\.[0-9]' "$WORK/table.$LOC" ||
  fail "the finding's magnitude lost its decimal point under $LOC"
echo "ok: eval's table and JSON identical under C and $LOC${LOCPATH:+ (localedef, LOCPATH)}"
