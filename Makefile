# opsq — the two commands a newcomer needs are "make run" and "make test".

GO        ?= go
BIN       := bin/opsq
DEV_DIR   ?= .data/pg
GOFILES    = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.data/*')

.PHONY: build run stop test test-citus test-race lint bench clean fuzz

## build: compile the opsq binary into bin/opsq
build:
	$(GO) build -o $(BIN) ./cmd/opsq

## run: serve on 127.0.0.1:3999 (OPSQ_LISTEN=:3999 opens it to the network), on
## OPSQ_DATABASE_URL if set, else on a local PostgreSQL under .data/, without API keys
## (OPSQ_AUTH=off) unless OPSQ_AUTH=required is set
run: build
	OPSQ_LISTEN=$${OPSQ_LISTEN:-127.0.0.1:3999} OPSQ_DEV_CLUSTER=$${OPSQ_DEV_CLUSTER:-$(DEV_DIR)} OPSQ_AUTH=$${OPSQ_AUTH:-off} ./$(BIN) serve

## stop: stop the development PostgreSQL of "make run" (it keeps running after opsq exits,
## so that the next "make run" starts at once); its data stay in .data/
stop:
	@d="$(abspath $(DEV_DIR))/data"; \
	if [ ! -f "$$d/postmaster.pid" ]; then echo "no development PostgreSQL runs in $(DEV_DIR)"; exit 0; fi; \
	ctl=$$(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V | tail -n 1); \
	if [ -z "$$ctl" ]; then echo "pg_ctl not found: install PostgreSQL's server binaries (Debian: postgresql)"; exit 1; fi; \
	if [ "$$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$$ctl stop -D '$$d' -m fast"; else "$$ctl" stop -D "$$d" -m fast; fi

## test: the whole suite against a real PostgreSQL (OPSQ_TEST_DATABASE_URL, else an
## ephemeral cluster from initdb/pg_ctl, else testcontainers-go)
test:
	$(GO) test -count=1 -timeout 30m ./...

## test-citus: the tests that run on Citus, a coordinator and 2 workers started for each
## package (OPSQ_TEST_CITUS=1): migration 00017's layout and the claims of instances homed
## on a worker (-tags citus), and the engine's,
## the cluster's and the API's tests listed in queuer/testdata/citus_tests.txt,
## cmd/opsq/testdata/citus_tests.txt and api/testdata/citus_tests.txt, lists that grow as
## the statements Citus cannot run as they are take their Citus form (docs/citus.md); and
## opsq bench's citus workload at a small size (-tags citus; it starts its own clusters,
## about 50 s). Needs Citus in the local PostgreSQL server: as root, ../shared/citus/build.sh
test-citus:
	OPSQ_TEST_CITUS=1 $(GO) test -count=1 -tags citus -timeout 10m ./migrations/
	OPSQ_TEST_CITUS=1 $(GO) test -count=1 -tags citus -timeout 10m -run '^TestHome' ./claims/
	OPSQ_TEST_CITUS=1 $(GO) test -count=1 -tags citus -timeout 15m -run '^($(shell paste -sd'|' queuer/testdata/citus_tests.txt))$$' ./queuer/
	OPSQ_TEST_CITUS=1 $(GO) test -count=1 -tags citus -timeout 15m -run '^($(shell paste -sd'|' cmd/opsq/testdata/citus_tests.txt))$$' ./cmd/opsq/
	OPSQ_TEST_CITUS=1 $(GO) test -count=1 -timeout 15m -run '^($(shell paste -sd'|' api/testdata/citus_tests.txt))$$' ./api/
	$(GO) test -count=1 -tags citus -timeout 5m -run '^TestCitusWorkload$$' ./cmd/opsq/bench/

## test-race: the suite under the race detector (slower)
test-race:
	$(GO) test -count=1 -race -timeout 60m ./...

## fuzz: run each fuzz target for FUZZTIME (default 1m); a crash it finds is written under
## the package's testdata/fuzz, where "make test" then runs it as a seed
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseText$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./strategy/
	$(GO) test -run '^$$' -fuzz '^FuzzParseJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./strategy/
	$(GO) test -run '^$$' -fuzz '^FuzzSubmissionJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzSubmissionNDJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzReserveBody$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzParseToken$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./queuer/internal/tokens/
	$(GO) test -run '^$$' -fuzz '^FuzzReservedJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzTokenResultsJSON$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzCompleteFast$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeContent$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./api/

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## clean: remove the binary (the development database in .data/ stays; rm -rf .data to drop it)
clean:
	rm -rf bin
