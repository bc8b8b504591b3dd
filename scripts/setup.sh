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
#    package of exactly the installed UCX version.
ucx_ver=$(dpkg-query -W -f='${Version}' libucx-dev)
ucx_upstream=${ucx_ver%%-*}
stamp=.deps/ucx-src/.doorbell-version
if [[ ! -f $stamp || $(cat "$stamp") != "$ucx_ver" ]]; then
  if ! ls /etc/apt/sources.list.d/doorbell-src.sources >/dev/null 2>&1; then
    [[ -f /etc/apt/sources.list.d/debian.sources ]] || die "no /etc/apt/sources.list.d/debian.sources to derive a deb-src entry from"
    log "adding a deb-src entry derived from debian.sources"
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      > /etc/apt/sources.list.d/doorbell-src.sources
    apt-get update -qq
  fi
  rm -rf .deps/ucx-dl && mkdir -p .deps/ucx-dl
  log "fetching the UCX source package ucx=$ucx_ver"
  (cd .deps/ucx-dl && apt-get source -qq --download-only "ucx=$ucx_ver" >/dev/null 2>&1) \
    || die "apt-get source ucx=$ucx_ver failed: the source package of the installed UCX is not available"
  dsc=$(ls .deps/ucx-dl/*.dsc)
  src_ver=$(sed -n 's/^Version: //p' "$dsc")
  [[ $src_ver == "$ucx_ver" ]] || die "UCX source version $src_ver does not match installed $ucx_ver"
  rm -rf .deps/ucx-src && mkdir -p .deps/ucx-src
  tar -xf .deps/ucx-dl/ucx_"$ucx_upstream".orig.tar.* -C .deps/ucx-src --strip-components=1
  echo "$ucx_ver" > "$stamp"
  rm -rf .deps/ucx-dl
fi
# UCX's config.h, exactly as the installed build was configured.
mkdir -p .deps/ucx-config
ucx_info -b > .deps/ucx-config/config.h.new
grep -q ENABLE_STATS .deps/ucx-config/config.h.new && die "installed UCX is built with ENABLE_STATS; struct layouts differ"
if ! cmp -s .deps/ucx-config/config.h.new .deps/ucx-config/config.h 2>/dev/null; then
  mv .deps/ucx-config/config.h.new .deps/ucx-config/config.h
else
  rm .deps/ucx-config/config.h.new
fi

[[ ${DOORBELL_SKIP_BUILD:-0} == 1 ]] && exit 0

# 3. Configure, build, install.
log "configuring $build"
cmake -S . -B "$build" -G Ninja -DCMAKE_INSTALL_PREFIX="$root/install" >/dev/null
log "building (this takes a few minutes on 2 cores)"
cmake --build "$build" -j "$(nproc)"
cmake --install "$build" >/dev/null
log "installed into $root/install"
