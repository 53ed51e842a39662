#!/usr/bin/env bash
# Formats the project's C and C++ sources with the committed .clang-format,
# using Debian 12's clang-format 14 (scripts/setup.sh installs it; another
# version may format differently, so the check insists on 14).
#   scripts/format.sh           rewrite every file in place
#   scripts/format.sh --check   list the files that differ; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null || { echo "format: $CF not installed (scripts/setup.sh)" >&2; exit 2; }
ver=$("$CF" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
[ "$ver" = 14 ] || { echo "format: clang-format 14 expected, found '$("$CF" --version)'" >&2; exit 2; }
mapfile -t files < <(git ls-files 'engine/*.c' 'engine/*.h' 'engine/*.cc' 'rules/*.c' \
    'rules/*.h' 'plugins/*.c' 'plugins/*.h' 'tests/*.c' 'tests/*.h' 'tests/*.cc')
if [ "${1:-}" = --check ]; then
    bad=0
    for f in "${files[@]}"; do
        if ! "$CF" --style=file "$f" | cmp -s - "$f"; then
            echo "format: $f differs from .clang-format (scripts/format.sh fixes it)"
            bad=1
        fi
    done
    [ $bad = 0 ] && echo "format: ${#files[@]} files as .clang-format says"
    exit $bad
fi
"$CF" --style=file -i "${files[@]}"
echo "format: ${#files[@]} files formatted"
