# Sourced by the scripts that build Go programs from their modules
# (upstream-capi, clusterctl): the module proxy only, and where a module is.

# Only the module proxy: a too-new go line fails fast instead of fetching a
# toolchain, and nothing is fetched from a VCS.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
[ "$GOPROXY" = "https://proxy.golang.org,direct" ] && export GOPROXY=https://proxy.golang.org

module_dir() { # module@version: its directory in the module cache, downloaded if need be
  go mod download -json "$1" | sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p'
}
