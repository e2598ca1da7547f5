#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing,
# as root (or through sudo), without recommended packages. Prints nothing
# when all are there.
#
#   tests/apt-install.sh PACKAGE...
set -euo pipefail

missing=()
for package in "$@"; do
  dpkg-query --show --showformat='${db:Status-Status}' "$package" 2>/dev/null | grep -qx installed ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

command -v apt-get >/dev/null 2>&1 ||
  { printf 'apt-install: %s missing and apt-get is not here: install them by hand\n' "${missing[*]}" >&2; exit 1; }
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 ||
    { printf 'apt-install: %s missing: installing them needs root or sudo\n' "${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
printf 'apt-install: installing %s from Debian (first time only)\n' "${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh machine's package lists may be missing or stale.
"${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
  "${as_root[@]}" apt-get update >&2
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2
}
