#!/usr/bin/env bash
# Installs the Debian 12 packages troupe builds with (../shared/STACK.md), only
# those missing. Idempotent; prints nothing when everything is present.
set -euo pipefail

packages=(
  meson ninja-build pkg-config cmake curl g++ python3 nodejs
  libcaf-dev libboost1.81-dev libboost-json1.81-dev libsimdjson-dev
  libsentencepiece-dev sentencepiece doctest-dev libtomlplusplus-dev
  libopenblas-dev prometheus prometheus-cpp-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
