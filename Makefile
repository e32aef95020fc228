# npkit — top-level build.  `make` sets up everything a fresh machine needs
# (Debian packages, a Python venv with pinned packages, the C emulator core).
SHELL := /bin/bash
PY_SYS ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NPK := $(VENV)/bin/npk
STAMP := .build
APT_PKGS := build-essential binutils graphviz tshark lcov clang binutils-arm-linux-gnueabi libc6-dev-armel-cross libgcc-12-dev-armel-cross qemu-user gdb-multiarch chromium libclang-rt-14-dev
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all deps venv emulator xscale bytecode test demo bench bench-against lint clean fuzz soak

all: deps venv emulator xscale bytecode

# npkit's own modules compiled once (the editable install is not; every npk command
# compiled them again, ~0.3 s, when PYTHONDONTWRITEBYTECODE is set); stale ones are
# recompiled by Python itself.
bytecode: venv
	$(PY) -m compileall -q asm emulator toolchain xscale

$(STAMP):
	mkdir -p $(STAMP)

# System packages: installed only when missing, so repeat runs are quick (the list is
# checked again whenever this Makefile changes).  clang + libclang-rt: the fuzzer.
deps: $(STAMP)/apt.ok
$(STAMP)/apt.ok: Makefile | $(STAMP)
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	touch $@

venv: $(STAMP)/venv.ok
$(STAMP)/venv.ok: pyproject.toml constraints.txt | $(STAMP)
	test -x $(PY) || $(PY_SYS) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

emulator: venv
	$(MAKE) -C emulator PY=$(CURDIR)/$(PY)

# XScale programs (ARM and native builds), the Unicorn budget hook, the C unit tests
xscale: venv deps
	$(MAKE) -C xscale PY=$(CURDIR)/$(PY)

test: all
	$(PY) -m pytest -q -n 2 tests

demo: all
	$(NPK) demo

# Every benchmark (bench.json), then this tree against commit REF side by side
# (bench-against.json; default: the commit the speed work started from; REF= skips it).
# bench-against alone does the second part.  REF is built once under $NPK_CACHE_DIR/against.
REF ?= 801c1cf
bench: all
	$(NPK) bench --json > bench.json
	@cat bench.json
	rm -rf bench-spp
	$(NPK) experiment run examples/experiments/spp_fig11.yaml -o bench-spp/fig11
	$(NPK) experiment run examples/experiments/spp_latency.yaml -o bench-spp/latency
	$(NPK) experiment report bench-spp/fig11 -o bench-spp/fig11/report.html
	$(NPK) experiment report bench-spp/latency -o bench-spp/latency/report.html
	$(if $(REF),$(MAKE) --no-print-directory bench-against REF=$(REF))

bench-against: all
	$(NPK) bench --against $(REF) --json > bench-against.json
	@cat bench-against.json

# Fuzz the C core with libFuzzer for FUZZ_SECONDS (nice'd: the machine is shared);
# new inputs collect in emulator/build/fuzz-corpus, findings in emulator/build/fuzz-artifacts/.
FUZZ_SECONDS ?= 1800
fuzz: all
	nice -n 10 $(MAKE) -C emulator fuzz-run PY=$(CURDIR)/$(PY) FUZZ_SECONDS=$(FUZZ_SECONDS)

# The soak (not part of `make test`): the router at 5 x 1 Gb/s for SOAK_MINUTES (at most
# 30) while its control socket is abused, its daemon killed and restarted and hostile
# frames arrive; every run must end with verdict ok (tools/soak.py; JSON on stdout).
SOAK_MINUTES ?= 25
soak: all
	$(PY) tools/soak.py --minutes $(SOAK_MINUTES)

lint: venv
	$(VENV)/bin/ruff check asm emulator toolchain xscale tests tools

clean:
	rm -rf $(STAMP) bench.json bench-spp
	$(MAKE) -C emulator clean
	$(MAKE) -C xscale clean
