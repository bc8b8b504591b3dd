#!/usr/bin/env bash
# Idempotent set-up: Debian packages, the UCX internal headers that match the
# installed UCX, UCX's config.h, then configure, build and install to ./install.
#   scripts/setup.sh            everything
#   DOORBELL_BUILD_DIR=dir      build folder (default: build)
#   DOORBELL_SKIP_BUILD=1       packages and headers only
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${DOORBELL_BUILD_DIR:-build}
log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# 1. Debian packages (only those missing).
mapfile -t pkgs < <(cat scripts/packages.d/*.txt | sed 's/#.*//' | tr -s ' \t' '\n' | sed '/^$/d' | sort -u)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  [[ $(id -u) == 0 ]] || die "packages missing (${missing[*]}); run as root or install them"
  log "installing ${#missing[@]} Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. UCX internal headers (uct/base, ucs internals) from the Debian source
#    package of exactly the installed UCX version, with Debian's patches.
command -v ucx_info >/dev/null || die "ucx_info not found (package ucx-utils)"
ucx_ver=$(dpkg-query -W -f='${Version}' libucx-dev 2>/dev/null) \
  || die "libucx-dev is not installed"
ucx_upstream=${ucx_ver%%-*}
ucx_upstream=${ucx_upstream#*:}
run_ver=$(ucx_info -v | sed -n 's/^# Version \([0-9.]*\).*/\1/p')
[[ $run_ver == "$ucx_upstream" ]] \
  || die "ucx_info reports UCX $run_ver but libucx-dev is $ucx_ver: the runtime and the headers must match"
stamp=.deps/ucx-src/.doorbell-version
if [[ ! -f $stamp || $(cat "$stamp") != "$ucx_ver" ]]; then
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    [[ $(id -u) == 0 ]] || die "no deb-src entry for apt-get source; run as root once to add one"
    [[ -f /etc/apt/sources.list.d/debian.sources ]] \
      || die "no /etc/apt/sources.list.d/debian.sources to derive a deb-src entry from; add a deb-src line for the Debian release and rerun"
    log "adding a deb-src entry derived from debian.sources"
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      > /etc/apt/sources.list.d/doorbell-src.sources
    apt-get update -qq || die "apt-get update failed after adding the deb-src entry"
  fi
  rm -rf .deps/ucx-dl && mkdir -p .deps/ucx-dl
  log "fetching the UCX source package ucx=$ucx_ver"
  if ! (cd .deps/ucx-dl && apt-get source -qq --download-only "ucx=$ucx_ver" >apt-source.log 2>&1); then
    [[ -f .deps/ucx-dl/apt-source.log ]] && sed 's/^/[setup]   /' .deps/ucx-dl/apt-source.log >&2
    die "apt-get source ucx=$ucx_ver failed: the source package of the installed UCX is not available from the configured deb-src entries"
  fi
  dsc=$(ls .deps/ucx-dl/*.dsc 2>/dev/null | head -n1)
  [[ -n $dsc ]] || die "apt-get source ucx=$ucx_ver downloaded no .dsc"
  src_ver=$(sed -n 's/^Version: //p' "$dsc")
  [[ $src_ver == "$ucx_ver" ]] || die "UCX source version $src_ver does not match installed $ucx_ver"
  rm -rf .deps/ucx-src
  # dpkg-source applies Debian's patches: the tree is the one Debian built.
  dpkg-source --no-check -x "$dsc" .deps/ucx-src >/dev/null \
    || die "dpkg-source -x $dsc failed"
  [[ -f .deps/ucx-src/src/uct/base/uct_iface.h ]] \
    || die "the UCX source tree lacks src/uct/base/uct_iface.h"
  echo "$ucx_ver" > "$stamp"
  rm -rf .deps/ucx-dl
fi
# UCX's config.h, exactly as the installed build was configured.
mkdir -p .deps/ucx-config
ucx_info -b > .deps/ucx-config/config.h.new || die "ucx_info -b failed"
grep -q '^#define ENABLE_STATS' .deps/ucx-config/config.h.new \
  && die "installed UCX is built with ENABLE_STATS; struct layouts differ from what doorbell is written for"
if ! cmp -s .deps/ucx-config/config.h.new .deps/ucx-config/config.h 2>/dev/null; then
  mv .deps/ucx-config/config.h.new .deps/ucx-config/config.h
else
  rm .deps/ucx-config/config.h.new
fi

[[ ${DOORBELL_SKIP_BUILD:-0} == 1 ]] && exit 0

# 3. Configure, build, install.
log "configuring $build"
cmake -S . -B "$build" -G Ninja -DCMAKE_INSTALL_PREFIX="$root/install" >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log" >&2; die "cmake configure failed (log: $build.configure.log)"; }
log "building (this takes a few minutes on 2 cores)"
cmake --build "$build" -j "$(nproc)" || die "build failed"
cmake --install "$build" >/dev/null || die "install failed"
log "installed into $root/install"
