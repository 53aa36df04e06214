#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Keel quick start, from a fresh clone on Debian 12 (or Ubuntu):
#   1. install the Debian packages Keel needs (only those missing; sudo if not root),
#   2. bootstrap the build system (autoreconf -fi),
#   3. configure and build in build/ (arguments to this script go to configure),
#   4. run build/tools/keel-info and build/examples/keel-demo on the backend
#      Keel selects by itself.
# Then `make -C build check` runs the test suite. Safe to run again: it
# reconfigures and rebuilds what changed.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

packages=(autoconf automake libtool pkg-config make gcc check libsubunit-dev
          libopenblas-dev libdlpack-dev)

step() { printf '\n==> %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "quickstart: need root for: $*; run as root or install sudo" >&2
        exit 1
    fi
}

# ---- 1. packages ----------------------------------------------------------
step "Debian packages"
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
else
    echo "all present: ${packages[*]}"
fi

# ---- 2. bootstrap ---------------------------------------------------------
step "autoreconf -fi"
autoreconf -fi

# ---- 3. configure and build -----------------------------------------------
step "configure and build in build/"
mkdir -p build
cd build
../configure "$@"
make -j"$(nproc)"
cd "$top"

# ---- 4. run ----------------------------------------------------------------
# A libkeel run from its build tree finds the plugins built beside it: no
# KEEL_BACKEND_PATH is needed, here or when the tools are run by hand.
step "build/tools/keel-info"
build/tools/keel-info

step "build/examples/keel-demo"
build/examples/keel-demo

step "done"
echo "Next: make -C build check     (the test suite)"
