# Sourced by the tool installers (go-tool, pip-tool) with $name set: where
# the cache is, how to fail, and how to reuse what is there.

cache_root=${CAPWASM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capwasm}

fail() { printf '%s: %s\n' "$name" "$*" >&2; exit 1; }

# If `$1` is executable, prints `$2` and exits. Otherwise takes the tool's
# lock (one install at a time: parallel test binaries wait for the first)
# and looks again, since the first may have installed it meanwhile.
reuse_or_lock() {
  [ -x "$1" ] && { printf '%s\n' "$2"; exit 0; }
  mkdir -p "$cache_root"
  exec 9>"$cache_root/.$name-install.lock"
  flock 9
  [ -x "$1" ] && { printf '%s\n' "$2"; exit 0; }
  return 0
}
