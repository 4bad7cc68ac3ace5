# troupe: the two set-up commands of the README (`make serve`, `make test`),
# plus `make bench`. Each installs missing Debian packages and builds first.

BUILD ?= build
MODEL ?= models/tiny
JOBS ?= 2
PROMPT ?= Permission is hereby granted
MESON_OPTS ?= -Dwerror=true

.PHONY: all bootstrap build serve test bench clean

all: build

bootstrap:
	@scripts/bootstrap.sh

$(BUILD)/build.ninja: | bootstrap
	meson setup $(BUILD) $(MESON_OPTS)

build: bootstrap $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j $(JOBS)

$(MODEL)/model.safetensors: | build
	$(BUILD)/troupe make-model --preset tiny --out $(MODEL)

# Until the server lands (issue 3) this streams one generation.
serve: build $(MODEL)/model.safetensors
	$(BUILD)/troupe generate --model $(MODEL) --prompt "$(PROMPT)" --max-tokens 96 --temperature 0.7 --seed 1

test: build
	@meson test -C $(BUILD) --num-processes $(JOBS) --print-errorlogs; rc=$$?; \
	  python3 scripts/test_summary.py $(BUILD)/meson-logs/testlog.json; exit $$rc

bench: build
	$(BUILD)/troupe bench-engine --preset stories110m

clean:
	rm -rf $(BUILD)
