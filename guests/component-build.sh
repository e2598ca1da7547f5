# Sourced by guests/python/build.sh and guests/js/build.sh with their
# arguments: checks them, and sets `here` (the language's directory), `root`
# (the repository) and `out` (OUT_DIR, made absolute).
[ $# -eq 1 ] || { printf 'usage: %s OUT_DIR\n' "$0" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)

# Whether component `$1` is missing or older than a source in the
# directories after it.
stale() {
  local target=$1
  shift
  [ ! -f "$target" ] || [ -n "$(find -L "$@" -newer "$target" -type f -print -quit)" ]
}
