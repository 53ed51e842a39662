#!/bin/bash
# runtime-packages.sh BINARY: the Debian packages owning the shared
# libraries BINARY loads, one per line, sorted. The image's runtime stage
# installs exactly these (apt adds their dependencies), so the list cannot
# drift from what the build linked. With merged /usr, dpkg knows some
# libraries by their /lib path only, so both paths are asked (in one dpkg
# call: it is slow to start). Exit 1 naming a library no package owns.
set -euo pipefail
bin=${1:?usage: runtime-packages.sh BINARY}
libs=$(ldd "$bin" | awk '/=> \// {print $3}')
[ -n "$libs" ] || { echo "runtime-packages: $bin loads no shared library" >&2; exit 1; }
paths=()
for lib in $libs; do
  real=$(realpath "$lib")
  paths+=("$real" "${real#/usr}")
done
owners=$(dpkg -S "${paths[@]}" 2>/dev/null || true) # "pkg[:arch]: path" lines
for lib in $libs; do
  real=$(realpath "$lib")
  pkg=$(printf '%s\n' "$owners" | awk -F': ' -v a="$real" -v b="${real#/usr}" \
    '$NF == a || $NF == b { sub(/:.*/, "", $1); print $1; exit }')
  [ -n "$pkg" ] || { echo "runtime-packages: no package owns $lib" >&2; exit 1; }
  echo "$pkg"
done | sort -u
