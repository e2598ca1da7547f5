# Sourced by the builders of Kubernetes components (controlplane, node):
# `k8s_stamp VERSION` prints the -X flags that make a binary built from the
# k8s.io/kubernetes module report VERSION, as a release build does.
k8s_stamp() {
  local version=$1 minor pkg stamp="" build_date
  build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  minor=${version#v1.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  printf '%s' "$stamp"
}
