#!/usr/bin/env bash
# Installs the Debian 12 packages troupe builds with, only those missing.
# Idempotent; prints nothing when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  meson ninja-build pkg-config cmake curl g++ python3 nodejs
  libcaf-dev libboost1.81-dev libboost-json1.81-dev libsimdjson-dev
  libsentencepiece-dev sentencepiece doctest-dev libtomlplusplus-dev
  libopenblas-dev prometheus prometheus-cpp-dev
  chromium
  clang libclang-rt-14-dev # make fuzz: clang with libFuzzer, ASan and UBSan
  libssl-dev openssl # CAF's TLS for the workers' link; the tests make certificates
)

# The chat page's browser test drives Debian's chromium with playwright-core,
# from npm (tests/browser/package-lock.json pins it).
browser_tools() {
  [ -d tests/browser/node_modules/playwright-core ] && return 0
  echo "bootstrap: npm ci in tests/browser (playwright-core)"
  npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error >/dev/null
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  browser_tools
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
browser_tools
