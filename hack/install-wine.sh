#!/usr/bin/env bash
# Sets up Wine to run the GOOS=windows test binaries: Debian's wine, a
# prefix in the cache, and a small bcryptprimitives.dll (built here with
# mingw) without which no Go >= 1.22 binary starts under Wine 8.
# Prints the WINEPREFIX. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${ERASER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/eraser}
PREFIX="${CACHE}/wine/prefix"
SYS32="${PREFIX}/drive_c/windows/system32"
# shellcheck source=hack/lock.sh
. hack/lock.sh
lock wine

need=()
command -v wine >/dev/null || need+=(wine64 wine)
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64-win32)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-wine: installing ${need[*]}" >&2
  apt_install "${need[@]}"
fi

export WINEPREFIX="${PREFIX}" WINEDEBUG=-all
if [ ! -f "${SYS32}/bcryptprimitives.dll" ]; then
  echo "install-wine: creating the prefix (about 15 s, once)" >&2
  mkdir -p "${PREFIX}"
  wineboot -i >/dev/null 2>&1 || true
  wineserver -w || true
  x86_64-w64-mingw32-gcc -shared -O2 -s -nostdlib -e DllMain -o "${SYS32}/bcryptprimitives.dll.tmp" \
    hack/wine/bcryptprimitives.c -ladvapi32 -lkernel32
  mv "${SYS32}/bcryptprimitives.dll.tmp" "${SYS32}/bcryptprimitives.dll"
fi
echo "${PREFIX}"
