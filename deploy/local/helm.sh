#!/usr/bin/env bash
# Install Helm into .local/bin from the Go module proxy (idempotent) and print its path.
# Usage: deploy/local/helm.sh [install|path|version]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
HELM_VERSION="${DRIFTGAUGE_HELM_VERSION:-v3.16.4}"
# Kubernetes minor version that `helm template` and `helm lint` assume without a cluster;
# Helm's own release build sets it from its client-go (v0.31 for Helm 3.16), a bare
# `go install` would leave it at 1.20 and reject charts that need a newer Kubernetes.
HELM_KUBE_MINOR="${DRIFTGAUGE_HELM_KUBE_MINOR:-31}"
BIN_DIR="$LOCAL/bin"
HELM="$BIN_DIR/helm"
STAMP="$BIN_DIR/.helm-build"
BUILD_ID="$HELM_VERSION kube-1.$HELM_KUBE_MINOR"

installed_version() {
  [ -x "$HELM" ] || return 1
  "$HELM" version --template '{{.Version}}' 2>/dev/null
}

install() {
  if [ "$(installed_version || true)" = "$HELM_VERSION" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$BUILD_ID" ]; then
    log "helm $HELM_VERSION already in $HELM"
    return 0
  fi
  command -v go >/dev/null || die "go is needed to build helm (install Go 1.22 or newer)"
  mkdir -p "$BIN_DIR"
  log "building helm $HELM_VERSION with $(go version | cut -d' ' -f3) (takes a few minutes)"
  # Go stamps no version into a module build, so pass it the way Helm's own Makefile does;
  # -p 1 keeps the build from starving the stores that share the 2 cores.
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  local pkg
  for pkg in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
  done
  GOBIN="$BIN_DIR" GOFLAGS="${GOFLAGS:-} -buildvcs=false" go install -p 1 -ldflags "$ldflags" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$LOCAL/helm-build.log" 2>&1 \
    || { tail -30 "$LOCAL/helm-build.log"; die "helm build failed"; }
  [ "$(installed_version || true)" = "$HELM_VERSION" ] || die "built helm does not report $HELM_VERSION"
  echo "$BUILD_ID" >"$STAMP"
  log "helm $HELM_VERSION installed in $HELM"
}

case "${1:-install}" in
  install) install; echo "$HELM" ;;
  path) echo "$HELM" ;;
  version) installed_version || die "helm is not installed; run $0 install" ;;
  *) echo "usage: $0 install|path|version" >&2; exit 2 ;;
esac
