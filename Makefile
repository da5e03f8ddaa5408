# fusefs - see README.md
PREFIX  ?= /usr/local
DESTDIR ?=
SBINDIR ?= $(PREFIX)/sbin
BUILD   ?= build

PKGS    = fuse3 libxxhash libcurl libxml-2.0 inih libmicrohttpd zlib libzstd liburing
# CFLAGS, LDFLAGS and LDLIBS are the user's: they add to what the build
# needs (ALL_*), never replace it, so `make CFLAGS=-O0` still builds.
# WERROR=1 turns warnings into errors (scripts/test.sh and the suite's
# targets do; a user's build does not).
OPT     = -O2
CFLAGS  ?= $(OPT) -g
WERROR  ?= $(if $(filter test check tsan fuzz fuzz-smoke,$(MAKECMDGOALS)),1,0)
export WERROR
WARN    = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
          -Wformat=2 -Wvla -Wno-unused-parameter $(if $(filter 1,$(WERROR)),-Werror)
SAN_FLAGS =
ifeq ($(SAN),1)
SAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer
OPT     = -O1
BUILD   := build-san
endif
# ThreadSanitizer (tests/stress/README.md): the daemon and the unit tests in build-tsan/
ifeq ($(TSAN),1)
SAN_FLAGS = -fsanitize=thread -fno-omit-frame-pointer
OPT     = -O1
BUILD   := build-tsan
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
ALL_CFLAGS  = -std=gnu11 -D_GNU_SOURCE -pthread $(WARN) -Iinclude \
              $(PKG_CFLAGS) $(SAN_FLAGS) $(CFLAGS) $(EXTRA_CFLAGS)
ALL_LDFLAGS = $(SAN_FLAGS) $(LDFLAGS)
ALL_LDLIBS  = $(PKG_LIBS) -llmdb -lrados -lm -pthread $(LDLIBS)

# modules without a foreign library beyond libc/xxhash/lmdb: unit-testable
CORE    = log safeopen strsafe ranges bgthread testhook openbound conf hash htab pathmap ns ns_build recfmt meta stats heatheap useheap policy \
          chunkbuf memchunk stageset membudget linkrate cache cache_pages cache_verify cache_load cache_stop cache_spare cache_move fetch \
          s3sign s3list s3walk lists lists_parse lists_future lists_text lists_window epochs backend_file manifest mountinfo
SRCS    = $(CORE) creds backend backend_rados backend_s3 nsmgr report prefetch ctl \
          fs fs_ctl fs_xattr bdi passthrough verifier \
          cfgfile notify metrics metrics_page manifest_src mountsafe
OBJS    = $(SRCS:%=$(BUILD)/src/%.o)
# every module but the entry point, in one archive: the unit tests link
# it, and the linker takes from it only the objects a test needs, so a
# test that defines a function itself (a fake) keeps its own
LIB     = $(BUILD)/libfusefs.a
UNIT    = $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
BIN     = $(BUILD)/bin/fusefs
# a benchmark probe, not part of fusefs: bench/fuse_transport.c
TRANSPORT = $(BUILD)/bin/fuse_transport

all: $(BIN) $(TRANSPORT)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIB): $(OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(BIN): $(BUILD)/fusefs/main.o $(BUILD)/fusefs/client.o $(BUILD)/fusefs/manifest_cmd.o $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ALL_LDLIBS)


$(TRANSPORT): $(BUILD)/bench/fuse_transport.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ -luring -pthread $(LDLIBS)

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(BUILD)/tests/unit/backend_mem.o \
		$(BUILD)/tests/unit/sigv4_ref.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ALL_LDLIBS) -lcrypto

# one target per test, so that `make -j2 unit` runs two at a time (exit 77:
# the test printed why it skipped)
# UNIT_SKIP: tests not run (scripts/test.sh skips the policy simulation
# under the sanitizers: it ran on the plain build just before).
# UNIT_NOFORK=1: each binary's tests in one process, not a forked child
# each (tests/unit/runner.h), but for UNIT_NEED_FORK, whose tests change
# process state (the chunk buffer pool, prctl); scripts/test.sh sets it
# under the sanitizers, where LeakSanitizer's check at every exit costs
# about 0.4 s here: once per binary instead of once per test.
UNIT_SKIP ?=
UNIT_NOFORK ?=
UNIT_NEED_FORK = test_chunkbuf test_creds
UNIT_RUNS = $(patsubst %,unit-run-%,$(filter-out $(UNIT_SKIP),$(UNIT)))
unit: $(UNIT_RUNS)
$(UNIT_RUNS): unit-run-%: $(BUILD)/tests/unit/%
	@UNIT_NOFORK="$(if $(filter $*,$(UNIT_NEED_FORK)),,$(UNIT_NOFORK))" \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" $<; \
	rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]

# no Ceph needed: unit tests, then the FUSE tests over file:// sources
test: all unit
	tests/run-fuse.sh $(BIN)

# ThreadSanitizer (tests/stress/README.md): on build-tsan/, the unit tests
# that start threads, then the concurrency stress test over a file://
# mount for STRESS_SECONDS; scripts/test.sh runs `make tsan`
TSAN_UNIT      ?= test_bgthread test_cache test_ctl test_fetch test_pages test_prefetch test_s3walk
STRESS_SECONDS ?= 30
TSAN_ENV        = TSAN_OPTIONS="halt_on_error=1 exitcode=66 $$TSAN_OPTIONS"
tsan:
	$(MAKE) --no-print-directory TSAN=1 all $(TSAN_UNIT:%=build-tsan/tests/unit/%)
	$(MAKE) --no-print-directory TSAN=1 tsan-unit
	$(MAKE) --no-print-directory TSAN=1 stress

# one target per test: `make -j2 tsan` runs two at a time
TSAN_RUNS = $(TSAN_UNIT:%=tsan-run-%)
tsan-unit: $(TSAN_RUNS)
$(TSAN_RUNS): tsan-run-%: $(BUILD)/tests/unit/%
	@$(TSAN_ENV) $<

# the stress test on whichever build (TSAN=1, SAN=1 or plain); any sanitizer
# report, wrong byte or non-zero daemon exit fails it.  Two phases on one
# cache: the default options, then the daemon read path with splice replies
stress: all
	/usr/bin/python3 tests/stress/stress.py --bin $(BIN) --seconds $(STRESS_SECONDS) \
		--daemon-args "" --daemon-args "--passthrough off --read-mode splice"

# the whole suite: also the integration tests on a throwaway Ceph cluster
check: test
	tests/run-integration.sh $(BIN)

bench: all
	bench/run.sh $(BIN)
	$(MAKE) --no-print-directory bench-s3 bench-epoch bench-churn bench-local bench-loader bench-memory bench-transport

# S3 backend vs curl/s3cmd and local disk (docs/benchmarks-s3.md), ~1.5 min
bench-s3: all
	/usr/bin/python3 bench/s3.py --bin $(BIN)

# epochs through a tbf-limited link, fusefs vs s3fs and rclone (docs/benchmarks-epoch.md),
# ~15 min; needs root, netns, loop devices
bench-epoch: all
	/usr/bin/python3 bench/epoch.py --bin $(BIN) --out /tmp/fusefs-bench-epoch.json
	/usr/bin/python3 bench/plot.py /tmp/fusefs-bench-epoch.json /tmp/fusefs-bench-epoch.png
.PHONY: bench-s3 bench-epoch

# daemon CPU per file while list mode turns the cache over, file:// source, lists vs heat,
# A/B with BENCH_CHURN_ARGS="--base-bin B" (docs/benchmarks-epoch.md), ~4 min
bench-churn: all
	/usr/bin/python3 bench/churn.py --bin $(BIN) $(BENCH_CHURN_ARGS)
.PHONY: bench-churn

# open latency and backend re-checks per open, --revalidate 1 vs 3600 vs 0 on an epoch of
# 2000 small S3 objects (docs/benchmarks-open.md), ~6 min; needs root.  Compare with another
# build: make bench-open BENCH_OPEN_ARGS="--baseline /path/to/fusefs"
bench-open: all
	/usr/bin/python3 bench/open.py --bin $(BIN) $(BENCH_OPEN_ARGS)
.PHONY: bench-open

# listing throughput of a real pool and bucket of 100,000 objects (docs/benchmarks-scale.md),
# ~6 min; needs root.  A/B: make bench-listing BENCH_LISTING_ARGS="--base-bin B --reps 4"
bench-listing: all
	/usr/bin/python3 bench/listing.py --bin $(BIN) $(BENCH_LISTING_ARGS)
# namespace scale from synthetic manifests (docs/benchmarks-scale.md): 10 million files
# by default, ~5 min and ~5 GiB of RAM; BENCH_SCALE_ARGS="--files 1000000 --dirs 10000"
bench-scale: all
	/usr/bin/python3 bench/scale.py --bin $(BIN) $(BENCH_SCALE_ARGS)
.PHONY: bench-listing bench-scale

# libFuzzer targets (tests/fuzz/README.md): clang with ASan+UBSan, each
# target linked from its harness and the fuzz build's archive of the
# modules the targets exercise (the linker takes only what a target needs)
FUZZ_CC      ?= clang-14
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 120
FUZZ_SMOKE_SECONDS ?= 12
FUZZ_TARGETS ?= lists s3list pathmap recfmt cfgfile creds s3sign manifest nsimage
FUZZ_SAN     = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  = -std=gnu11 -D_GNU_SOURCE -pthread -O1 -g -fno-omit-frame-pointer \
               $(WARN) -Iinclude $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
               $(shell pkg-config --cflags libxml-2.0 inih libxxhash)
FUZZ_CORE    = ranges lists lists_parse lists_future lists_text lists_window htab pathmap s3list hash recfmt cfgfile conf log safeopen \
               bgthread creds s3sign manifest ns
FUZZ_LIB     = $(FUZZ_BUILD)/libfusefs.a
FUZZ_LIBS    = $(shell pkg-config --libs libxml-2.0 libxxhash inih) -lz -lzstd
FUZZ_BINS    = $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_CORE:%=$(FUZZ_BUILD)/src/%.o)
	rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $@ $^ $(FUZZ_LIBS)

fuzz-build: $(FUZZ_BINS)

# FUZZ_SECONDS per target; the corpus grows in $(FUZZ_BUILD)/corpus/, never in git
fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# the committed crashes/ reproducers, then FUZZ_SMOKE_SECONDS per target
# on a throwaway copy of the corpus (scripts/test.sh runs this); one target
# per fuzzer: `make -j2 fuzz-smoke` runs two at a time
FUZZ_SMOKES = $(FUZZ_TARGETS:%=fuzz-smoke-%)
fuzz-smoke: $(FUZZ_SMOKES)
$(FUZZ_SMOKES): fuzz-smoke-%: fuzz-build
	@tests/fuzz/run.sh --smoke $(FUZZ_BUILD) $(FUZZ_SMOKE_SECONDS) $*

# cached epochs against local disk over a file:// source, no Ceph: passthrough auto / off /
# non-root daemon, page cache dropped (echo 3, echo 1) or not, A/B pairs, first epoch after a
# remount, daemon CPU and RSS, FUSE requests per file (docs/benchmarks-local.md), ~15 min;
# needs root
bench-local: all
	/usr/bin/python3 bench/local.py --bin $(BIN) $(BENCH_LOCAL_ARGS)
.PHONY: bench-local

# a torch DataLoader (2 and 4 workers, PIL decode) over 10,000 JPEGs of ~100 KiB: local
# disk against a warm fusefs cache, with and without the Python helper's lists
# (docs/benchmarks-local.md), ~10 min; needs root
bench-loader: all
	/usr/bin/python3 bench/loader.py --bin $(BIN) $(BENCH_LOADER_ARGS)
.PHONY: bench-loader

# random reads inside big files (np.memmap samples, header-then-body records) and cold
# sequential reads, local disk vs fusefs over file:// (docs/benchmarks-random.md), ~10 min;
# needs root.  A/B: make bench-random BENCH_RANDOM_ARGS="--base-bin B"
bench-random: all
	/usr/bin/python3 bench/randread.py --bin $(BIN) $(BENCH_RANDOM_ARGS)
.PHONY: bench-random

# what one FUSE request costs: /dev/fuse read/writev (libfuse 3.14's transport, so
# fusefs') against FUSE over io_uring, on a tiny probe file system without fusefs
# (docs/benchmarks-local.md), ~1 min; needs root; sets the fuse module's enable_uring
# for the run and puts it back
bench-transport: all
	/usr/bin/python3 bench/transport.py --probe $(TRANSPORT) $(BENCH_TRANSPORT_ARGS)
.PHONY: bench-transport

# peak daemon RSS per configuration, dataset twice the cache, file:// and S3
# (docs/benchmarks-memory.md), ~6 min; needs root
bench-memory: all
	/usr/bin/python3 bench/memory.py --bin $(BIN) $(BENCH_MEMORY_ARGS)
.PHONY: bench-memory

# fault injection on a throwaway Ceph cluster (tests/integration/test_faults.py,
# docs/reliability.md): osd.0 and radosgw restarted mid-epoch, and FAULT_KILLS
# SIGKILLs of the daemon during prefetch and eviction storms, each followed by a
# remount (numbers in FAULT_REPORT), then INDEX_CORRUPTIONS seeded random
# corruptions of the index and the namespace image (tests/fuse/test_index.py)
# and LISTING_ROUNDS directory listings spanning a refresh
# (tests/fuse/test_listings.py), ~8 min; needs root
FAULT_KILLS  ?= 50
INDEX_CORRUPTIONS ?= 200
LISTING_ROUNDS ?= 1000
FAULT_REPORT ?= /tmp/fusefs-faults.json
faults: all
	FUSEFS_FAULT_KILLS=$(FAULT_KILLS) FUSEFS_FAULT_REPORT=$(FAULT_REPORT) \
	flock /tmp/fusefs-ceph.lock tests/run-integration.sh $(BIN) -k test_faults -s
	FUSEFS_INDEX_CORRUPTIONS=$(INDEX_CORRUPTIONS) FUSEFS_LISTING_ROUNDS=$(LISTING_ROUNDS) \
	tests/run-fuse.sh $(BIN) -k "test_random_corruptions_never_stop_the_mount or \
		test_listing_spanning_refresh_returns_unchanged_names_once"

# SOAK_MINUTES of mixed epochs on a file:// source, the daemon's RSS and open
# fds sampled: flat or not (tests/soak/soak.py, docs/reliability.md); needs root
SOAK_MINUTES ?= 20
soak: all
	/usr/bin/python3 tests/soak/soak.py --bin $(BIN) --minutes $(SOAK_MINUTES) \
		--out /tmp/fusefs-soak.json
.PHONY: faults soak

# the OCI image from this checkout with podman, no registry: Debian 12 bases
# made by mmdebstrap from the archive, then packaging/container/Dockerfile
# (scripts/image.sh, docs/kubernetes.md); IMAGE=TAG to name it
IMAGE           ?= localhost/fusefs:0.1.0
# podman's settings for a restricted host (what the CI machine needs)
CONTAINERS_CONF ?= $(CURDIR)/tests/containers/containers.conf
image:
	CONTAINERS_CONF=$(CONTAINERS_CONF) scripts/image.sh $(IMAGE)

# the container tests alone (tests/integration/test_containers.py): the image
# built once, the manifests played with podman on a throwaway Ceph cluster
containers-test: all
	CONTAINERS_CONF=$(CONTAINERS_CONF) flock /tmp/fusefs-ceph.lock \
		tests/run-integration.sh $(BIN) -k test_containers
.PHONY: image containers-test

install: all
	install -D -m 0755 $(BIN) $(DESTDIR)$(SBINDIR)/fusefs
	install -d $(DESTDIR)/sbin
	ln -sf $(SBINDIR)/fusefs $(DESTDIR)/sbin/mount.fuse.fusefs

clean:
	rm -rf build build-san build-tsan $(FUZZ_BUILD)

.PHONY: all unit $(UNIT_RUNS) $(TSAN_RUNS) $(FUZZ_SMOKES) check test bench install clean fuzz fuzz-build fuzz-smoke tsan tsan-unit stress
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
.SECONDARY:
