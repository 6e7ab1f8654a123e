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
  CUDA_LIBS  = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lnccl -lcudart -lstdc++
  RT_CFLAGS  = -DDDPTOP_HAVE_CUDA=1 -I$(CUDA_HOME)/include
endif

pkg_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pkg_libs   = $(shell pkg-config --libs $(1) 2>/dev/null)

# launcher/ is in rooms (docs/architecture.md), one archive each. ddptop links them in the
# order of their dependencies; ddptop-agent links only agent, wire and util, with cJSON and
# libc: no libssh, no curses.
ROOMS        = controller check ssh record job wire hosts util
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
LIBS_ALL = $(LIB_CMD) $(if $(TUI_OBJ),$(LIB_TUI)) $(foreach r,controller check ssh record job agent wire hosts util,$(call room_lib,$(r))) $(if $(RUNTIME_OBJ),$(LIB_RUNTIME))

PROGS = $(BUILD)/ddptop $(BUILD)/ddptop-agent $(BUILD)/ddptop-train

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
# The agent is uploaded to nodes that may lack libcjson: ddptop uploads its own copy of the
# library next to the agent, found there through RUNPATH $ORIGIN (docs/protocol.md).
$(BUILD)/ddptop-agent: $(BUILD)/obj/launcher/agent/agent_main.o $(LIBS_AGENT)
	$(CC) $(LDFLAGS) -Wl,-rpath,'$$ORIGIN' -o $@ $^ $(call pkg_libs,$(PKGS_AGENT)) $(LDLIBS_BASE)
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
             $(BUILD)/tests/test_gpu_fakecuda

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
# The fake objects come first, so the archive's own train_cuda.o and CUDA objects stay out.
$(FAKE)/ddptop-train: $(BUILD)/obj/runtime/train_main.o $(FAKE_OBJ) $(LIB_RUNTIME)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_RT)) $(LDLIBS_BASE)
$(FAKE)/bench_gpu: $(FAKE)/obj/bench_gpu.cu.o $(FAKE_OBJ) $(LIBS_ALL)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(LDLIBS_BASE)
$(BUILD)/tests/test_gpu_ops_fake: $(FAKE)/obj/test_gpu_ops.o $(FAKE_OBJ) $(LIBS_ALL)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) -o $@ $^ $(call pkg_libs,$(PKGS_TUI) $(PKGS_RT)) $(LDLIBS_BASE)
$(BUILD)/tests/test_gpu_fakecuda: $(FAKE)/obj/selftest.cu.o $(filter-out $(FAKE)/obj/train_cuda.o $(FAKE)/obj/%_cuda.cu.o $(FAKE)/obj/comm_nccl.cu.o,$(FAKE_OBJ))
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
           slurm-wlm munge clang libclang-rt-14-dev man-db
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
	  LDFLAGS='-fsanitize=address,undefined,float-cast-overflow' all

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
              $(MAN1DIR)/ddptop.1 $(COMPDIR)/ddptop $(THEMES:%=$(DATADIR)/themes/%)
.PHONY: install uninstall
install: $(PROGS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DATADIR)/themes \
	  $(DESTDIR)$(MAN1DIR) $(DESTDIR)$(COMPDIR)
	install -m 755 $(BUILD)/ddptop $(DESTDIR)$(BINDIR)/ddptop
	install -m 755 $(BUILD)/ddptop-agent $(BUILD)/ddptop-train $(DESTDIR)$(LIBEXECDIR)/
	install -m 644 docs/ddptop.1 $(DESTDIR)$(MAN1DIR)/ddptop.1
	install -m 644 tui/cmd/completion.bash $(DESTDIR)$(COMPDIR)/ddptop
	install -m 644 $(addprefix themes/,$(THEMES)) $(DESTDIR)$(DATADIR)/themes/
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(DATADIR)/themes $(DESTDIR)$(DATADIR) $(DESTDIR)$(LIBEXECDIR) 2>/dev/null

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj $(FAKE)/obj $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
