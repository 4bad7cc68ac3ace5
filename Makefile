# troupe: the two set-up commands of the README (`make serve`, `make test`),
# plus `make bench` and `make install`. Each installs missing Debian packages
# and builds first.

BUILD ?= build
MODEL ?= models/tiny
JOBS ?= 2
MESON_OPTS ?= -Dwerror=true
# make install: where to, and a staging root in front of it (for packaging).
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all bootstrap build install serve test test-repeat fuzz soak bench bench-grammar bench-agent-ttft bench-request-path bench-jump-forward bench-long-prefill bench-prepare bench-tokenizer bench-quant bench-serve bench-policies bench-sim sim-fidelity bench-routing bench-isolation bench-gpu clean

all: build

bootstrap:
	@scripts/bootstrap.sh

$(BUILD)/build.ninja: | bootstrap
	meson setup $(BUILD) $(MESON_OPTS) --prefix=$(PREFIX)

build: bootstrap $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS)

$(MODEL)/model.safetensors: | build
	$(BUILD)/troupe make-model --preset tiny --out $(MODEL)

# troupe in $(PREFIX)/bin, libtroupe_cuda.so (where the CUDA toolkit is) in
# $(PREFIX)/lib/<arch>/troupe, example configs in $(PREFIX)/share/troupe.
install: build
	meson configure $(BUILD) -Dprefix=$(PREFIX)
	DESTDIR="$(DESTDIR)" meson install -C $(BUILD)

# The OpenAI-compatible server on 127.0.0.1:8080 (the built-in defaults).
serve: build $(MODEL)/model.safetensors
	$(BUILD)/troupe serve $(MODEL)

test: build
	@meson test -C $(BUILD) --num-processes $(JOBS) --print-errorlogs; rc=$$?; \
	  python3 scripts/test_summary.py $(BUILD)/meson-logs/testlog.json; exit $$rc

# The integration tests N times over (default 5), each failure printed.
N ?= 5
test-repeat: build
	@BUILD=$(BUILD) N=$(N) JOBS=$(JOBS) scripts/test_repeat.sh

bench: build
	$(BUILD)/troupe bench-engine --preset stories110m

# troupe against llama.cpp (npm node-llama-cpp's prebuilt CPU build) on the
# same GGUF files, rounds interleaved: TinyLlama-1.1B and stories110M shapes
# as Q8_0, Q4_K_M and BF16, 1 and 2 threads (scripts/bench_quant.py).
bench-quant: build
	python3 scripts/bench_quant.py $(BUILD)/troupe $(BUILD)/tests/write_gguf

# Mixtures of experts against llama.cpp, the same way: Qwen3-30B-A3B (Q4_K_M)
# and gpt-oss-20b (MXFP4), their real per-layer shapes, 4 layers each.
bench-moe: build
	python3 scripts/bench_quant.py $(BUILD)/troupe $(BUILD)/tests/write_gguf --layers 4 \
	  --pairs qwen3-30b-a3b:q4_k_m,gpt-oss-20b:mxfp4

# Structured output's cost: decode tokens/s under a JSON schema against plain
# decoding, interleaved, at batch 1 and 32, with Llama 2's and Llama 3.2's
# vocabularies (tests/tools), a large schema's compile time, and Claude
# Code's tools (recorded from tests/agents by scripts/record_agent_tools.py).
bench-grammar: build
	@python3 scripts/record_agent_tools.py $(BUILD)/claude_code_tools.json || true
	$(BUILD)/troupe bench-grammar $$([ -f $(BUILD)/claude_code_tools.json ] && echo --tools $(BUILD)/claude_code_tools.json)

# Jump-forward on and off: constrained completions on two servers, interleaved.
bench-jump-forward: build
	python3 scripts/bench_jump_forward.py $(BUILD)/troupe

# A 20,000-token prompt's prefill beside 8 running streams, prefill pacing on
# and off (scheduler.prefill_chunk_cost), servers interleaved; and the same in
# the simulator (scripts/bench_long_prefill.py).
bench-long-prefill: build
	python3 scripts/bench_long_prefill.py $(BUILD)/troupe

# An agent's first turn on the CPU and its next: Claude Code's first request
# (recorded from tests/agents) replayed through the Messages API, TTFT cold
# and with the prefix cache (scripts/bench_agent_ttft.py).
bench-agent-ttft: build
	python3 scripts/bench_agent_ttft.py $(BUILD)/troupe

# The serving path's own latency at low load: TTFT on the zero executor
# beside an HTTP round trip to /health, interleaved (scripts/bench_request_path.py).
bench-request-path: build
	python3 scripts/bench_request_path.py $(BUILD)/troupe

# Request preparation (parsing, the chat template, tokenizing) per message at
# 1k, 4k and 20k messages, on a live server's tokenizer pool (scripts/bench_prepare.py).
bench-prepare: build
	python3 scripts/bench_prepare.py $(BUILD)/troupe

# tokenizer.json encode speed, troupe against Hugging Face tokenizers (one
# thread each, interleaved runs, medians) on the real tokenizers of tests/tools.
bench-tokenizer: build
	node scripts/bench_tokenizer.mjs $(BUILD)/troupe

# The libFuzzer harnesses (tests/fuzz/) under ASan and UBSan, each for
# FUZZ_SECONDS (default 60) from the tests' seed corpora (scripts/fuzz.sh).
fuzz: build
	@BUILD=$(BUILD) scripts/fuzz.sh

# make soak [N=...]: N requests (default 1,000,000) against the zero-cost
# executor, the server's resident memory printed every 10,000 (scripts/soak.sh).
soak: build
	TROUPE=$(BUILD)/troupe N=$(if $(filter command line,$(origin N)),$(N),1000000) scripts/soak.sh

# The server's figures: serving overhead (zero-cost executor, 1000 streams),
# stories110m at a few request rates, and a Q4_K_M GGUF beside BF16 with the
# KV capacity of f32 and q8_0 caches (scripts/bench_serve.sh).
bench-serve: build
	TROUPE=$(BUILD)/troupe WRITE_GGUF=$(BUILD)/tests/write_gguf scripts/bench_serve.sh

# Scheduling policies on stories110m: continuous vs static batching, prefix
# caching on/off, vtc vs fcfs under a 4:1 tenant mix (scripts/bench_policies.sh).
bench-policies: build
	TROUPE=$(BUILD)/troupe scripts/bench_policies.sh
	$(BUILD)/troupe bench-scheduler

# The simulator: its speed on a one-replica chat workload (1,000,000
# requests), and its fidelity against the real CPU server at three loads.
bench-sim: build
	TROUPE=$(BUILD)/troupe scripts/bench_sim.sh

sim-fidelity: build
	TROUPE=$(BUILD)/troupe python3 scripts/sim_fidelity.py

# Tenant isolation under vtc: a light tenant's p95 TTFT alone and beside a
# tenant flooding at 4x its share (scripts/bench_isolation.sh).
bench-isolation: build
	TROUPE=$(BUILD)/troupe scripts/bench_isolation.sh

# Routing policies on 4 real replicas (4 CPU devices, the tiny model) on a
# multi-turn chat workload: prefix-cache hit rate and TTFT per policy.
bench-routing: build
	TROUPE=$(BUILD)/troupe python3 scripts/bench_routing.py

# The CUDA backend on a GPU: read bandwidth and bf16 GEMM rate measured in
# the same run; decode step time and tokens/s at batch 1, 16, 64 and 256, and
# prefill tokens/s, for llama-3.2-1b and llama-3-8b with random weights.
bench-gpu: build
	@test -x $(BUILD)/troupe-gpu-bench || { echo "make bench-gpu: no $(BUILD)/troupe-gpu-bench (built only where the CUDA toolkit is)"; exit 1; }
	$(BUILD)/troupe-gpu-bench

clean:
	rm -rf $(BUILD)
