# ddptop build. `make` builds build/ddptop, build/ddptop-agent and build/ddptop-train.
# Sources are found by directory; a file named *_main.c is a program's entry point and stays
# out of the module archives that the programs and the unit tests link against.

BUILD     ?= build
CC        ?= cc
CUDA_HOME ?= /usr/local/cuda
PKGS_TUI   = ncursesw libssh libcjson
PKGS_AGENT = libcjson
PKGS_RT    = openblas

WARN   = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
         -Wmissing-prototypes -Wvla -Wformat=2 -Wno-format-nonliteral -Wundef
CFLAGS ?= -O2 -g
# Kept apart from CFLAGS so that `make CFLAGS=...` (asan) keeps the warnings and includes.
DDP_CFLAGS = -std=c11 -D_GNU_SOURCE $(WARN) -MMD -MP -Ilauncher -Iruntime -Itui
LDLIBS_BASE = -lpthread -lm

# CUDA and NCCL are optional: found under CUDA_HOME unless NO_CUDA=1.
ifeq ($(NO_CUDA),)
  ifneq ($(wildcard $(CUDA_HOME)/bin/nvcc),)
    HAVE_CUDA = 1
  endif
endif
ifeq ($(HAVE_CUDA),1)
  NVCC       = $(CUDA_HOME)/bin/nvcc
  NVCCFLAGS ?= -O2 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
  CUDA_LIBS  = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++
  RT_CFLAGS  = -DDDPTOP_HAVE_CUDA=1 -I$(CUDA_HOME)/include
endif

pkg_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pkg_libs   = $(shell pkg-config --libs $(1) 2>/dev/null)

# launcher/ is in rooms (docs/architecture.md), one archive each. ddptop links them in the
# order of their dependencies; ddptop-agent links only agent, wire and util, with cJSON and
# libc: no libssh, no curses.
ROOMS        = controller openmetrics check ssh record job wire hosts util
AGENT_ROOMS  = agent wire util
room_src     = $(filter-out %_main.c,$(wildcard launcher/$(1)/*.c))
room_lib     = $(if $(call room_src,$(1)),$(BUILD)/lib$(1).a)
LAUNCHER_SRC = $(foreach r,$(ROOMS) agent,$(call room_src,$(r)))
# tui/ is the dashboard and the line printer; tui/session/ the session layer (its own room,
# tui/session/README.md), archived with them in libtui.a.
TUI_SRC      = $(filter-out %_main.c,$(wildcard tui/*.c tui/session/*.c))
# tui/cmd/: the program's entry (ddptop_main.c) and the subcommands, one archive above tui's.
CMD_SRC      = $(filter-out %_main.c,$(wildcard tui/cmd/*.c))
RUNTIME_SRC  = $(filter-out %_main.c,$(wildcard runtime/*.c))
RUNTIME_CU   = $(if $(HAVE_CUDA),$(wildcard runtime/*.cu))
TEST_SRC     = $(wildcard tests/test_*.c)

LAUNCHER_OBJ = $(LAUNCHER_SRC:%.c=$(BUILD)/obj/%.o)
TUI_OBJ      = $(TUI_SRC:%.c=$(BUILD)/obj/%.o)
CMD_OBJ      = $(CMD_SRC:%.c=$(BUILD)/obj/%.o)
RUNTIME_OBJ  = $(RUNTIME_SRC:%.c=$(BUILD)/obj/%.o) $(RUNTIME_CU:%.cu=$(BUILD)/obj/%.cu.o)
TEST_BIN     = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

LIB_TUI      = $(BUILD)/libtui.a
LIB_CMD      = $(BUILD)/libcmd.a
LIB_RUNTIME  = $(BUILD)/libruntime.a
LIBS_LAUNCHER = $(foreach r,$(ROOMS),$(call room_lib,$(r)))
LIBS_AGENT    = $(foreach r,$(AGENT_ROOMS),$(call room_lib,$(r)))

# An archive with no members yet is left out of the link (ld refuses an empty one).
LIBS_ALL = $(LIB_CMD) $(if $(TUI_OBJ),$(LIB_TUI)) $(foreach r,controller openmetrics check ssh record job agent wire hosts util,$(call room_lib,$(r))) $(if $(RUNTIME_OBJ),$(LIB_RUNTIME))

# The agents for the nodes, one per architecture (launcher/dist/README.md): ddptop uploads the
# one a node's `uname -m` names. PORTABLE=0 builds only this machine's, against its own glibc.
PORTABLE     ?= 1
HOST_ARCH    := $(shell uname -m)
AGENT_ARCHES ?= x86_64 aarch64
NODE_AGENTS   = $(if $(filter 1,$(PORTABLE)),$(AGENT_ARCHES:%=$(BUILD)/ddptop-agent-%))

PROGS = $(BUILD)/ddptop $(BUILD)/ddptop-agent $(BUILD)/ddptop-train $(NODE_AGENTS)

# Test and bench objects are intermediates of pattern rules: keep them (relinks stay cheap).
# Only those: with a bare .SECONDARY every target is secondary, and a new source file older
# than its room's archive would never be compiled on an incremental build.
.SECONDARY: $(TEST_SRC:tests/%.c=$(BUILD)/obj/tests/%.o) \
            $(patsubst tests/bench/%.c,$(BUILD)/obj/tests/bench/%.o,$(wildcard tests/bench/*.c)) \
            $(patsubst tests/bench/%.cu,$(BUILD)/obj/tests/bench/%.cu.o,$(wildcard tests/bench/*.cu))
.PHONY: demo-check bench-programs fuzz fuzz-programs all deps test test-unit test-gpu bench bench-gpu demo asan clean tests
all: $(PROGS) tests

# Each room is compiled with the flags of what it may use: only ssh/ sees libssh.
$(BUILD)/obj/launcher/ssh/%.o: launcher/ssh/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) $(call pkg_cflags,libssh $(PKGS_AGENT)) -c $< -o $@
$(BUILD)/obj/launcher/%.o: launcher/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) $(call pkg_cflags,$(PKGS_AGENT)) -c $< -o $@
$(BUILD)/obj/tui/%.o: tui/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) $(call pkg_cflags,$(PKGS_TUI)) -c $< -o $@
$(BUILD)/obj/runtime/%.o: runtime/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) $(RT_CFLAGS) $(call pkg_cflags,$(PKGS_RT)) -c $< -o $@
$(BUILD)/obj/runtime/%.cu.o: runtime/%.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -Iruntime -c $< -o $@
$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) $(RT_CFLAGS) -Itests $(call pkg_cflags,$(PKGS_TUI) $(PKGS_RT)) -c $< -o $@

define room_archive
$(BUILD)/lib$(1).a: $(patsubst %.c,$(BUILD)/obj/%.o,$(call room_src,$(1)))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach r,$(ROOMS) agent,$(eval $(call room_archive,$(r))))
$(LIB_TUI): $(TUI_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
$(LIB_CMD): $(CMD_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
$(LIB_RUNTIME): $(RUNTIME_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/ddptop: $(BUILD)/obj/tui/cmd/ddptop_main.o $(LIB_CMD) $(if $(TUI_OBJ),$(LIB_TUI)) $(LIBS_LAUNCHER)
	$(CC) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI)) $(LDLIBS_BASE)
# The agent of this machine (the local runs, srun and pbs_tmrsh): the portable one of this
# architecture, or with PORTABLE=0 one linked against this machine's glibc and libcjson. The
# latter is also built for the tests (build/tests/ddptop-agent-hostlibc): an agent that asks for
# a newer glibc than Debian 11's, for the "too old a glibc" case on a real Debian 11 node.
$(BUILD)/tests/ddptop-agent-hostlibc: $(BUILD)/obj/launcher/agent/agent_main.o $(LIBS_AGENT)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_AGENT)) $(LDLIBS_BASE)
ifneq ($(NODE_AGENTS),)
ifneq ($(filter $(HOST_ARCH),$(AGENT_ARCHES)),)
$(BUILD)/ddptop-agent: $(BUILD)/ddptop-agent-$(HOST_ARCH)
	cp -f $< $@
else
$(BUILD)/ddptop-agent: $(BUILD)/tests/ddptop-agent-hostlibc
	cp -f $< $@
endif
else
$(BUILD)/ddptop-agent: $(BUILD)/tests/ddptop-agent-hostlibc
	cp -f $< $@
endif
tests: $(BUILD)/tests/ddptop-agent-hostlibc

# ---- the agents for the nodes (launcher/dist/README.md) ----
# Compiled once more per architecture against Debian 11's headers and C library (glibc 2.31;
# what they ask for is 2.28 at most: tests/it_agent_glibc.sh), with cJSON's own sources compiled
# in, so an agent is one file that needs nothing on a node but glibc, and still dlopens the
# node's NVML and NCCL. The sysroots (launcher/dist/sysroot.sh) are fetched once from Debian's
# archive into SYSROOT_CACHE and reused by every clone and build on this machine.
SYSROOT_CACHE ?= /var/tmp/ddptop-build-$(shell id -u)
deb_arch      = $(if $(filter x86_64,$(1)),amd64,$(if $(filter aarch64,$(1)),arm64,$(1)))
arch_cc       = $(if $(filter $(HOST_ARCH),$(1)),$(CC),$(1)-linux-gnu-gcc)
sysroot_of    = $(SYSROOT_CACHE)/bullseye-$(call deb_arch,$(1))
# A native gcc searches its own prefix's library directories before the sysroot's: -B and -L
# put the sysroot's crt files and libraries first (and LIBRARY_PATH is emptied for the link).
# launcher/dist/glibc_floor.h binds the few symbols whose 2.31 version is above 2.28 to older ones.
sysroot_cflags  = --sysroot=$(call sysroot_of,$(1)) -B$(call sysroot_of,$(1))/usr/lib/$(1)-linux-gnu \
                  -include launcher/dist/glibc_floor.h
sysroot_ldflags = $(call sysroot_cflags,$(1)) -L$(call sysroot_of,$(1))/usr/lib/$(1)-linux-gnu \
                  -L$(call sysroot_of,$(1))/lib/$(1)-linux-gnu -static-libgcc
CJSON_SRC     = $(SYSROOT_CACHE)/cjson
AGENT_PORT_SRC = $(foreach r,$(AGENT_ROOMS),$(call room_src,$(r))) launcher/agent/agent_main.c

define node_agent
$(BUILD)/nodes/$(1)/sysroot.stamp: launcher/dist/sysroot.sh
	@mkdir -p $$(@D)
	@command -v $(call arch_cc,$(1)) >/dev/null || { echo "make: $(call arch_cc,$(1)) is missing: make deps installs it (or build with AGENT_ARCHES=$(HOST_ARCH))" >&2; exit 1; }
	launcher/dist/sysroot.sh $(SYSROOT_CACHE) $(call deb_arch,$(1)) >/dev/null
	launcher/dist/sysroot.sh $(SYSROOT_CACHE) cjson >/dev/null
	echo '$(call sysroot_of,$(1))' >$$@
$(BUILD)/nodes/$(1)/obj/%.o: %.c $(BUILD)/nodes/$(1)/sysroot.stamp launcher/dist/glibc_floor.h
	@mkdir -p $$(@D)
	$(call arch_cc,$(1)) $(call sysroot_cflags,$(1)) $(CFLAGS) $(DDP_CFLAGS) -I$(CJSON_SRC) -c $$< -o $$@
$(BUILD)/nodes/$(1)/obj/cJSON.o: $(BUILD)/nodes/$(1)/sysroot.stamp launcher/dist/glibc_floor.h
	@mkdir -p $$(@D)
	$(call arch_cc,$(1)) $(call sysroot_cflags,$(1)) $(CFLAGS) -std=c89 -c $(CJSON_SRC)/cJSON.c -o $$@
$(BUILD)/ddptop-agent-$(1): $(patsubst %.c,$(BUILD)/nodes/$(1)/obj/%.o,$(AGENT_PORT_SRC)) $(BUILD)/nodes/$(1)/obj/cJSON.o
	LIBRARY_PATH= $(call arch_cc,$(1)) $(call sysroot_ldflags,$(1)) $(LDFLAGS) -o $$@ $$^ -ldl -lpthread -lm
endef
$(foreach a,$(AGENT_ARCHES),$(eval $(call node_agent,$(a))))
# A sysroot removed since (a /var/tmp clean-up) or another SYSROOT_CACHE: its stamp goes, and
# the sysroot is made again before anything is compiled against it.
ifneq ($(NODE_AGENTS),)
$(foreach a,$(AGENT_ARCHES),$(shell [ -f $(call sysroot_of,$(a))/.ddptop-sysroot ] && \
  [ -f $(CJSON_SRC)/.ddptop-sysroot ] && grep -qxF '$(call sysroot_of,$(a))' $(BUILD)/nodes/$(a)/sysroot.stamp \
  2>/dev/null || rm -f $(BUILD)/nodes/$(a)/sysroot.stamp))
endif
$(BUILD)/ddptop-train: $(BUILD)/obj/runtime/train_main.o $(if $(RUNTIME_OBJ),$(LIB_RUNTIME))
	$(CC) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_RT)) $(CUDA_LIBS) $(LDLIBS_BASE)

# Every unit test links every module archive; the archives pull in only what a test uses.
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIBS_ALL)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(CUDA_LIBS) $(LDLIBS_BASE)
tests: $(TEST_BIN)

# Benchmark programs (tests/bench/*.c) are built only by `make bench` (and bench-programs).
BENCH_BIN = $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/*.c))
$(BUILD)/obj/tests/bench/%.o: tests/bench/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) $(RT_CFLAGS) -Itests $(call pkg_cflags,$(PKGS_TUI) $(PKGS_RT)) -c $< -o $@
$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(LIBS_ALL)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(CUDA_LIBS) $(LDLIBS_BASE)
# CUDA benchmark programs (tests/bench/*.cu), only in a CUDA build.
BENCH_CU_BIN = $(if $(HAVE_CUDA),$(patsubst tests/bench/%.cu,$(BUILD)/bench/%,$(wildcard tests/bench/*.cu)))
$(BUILD)/obj/tests/bench/%.cu.o: tests/bench/%.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -Iruntime -Itests -c $< -o $@
$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.cu.o $(LIBS_ALL)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(CUDA_LIBS) $(LDLIBS_BASE)
bench-programs: $(BENCH_BIN) $(BENCH_CU_BIN)

# fakecuda (tests/fakecuda, docs/gpu.md "Without a GPU"): the GPU backend's own sources built
# for the CPU against a test double of the CUDA runtime, cuBLAS and NCCL, so that its kernels,
# cuBLAS calls and NCCL handling are tested on every machine, GPU or not. The .cu files are
# compiled as C++ after `k<<<...>>>(` is rewritten to `fake_launch(k, ...)(`.
FAKE          = $(BUILD)/fakecuda
FAKE_SED      = s/([A-Za-z_][A-Za-z0-9_]*)<<<(.*)>>>\(/fake_launch(\1, \2)(/
FAKE_CXXFLAGS = -std=c++17 -O2 -g -ffp-contract=off -Wall -Wextra -Werror -MMD -MP \
                -Itests/fakecuda -Iruntime $(call pkg_cflags,$(PKGS_RT))
FAKE_OBJ = $(patsubst tests/fakecuda/%.cc,$(FAKE)/obj/%.o,$(wildcard tests/fakecuda/*.cc)) \
           $(patsubst runtime/%.cu,$(FAKE)/obj/%.cu.o,$(wildcard runtime/*.cu)) \
           $(FAKE)/obj/train_cuda.o
FAKE_PROGS = $(FAKE)/ddptop-train $(FAKE)/bench_gpu $(BUILD)/tests/test_gpu_ops_fake \
             $(BUILD)/tests/test_gpu_lt_fake $(BUILD)/tests/test_gpu_fakecuda

$(FAKE)/src/%.cc: runtime/%.cu
	@mkdir -p $(@D)
	sed -E -e '1i #line 1 "$<"' -e '$(FAKE_SED)' $< >$@
$(FAKE)/src/bench_gpu.cc: tests/bench/bench_gpu.cu
	@mkdir -p $(@D)
	sed -E -e '1i #line 1 "$<"' -e '$(FAKE_SED)' $< >$@
$(FAKE)/src/selftest.cc: tests/fakecuda/selftest.cu
	@mkdir -p $(@D)
	sed -E -e '1i #line 1 "$<"' -e '$(FAKE_SED)' $< >$@
$(FAKE)/obj/%.cu.o: $(FAKE)/src/%.cc
	@mkdir -p $(@D)
	$(CXX) $(FAKE_CXXFLAGS) -c $< -o $@
$(FAKE)/obj/%.o: tests/fakecuda/%.cc
	@mkdir -p $(@D)
	$(CXX) $(FAKE_CXXFLAGS) -c $< -o $@
$(FAKE)/obj/train_cuda.o: runtime/train_cuda.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) -DDDPTOP_HAVE_CUDA=1 -c $< -o $@
$(FAKE)/obj/test_gpu_ops.o: tests/test_gpu_ops.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) -DDDPTOP_HAVE_CUDA=1 -Itests -c $< -o $@
$(FAKE)/obj/test_gpu_lt.o: tests/test_gpu_lt.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(DDP_CFLAGS) -DDDPTOP_HAVE_CUDA=1 -Itests -c $< -o $@
# The fake objects come first, so the archive's own train_cuda.o and CUDA objects stay out.
$(FAKE)/ddptop-train: $(BUILD)/obj/runtime/train_main.o $(FAKE_OBJ) $(LIB_RUNTIME)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_RT)) $(LDLIBS_BASE)
$(FAKE)/bench_gpu: $(FAKE)/obj/bench_gpu.cu.o $(FAKE_OBJ) $(LIBS_ALL)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(LDLIBS_BASE)
$(BUILD)/tests/test_gpu_ops_fake: $(FAKE)/obj/test_gpu_ops.o $(FAKE_OBJ) $(LIBS_ALL)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(LDLIBS_BASE)
$(BUILD)/tests/test_gpu_lt_fake: $(FAKE)/obj/test_gpu_lt.o $(FAKE_OBJ) $(LIBS_ALL)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(LDLIBS_BASE)
$(BUILD)/tests/test_gpu_fakecuda: $(FAKE)/obj/selftest.cu.o $(filter-out $(FAKE)/obj/train_cuda.o $(FAKE)/obj/%_cuda.cu.o $(FAKE)/obj/ops_cuda_%.cu.o $(FAKE)/obj/comm_nccl.cu.o,$(FAKE_OBJ))
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_RT)) $(LDLIBS_BASE)
tests: $(FAKE_PROGS)

# fakenvml (tests/fakenvml, a TEST DOUBLE of the driver's libnvidia-ml.so.1): the agent's GPU
# sampler finds it through LD_LIBRARY_PATH as it would find the real one. No CUDA needed.
FAKE_NVML = $(BUILD)/fakenvml/libnvidia-ml.so.1
$(FAKE_NVML): tests/fakenvml/fake_nvml.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared \
	  -Wl,-soname,libnvidia-ml.so.1 -o $@ $<
tests: $(FAKE_NVML)

# fakecudart (tests/fakecudart, a TEST DOUBLE of the CUDA runtime and cuBLAS): bench_host's GPU
# measurement finds libcudart.so.12 and libcublas.so.12 through LD_LIBRARY_PATH as it would
# find the toolkit's. The fake cuBLAS needs the fake runtime (found beside it: $ORIGIN), as
# the real one needs the real one.
FAKE_CUDART = $(BUILD)/fakecudart/libcudart.so.12
FAKE_CUBLAS = $(BUILD)/fakecudart/libcublas.so.12
FAKE_CUDART_FLAGS = $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -shared
$(FAKE_CUDART): tests/fakecudart/fake_cudart.c tests/fakecudart/fake_cudart.h
	@mkdir -p $(@D)
	$(CC) $(FAKE_CUDART_FLAGS) -Wl,-soname,libcudart.so.12 -o $@ $<
$(FAKE_CUBLAS): tests/fakecudart/fake_cublas.c tests/fakecudart/fake_cudart.h $(FAKE_CUDART)
	$(CC) $(FAKE_CUDART_FLAGS) -Wl,-soname,libcublas.so.12 -Wl,-rpath,'$$ORIGIN' -o $@ $< $(FAKE_CUDART)
tests: $(FAKE_CUDART) $(FAKE_CUBLAS)

# fakenccl (tests/fakenccl, a TEST DOUBLE of NCCL): bench_nccl's all-reduce finds libnccl.so.2
# through LD_LIBRARY_PATH beside the fake CUDA runtime; its bytes go over real TCP.
FAKE_NCCL = $(BUILD)/fakenccl/libnccl.so.2
$(FAKE_NCCL): tests/fakenccl/fake_nccl.c
	@mkdir -p $(@D)
	$(CC) $(FAKE_CUDART_FLAGS) -Wl,-soname,libnccl.so.2 -o $@ $< -lpthread
tests: $(FAKE_NCCL)

# Fuzzing (tests/fuzz/fuzz_*.c, docs/testing.md "Fuzzing"): one libFuzzer harness per parser of
# what comes from another process or a file, built with clang under ASan and UBSan into
# build/fuzz/, apart from the gcc build. The project's sources are compiled again there with
# -fsanitize=fuzzer-no-link (coverage for libFuzzer) and linked as one archive; `make test`
# runs each target briefly (tests/it_fuzz.sh), `make fuzz` for FUZZ_SECONDS each.
FUZZ_CC      ?= clang
FUZZ_DIR      = $(BUILD)/fuzz
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS   = -O1 -g $(FUZZ_SAN) -std=c11 -D_GNU_SOURCE $(WARN) -MMD -MP -Ilauncher -Itui \
                $(call pkg_cflags,$(PKGS_TUI))
FUZZ_OBJ      = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(LAUNCHER_SRC) $(TUI_SRC))
FUZZ_TARGETS  = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN      = $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
FUZZ_SECONDS ?= 120
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_DIR)/libddptop.a: $(FUZZ_OBJ)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_DIR)/libddptop.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Itests/fuzz -fsanitize=fuzzer -o $@ $< $(FUZZ_DIR)/libddptop.a \
	  $(call pkg_libs,$(PKGS_TUI)) $(LDLIBS_BASE)
fuzz-programs: $(FUZZ_BIN)
# Every target for FUZZ_SECONDS (FUZZ=NAME for one), its corpus growing in build/fuzz/corpus/.
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-programs
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ)

# Installs the Debian packages that are missing: apt-get as root, else prints the command.
DEB_PKGS = build-essential pkg-config libncurses-dev libssh-dev libcjson-dev libopenblas-dev \
           openssh-server openssh-client tmux faketime pdsh iproute2 procps gdb python3 python3-torch \
           slurm-wlm munge clang libclang-rt-14-dev man-db prometheus \
           $(CROSS_GCC_PKG) debootstrap qemu-user-static binfmt-support
# the compiler of the other architecture's agent; debootstrap and qemu make the tests' Debian 11
# and aarch64 nodes (tests/lib/noderoot.sh)
CROSS_GCC_PKG = $(if $(filter x86_64,$(HOST_ARCH)),gcc-aarch64-linux-gnu,gcc-x86-64-linux-gnu)
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; \
	elif [ "$$(id -u)" = 0 ]; then echo "deps: installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	else echo "deps: missing packages; run as root:"; \
	  echo "  sudo apt-get install -y$$missing"; exit 1; fi

test: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tests/run.sh

# Only the tests whose name matches T (a shell glob), e.g. make test-unit T='test_hostfile*'.
test-unit: all
	@BUILD=$(BUILD) tests/run.sh $(T)

# tests/test_gpu_*.c and tests/gpu_*.sh: they skip, saying why, when no GPU is visible.
test-gpu: all
	@BUILD=$(BUILD) tests/run.sh '*gpu_*'

bench: deps
	@$(MAKE) --no-print-directory all bench-programs
	@BUILD=$(BUILD) tests/bench/run.sh $(BENCH_PARTS)

# The GPU figures only (tests/bench/gpu.sh); "no GPU: skipped" without one.
bench-gpu: all bench-programs
	@BUILD=$(BUILD) bash tests/bench/gpu.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tests/demo.sh

# `ddptop check` against two throwaway local sshd hosts.
demo-check: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tests/demo_check.sh

# float-cast-overflow is not part of GCC's "undefined": named, so that a double from the wire
# converted out of range (wire/json_num.h) is caught.
asan:
	@$(MAKE) --no-print-directory BUILD=build-asan \
	  CFLAGS='-O1 -g -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer' \
	  LDFLAGS='-fsanitize=address,undefined,float-cast-overflow' PORTABLE=0 all

# `make install` (README "Install"): ddptop on PATH, the programs it starts where it looks for
# them (../libexec/ddptop/ from its own directory: util_exe_program), the man page, the themes
# (../share/ddptop/themes: theme_dirs_init) and the bash completion. DESTDIR stages it (a
# package); `make uninstall` with the same PREFIX removes exactly what install put there.
PREFIX     ?= /usr/local
BINDIR      = $(PREFIX)/bin
LIBEXECDIR  = $(PREFIX)/libexec/ddptop
DATADIR     = $(PREFIX)/share/ddptop
MAN1DIR     = $(PREFIX)/share/man/man1
COMPDIR     = $(PREFIX)/share/bash-completion/completions
THEMES      = $(notdir $(wildcard themes/*.theme))
INSTALLED   = $(BINDIR)/ddptop $(LIBEXECDIR)/ddptop-agent $(LIBEXECDIR)/ddptop-train \
              $(NODE_AGENTS:$(BUILD)/%=$(LIBEXECDIR)/%) \
              $(MAN1DIR)/ddptop.1 $(COMPDIR)/ddptop $(THEMES:%=$(DATADIR)/themes/%)
.PHONY: install uninstall
install: $(PROGS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DATADIR)/themes \
	  $(DESTDIR)$(MAN1DIR) $(DESTDIR)$(COMPDIR)
	install -m 755 $(BUILD)/ddptop $(DESTDIR)$(BINDIR)/ddptop
	install -m 755 $(BUILD)/ddptop-agent $(BUILD)/ddptop-train $(NODE_AGENTS) $(DESTDIR)$(LIBEXECDIR)/
	install -m 644 docs/ddptop.1 $(DESTDIR)$(MAN1DIR)/ddptop.1
	install -m 644 tui/cmd/completion.bash $(DESTDIR)$(COMPDIR)/ddptop
	install -m 644 $(addprefix themes/,$(THEMES)) $(DESTDIR)$(DATADIR)/themes/
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(DATADIR)/themes $(DESTDIR)$(DATADIR) $(DESTDIR)$(LIBEXECDIR) 2>/dev/null

# `make dist` (docs/install.md): ddptop-VERSION-linux-ARCH.tar.gz for each of DIST_ARCHES, laid
# out as `make install` lays out PREFIX and running from wherever it is unpacked, on any Linux
# of that architecture with glibc 2.28 or newer. ddptop and ddptop-train are compiled again
# against the Debian 11 sysroot of the agents: cJSON, ncurses and OpenBLAS linked in, libssh
# and the libraries it needs carried in lib/ddptop/ (found through RPATH $ORIGIN/..), the
# agents of every architecture, terminfo entries, the man page, the completion and the themes.
# ddptop-train there is the CPU build (the GPU backend links the node's CUDA: build it there).
VERSION     := $(shell sed -n 's/^\#define DDPTOP_VERSION "\(.*\)"/\1/p' launcher/util/version.h)
DIST_ARCHES ?= $(AGENT_ARCHES)
DIST_DIR     = $(BUILD)/dist
DIST_SRC     = $(LAUNCHER_SRC) $(TUI_SRC) $(CMD_SRC) tui/cmd/ddptop_main.c
DIST_RT_SRC  = $(RUNTIME_SRC) runtime/train_main.c
# pkg-config of the sysroot, run by the recipe (the sysroot may not exist when make starts)
dist_pkg = PKG_CONFIG_SYSROOT_DIR=$(call sysroot_of,$(1)) PKG_CONFIG_LIBDIR=$(call sysroot_of,$(1))/usr/lib/$(1)-linux-gnu/pkgconfig:$(call sysroot_of,$(1))/usr/lib/$(1)-linux-gnu/openblas-pthread/pkgconfig pkg-config

define dist_build
$(DIST_DIR)/$(1)/obj/%.o: %.c $(BUILD)/nodes/$(1)/sysroot.stamp launcher/dist/glibc_floor.h
	@mkdir -p $$(@D)
	$(call arch_cc,$(1)) $(call sysroot_cflags,$(1)) $(CFLAGS) $(DDP_CFLAGS) -I$(CJSON_SRC) \
	  $$$$($(call dist_pkg,$(1)) --cflags ncursesw libssh openblas) -c $$< -o $$@
$(DIST_DIR)/$(1)/ddptop: $(patsubst %.c,$(DIST_DIR)/$(1)/obj/%.o,$(DIST_SRC)) $(BUILD)/nodes/$(1)/obj/cJSON.o
	LIBRARY_PATH= $(call arch_cc,$(1)) $(call sysroot_ldflags,$(1)) $(LDFLAGS) -o $$@ $$^ \
	  $(call sysroot_of,$(1))/usr/lib/$(1)-linux-gnu/libncursesw.a $(call sysroot_of,$(1))/usr/lib/$(1)-linux-gnu/libtinfo.a \
	  -lssh -lanl -ldl -lpthread -lm -Wl,--disable-new-dtags,-rpath,'$$$$ORIGIN/../lib/ddptop'
$(DIST_DIR)/$(1)/ddptop-train: $(patsubst %.c,$(DIST_DIR)/$(1)/obj/%.o,$(DIST_RT_SRC))
	LIBRARY_PATH= $(call arch_cc,$(1)) $(call sysroot_ldflags,$(1)) $(LDFLAGS) -o $$@ $$^ \
	  $(call sysroot_of,$(1))/usr/lib/$(1)-linux-gnu/openblas-pthread/libopenblas.a -ldl -lpthread -lm
$(DIST_DIR)/ddptop-$(VERSION)-linux-$(1).tar.gz: $(DIST_DIR)/$(1)/ddptop $(DIST_DIR)/$(1)/ddptop-train $(NODE_AGENTS) \
    launcher/dist/dist.sh docs/ddptop.1 tui/cmd/completion.bash $(wildcard themes/*.theme)
	launcher/dist/dist.sh $(1) $(VERSION) $(DIST_DIR) $(call sysroot_of,$(1)) $(BUILD) $$@
endef
$(foreach a,$(DIST_ARCHES),$(eval $(call dist_build,$(a))))
DIST_TARBALLS = $(DIST_ARCHES:%=$(DIST_DIR)/ddptop-$(VERSION)-linux-%.tar.gz)
.PHONY: dist
dist: $(DIST_TARBALLS)
	@for t in $(DIST_TARBALLS); do echo "dist: $$t ($$(du -h $$t | cut -f1))"; done

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj $(BUILD)/nodes $(DIST_DIR) $(FAKE)/obj $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
