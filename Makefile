# llmtracker build. `make` builds everything under build/; `make test` runs
# every test and ends with "N passed, N failed"; `make asan` does both with
# AddressSanitizer + UBSan in build-asan/; `make bench` prints benchmarks;
# `make fuzz` runs the fuzzers longer; `make static` builds a statically
# linked collector for machines without the shared libraries.
#
# Sources are found by wildcard: a new .c file in a module folder is built
# into that module without editing this file.

BUILD     ?= build
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
PROTOC_C  ?= protoc-c
CUDA_HOME ?= /usr/local/cuda
PREFIX    ?= /usr/local

ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
WARN      := -Wall -Wextra -Werror
OPT       ?= -O2 -g
SAN       ?=
CFLAGS    ?=
CFLAGS    += $(OPT) $(WARN) $(SAN) -std=gnu11 -D_GNU_SOURCE -fno-omit-frame-pointer \
	     -I. -I$(BUILD) -I$(BUILD)/gen
LDFLAGS   += $(SAN)
# GCC on x86-64 turns small fixed-size memsets and copies (an event or an
# item, ~100-200 bytes, cleared or copied once per event) into `rep stos` /
# `rep movs`, whose start-up cost was ~9% of the converter's time: vector
# stores up to 512 bytes instead, libc's memset/memcpy beyond.
STRINGOP  := vector_loop:512:noalign,libcall:-1:noalign
ifeq ($(ARCH),x86)
CFLAGS    += $(shell $(CC) -mmemset-strategy=$(STRINGOP) -E -x c /dev/null >/dev/null 2>&1 && \
		echo -mmemset-strategy=$(STRINGOP) -mmemcpy-strategy=$(STRINGOP))
endif

# Shared libraries each binary links.
LIBS_EVLOG     := -lzstd -ldeflate -lnettle
LIBS_COLLECTOR := -lbpf -lelf -ldw -lz -ljson-c -lpthread $(LIBS_EVLOG)
LIBS_CONVERTER := -lprotobuf-c -larchive -ljson-c -lz -lisal -lm -lstdc++ $(LIBS_EVLOG)

# ------------------------------------------------------------------ sources
EVLOG_SRC     := $(wildcard eventlog/*.c) $(wildcard common/*.c)
# The injected library takes the log writer only: it needs nothing but glibc.
INJECT_EVLOG_SRC := $(filter-out common/digest.c,$(EVLOG_SRC))
BPF_SRC       := $(wildcard bpf/*.bpf.c)
COLL_SRC      := $(wildcard collector/*/*.c)
INJECT_SRC    := $(wildcard inject/*.c)
CONV_SRC      := $(filter-out converter/main.c,$(wildcard converter/*.c converter/*/*.c)) $(wildcard tb_layout/*.c)
KUBECTL_SRC   := $(wildcard deploy/kubectl-prof/*.c)
PROTO         := $(wildcard schemas/*.proto)
UNIT_SRC      := $(wildcard tests/unit/test_*.c)
HELPER_SRC    := $(wildcard tests/progs/*.c)
FUZZ_SRC      := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRC     := $(wildcard tests/bench/bench_*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# The converter's per-event code, and the log reader it runs twice per
# event: -O3 was faster than -O2 on tests/bench/convert.sh (json.gz and
# --logdir alike; docs/MEASUREMENTS.md, converter throughput and memory).
# The collector and the injected library stay at -O2.
HOT_OPT   ?= -O3
HOT_SRC   := $(CONV_SRC) $(EVLOG_SRC) converter/main.c
$(call obj,$(HOT_SRC)): private CFLAGS += $(HOT_OPT)

PROTO_C   := $(patsubst schemas/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTO))
PROTO_H   := $(PROTO_C:.c=.h)
SKELS     := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.skel.h,$(BPF_SRC))
VMLINUX   := $(BUILD)/bpf/vmlinux.h
SYSCALLS  := $(BUILD)/gen/syscall_names.h

EVLOG_A   := $(BUILD)/lib/libeventlog.a
COLL_A    := $(BUILD)/lib/libcollector.a
CONV_A    := $(BUILD)/lib/libconverter.a

BIN_COLL  := $(BUILD)/bin/llmtracker
BIN_CONV  := $(BUILD)/bin/llmtracker-convert
BIN_KUBE  := $(BUILD)/bin/kubectl-prof
INJECT_SONAME := libllmtracker-inject.so
INJECT_SO := $(BUILD)/lib/$(INJECT_SONAME)
UNIT_BIN  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
HELPER_BIN:= $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(HELPER_SRC)) \
             $(patsubst tests/progs/%.cpp,$(BUILD)/tests/progs/%,$(wildcard tests/progs/*.cpp))
FUZZ_BIN  := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

PROBE_FILES := $(wildcard examples/probes*.json)
ALL := $(BIN_COLL) $(BIN_CONV) $(if $(KUBECTL_SRC),$(BIN_KUBE)) $(if $(INJECT_SRC),$(INJECT_SO)) \
       $(patsubst examples/%,$(BUILD)/share/llmtracker/%,$(PROBE_FILES))

.PHONY: all deps demo test asan bench fuzz static install man clean tests-bin release FORCE
all: $(ALL)

deps:
	@./scripts/install-deps.sh

# ------------------------------------------------------------ generated code
$(VMLINUX):
	@mkdir -p $(@D)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

# -idirafter .: root-relative includes from outside bpf/ (eventlog/evlog_sources.h),
# looked for after every other directory.
$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(VMLINUX) $(wildcard bpf/*.h) eventlog/evlog_sources.h
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) $(WARN) -Wno-unused-function \
		-I$(BUILD)/bpf -Ibpf -idirafter /usr/include/$(shell $(CC) -dumpmachine) -idirafter . \
		-c $< -o $@
	llvm-strip -g $@ 2>/dev/null || true

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: schemas/%.proto
	@mkdir -p $(@D)
	$(PROTOC_C) --proto_path=schemas --c_out=$(BUILD)/gen $<

$(SYSCALLS): scripts/gen-syscall-names.sh
	@mkdir -p $(@D)
	./scripts/gen-syscall-names.sh $(CC) > $@.tmp && mv $@.tmp $@

# The version every binary's --version prints: VERSION, and the commit where
# the tree is a git checkout. Rewritten only when it changes, so only the
# files that include it are rebuilt.
VERSION_H := $(BUILD)/gen/lt_version.h
$(VERSION_H): FORCE
	@mkdir -p $(@D)
	@v="$$(cat VERSION)"; g="$$(git describe --always --dirty 2>/dev/null)"; \
	printf '#define LT_VERSION "%s%s"\n' "$$v" "$${g:+ ($$g)}" > $@.tmp; \
	cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

GENERATED := $(SKELS) $(PROTO_H) $(SYSCALLS) $(VERSION_H)
# Keep generated headers (make would delete them as intermediates).
.SECONDARY: $(GENERATED) $(PROTO_C) $(BPF_SRC:bpf/%.bpf.c=$(BUILD)/bpf/%.bpf.o)

# ------------------------------------------------------------------ objects
$(BUILD)/obj/%.o: %.c | $(GENERATED)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

# The inject library and its copy of the event log are position independent.
# It links no zstd: libzstd.a is not PIC (inject/zstd_shim.c). It is
# never sanitized: it is loaded into programs that carry no sanitizer runtime.
$(BUILD)/pic/%.o: %.c | $(GENERATED)
	@mkdir -p $(@D)
	$(CC) $(filter-out -fsanitize% -fno-sanitize%,$(CFLAGS)) -fPIC -fvisibility=hidden -DLT_NO_DIGEST \
		-I$(CUDA_HOME)/include -MMD -MP -c $< -o $@

$(EVLOG_A): $(call obj,$(EVLOG_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(COLL_A): $(call obj,$(COLL_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(CONV_A): $(call obj,$(CONV_SRC)) $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_C))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# Profile-guided optimization of HOT_SRC (PGO=1; `make release` builds
# that way): a converter instrumented for profiling ($(BUILD)/pgo/) turns
# generated mixed logs into every output (scripts/pgo-train.sh), and its
# branch and call counts guide the compilation of the real objects: more
# events/s on tests/bench/convert.sh, outputs byte for byte the same
# (docs/MEASUREMENTS.md, converter throughput and memory). Any change to a hot source retrains, so the default build (PGO=0)
# compiles them from the sources alone, fast to iterate on. GCC only (whose
# profile options these are); never under sanitizers.
IS_GCC    := $(shell $(CC) -v 2>&1 | grep -q '^gcc version' && echo 1)
PGO       ?= 0
override PGO := $(if $(SAN),0,$(if $(IS_GCC),$(PGO),0))
ifeq ($(PGO),1)
PGO_DIR   := $(BUILD)/pgo
PGO_OBJ   := $(patsubst %.c,$(PGO_DIR)/obj/%.o,$(HOT_SRC))
PGO_STAMP := $(PGO_DIR)/profile.stamp
PGO_GEN   := -fprofile-generate -fprofile-update=single

$(PGO_DIR)/obj/%.o: %.c | $(GENERATED)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(HOT_OPT) $(PGO_GEN) -MMD -MP -c $< -o $@

$(PGO_DIR)/llmtracker-convert: $(PGO_OBJ) $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_C))
	$(CC) $(LDFLAGS) $(PGO_GEN) -o $@ $^ $(LIBS_CONVERTER)

# Counts of an earlier training are removed first. The real object is
# compiled with the instrumented one's dump name: GCC finds the profile by
# it (its .gcda) and keys static functions' counts by it too.
$(PGO_STAMP): $(PGO_DIR)/llmtracker-convert $(BUILD)/tests/progs/conv_genlog scripts/pgo-train.sh
	find $(PGO_DIR)/obj -name '*.gcda' -delete
	./scripts/pgo-train.sh $(PGO_DIR)/llmtracker-convert $(BUILD)/tests/progs/conv_genlog $(PGO_DIR)/train
	touch $@

$(call obj,$(HOT_SRC)): $(PGO_STAMP)
$(call obj,$(HOT_SRC)): private CFLAGS += -fprofile-use -fprofile-partial-training -Wno-missing-profile \
	-dumpbase $(basename $(notdir $@)) -dumpdir $(patsubst $(BUILD)/obj/%,$(PGO_DIR)/obj/%,$(dir $@))
endif

# ------------------------------------------------------------------ binaries
$(BIN_COLL): $(call obj,collector/main.c) $(COLL_A) $(EVLOG_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_COLLECTOR)

$(BIN_CONV): $(call obj,converter/main.c) $(CONV_A) $(EVLOG_A)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS_CONVERTER)

$(BIN_KUBE): $(call obj,$(KUBECTL_SRC))
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ -ljson-c

$(INJECT_SO): $(patsubst %.c,$(BUILD)/pic/%.o,$(INJECT_SRC) $(INJECT_EVLOG_SRC))
	@mkdir -p $(@D)
	$(CC) $(filter-out -fsanitize% -fno-sanitize%,$(LDFLAGS)) -shared -Wl,--no-undefined \
		-Wl,--exclude-libs,ALL -Wl,-soname,$(INJECT_SONAME) -o $@ $^ \
		-Wl,-Bstatic -ldeflate -Wl,-Bdynamic -ldl -lpthread

$(BUILD)/share/llmtracker/%.json: examples/%.json
	@mkdir -p $(@D)
	cp $< $@

# Statically linked collector, for hosts without these shared libraries.
static: $(BUILD)/bin/llmtracker-static
$(BUILD)/bin/llmtracker-static: $(call obj,collector/main.c) $(COLL_A) $(EVLOG_A)
	@mkdir -p $(@D)
	$(CC) -static $(LDFLAGS) -o $@ $^ -lbpf -ldw -lelf -lz -ljson-c -lzstd -ldeflate -lnettle -llzma -lbz2 \
		-Wl,-u,__cxa_demangle -lstdc++ -lm -lpthread

# -------------------------------------------------------------------- tests
TEST_LIBS := $(COLL_A) $(CONV_A) $(EVLOG_A)
# Headers test sources include directly (tests/progs/evlog_gen.h...) and the
# event log headers the programs compile against: a change rebuilds them.
TEST_HDRS := $(wildcard tests/progs/*.h tests/unit/*.h eventlog/*.h common/*.h)
$(BUILD)/tests/%: tests/unit/%.c $(TEST_LIBS) $(TEST_HDRS) | $(GENERATED)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(TEST_LIBS) -lcmocka $(LIBS_COLLECTOR) $(LIBS_CONVERTER)

# Test programs (targets of profiling): plain, no sanitizers, symbols kept.
# A program that needs more libraries sets PROG_LIBS_<name> (below).
$(BUILD)/tests/progs/%: tests/progs/%.c $(EVLOG_SRC) $(TEST_HDRS) | $(GENERATED)
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -fno-inline $(WARN) -D_GNU_SOURCE -I. -I$(BUILD)/gen \
		-I$(CUDA_HOME)/include -o $@ $< $(PROG_LIBS_$*) -lpthread

# C++ test programs are built as distributions build theirs: optimized,
# without frame pointers (what CFI unwinding is tested on).
$(BUILD)/tests/progs/%: tests/progs/%.cpp
	@mkdir -p $(@D)
	$(CXX) -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror -o $@ $<

# Per-program libraries for tests/progs (PROG_LIBS_<name> := ...).
# Sources, not the archive: under `make asan` the archive is instrumented and
# these plain programs could not link it.
PROG_EVLOG := $(EVLOG_SRC) $(LIBS_EVLOG)
PROG_LIBS_evlog_dump := $(PROG_EVLOG)
PROG_LIBS_evlog_crashwriter := $(PROG_EVLOG)
PROG_LIBS_evlog_cli := $(PROG_EVLOG)
PROG_LIBS_xplane_genlog := $(PROG_EVLOG)
PROG_LIBS_conv_genlog := $(PROG_EVLOG)
PROG_LIBS_lp_order_genlog := $(PROG_EVLOG)
PROG_LIBS_gpu_steps_genlog := $(PROG_EVLOG)
PROG_LIBS_cuda_calls := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl
PROG_LIBS_cuda_early := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
PROG_LIBS_cuda_early_dl := -ldl
PROG_LIBS_inject_cudart := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
INJECT_TOOL_SRC := collector/injection/injector.c collector/injection/inject_latch.c collector/injection/cgroup_join.c collector/target/elfsym.c collector/injection/inject_mgr.c collector/injection/inject_exec.c collector/session/launch.c collector/session/runas.c collector/injection/inject_ctl.c collector/injection/inject_log.c collector/injection/inject_pub.c collector/session/store.c collector/injection/inject_gate.c collector/target/tfile.c collector/session/nodename.c
PROG_LIBS_inject_tool := $(INJECT_TOOL_SRC) $(EVLOG_SRC) -lelf $(LIBS_EVLOG)
PROG_LIBS_inject_logdump := -static $(PROG_EVLOG)
PROG_LIBS_inject_rawzstd := -lzstd -ldl
$(BUILD)/tests/progs/inject_rawzstd: inject/zstd_shim.c
$(BUILD)/tests/progs/inject_tool: $(INJECT_TOOL_SRC) $(INJECT_TOOL_SRC:.c=.h) $(EVLOG_SRC)
# The same tool linked static, for the GPU host's newer C library
# (tests/gpu/cupti_attach.sh prepare).
$(BUILD)/tests/progs/inject_tool-static: tests/progs/inject_tool.c $(INJECT_TOOL_SRC) $(EVLOG_SRC)
	@mkdir -p $(@D)
	$(CC) -O2 -static -D_GNU_SOURCE -I. -I$(BUILD)/gen -o $@ $(filter %.c,$^) -lelf -lz -lzstd -ldeflate -lnettle
PROG_LIBS_cuda_logcount := -static $(PROG_EVLOG)
PROG_LIBS_pys_folded := -static $(PROG_EVLOG)
# A stand-in libcupti.so.13 (shared object) and the app that loads it.
PROG_LIBS_fake_cupti := -shared -fPIC -Wl,-soname,libcupti.so.13
PROG_LIBS_fake_cuda_app := -ldl
PROG_LIBS_fake_cuda_launch := -ldl
PROG_LIBS_launch_app := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl -lpthread
PROG_LIBS_hostile_target := -ldl

$(BUILD)/fuzz/%: tests/fuzz/%.c $(EVLOG_SRC) $(CONV_SRC) $(PROTO_C) | $(GENERATED)
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=gnu11 -D_GNU_SOURCE -I. -I$(BUILD) -I$(BUILD)/gen \
		-o $@ $< $(or $(FUZZ_SRC_$*),$(EVLOG_SRC) $(CONV_SRC) $(PROTO_C)) $(LIBS_CONVERTER)
# A fuzzer that needs fewer sources sets FUZZ_SRC_<name>.
FUZZ_SRC_fuzz_evlog_reader := $(EVLOG_SRC)

$(BUILD)/bench/%: tests/bench/%.c $(TEST_LIBS) $(TEST_HDRS) | $(GENERATED)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(TEST_LIBS) $(LIBS_COLLECTOR) $(LIBS_CONVERTER)

tests-bin: $(ALL) $(UNIT_BIN) $(HELPER_BIN) $(FUZZ_BIN)

demo:
	@./examples/demo.sh

JOBS ?= $(shell nproc)
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) tests-bin
	@BUILD=$(BUILD) ./tests/run.sh

asan: deps
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" tests-bin
	@BUILD=build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 ./tests/run.sh

# The release build: profile-guided (see PGO above), in build-release/.
release: deps
	@$(MAKE) --no-print-directory BUILD=build-release PGO=1 all

# Benchmarks run the default build; the converter's figures also show the
# release build's gain beside it.
bench: deps
	@$(MAKE) --no-print-directory $(ALL) $(BENCH_BIN) $(HELPER_BIN)
	@$(if $(IS_GCC),$(MAKE) --no-print-directory BUILD=build-release PGO=1 \
		build-release/bin/llmtracker-convert >/dev/null)
	@BUILD=$(BUILD) ./tests/bench/run.sh

FUZZ_SECONDS ?= 120
fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
	@for f in $(FUZZ_BIN); do echo "== $$f ($(FUZZ_SECONDS)s)"; \
		mkdir -p $(BUILD)/fuzz/corpus-$$(basename $$f); \
		$$f -max_total_time=$(FUZZ_SECONDS) $(BUILD)/fuzz/corpus-$$(basename $$f) tests/fuzz/seeds/$$(basename $$f) || exit 1; done

# Man pages from each binary's own --help and --version (help2man): one
# source for both.
MAN_PAGES := $(BUILD)/man/llmtracker.1 $(BUILD)/man/llmtracker-convert.1 \
	     $(if $(KUBECTL_SRC),$(BUILD)/man/kubectl-prof.1)
MAN_NAME_llmtracker := profile GPU training and inference jobs without touching their code
MAN_NAME_llmtracker-convert := turn llmtracker event logs into TensorBoard runs and traces
MAN_NAME_kubectl-prof := run the llmtracker collector next to a Kubernetes pod
$(BUILD)/man/%.1: $(BUILD)/bin/%
	@mkdir -p $(@D)
	help2man -N --name "$(MAN_NAME_$*)" --version-string="$$($< --version)" -o $@.tmp $< && mv $@.tmp $@
man: $(MAN_PAGES)

install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/share/llmtracker \
		$(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 755 $(BIN_COLL) $(BIN_CONV) $(DESTDIR)$(PREFIX)/bin/
	$(if $(KUBECTL_SRC),install -m 755 $(BIN_KUBE) $(DESTDIR)$(PREFIX)/bin/)
	$(if $(INJECT_SRC),install -m 644 $(INJECT_SO) $(DESTDIR)$(PREFIX)/lib/)
	install -m 644 $(PROBE_FILES) $(DESTDIR)$(PREFIX)/share/llmtracker/

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj $(BUILD)/pic $(BUILD)/pgo -name '*.d' 2>/dev/null)
