# opsq — the two commands a newcomer needs are "make run" and "make test".

GO        ?= go
BIN       := bin/opsq
DEV_DIR   ?= .data/pg
GOFILES    = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.data/*')

.PHONY: build run test test-race lint bench clean fuzz

## build: compile the opsq binary into bin/opsq
build:
	$(GO) build -o $(BIN) ./cmd/opsq

## run: serve on :3999, on OPSQ_DATABASE_URL if set, else on a local PostgreSQL under .data/,
## without API keys (OPSQ_AUTH=off) unless OPSQ_AUTH=required is set
run: build
	OPSQ_DEV_CLUSTER=$${OPSQ_DEV_CLUSTER:-$(DEV_DIR)} OPSQ_AUTH=$${OPSQ_AUTH:-off} ./$(BIN) serve

## test: the whole suite against a real PostgreSQL (OPSQ_TEST_DATABASE_URL, else an
## ephemeral cluster from initdb/pg_ctl, else testcontainers-go)
test:
	$(GO) test -count=1 -timeout 30m ./...

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
	$(GO) test -run '^$$' -fuzz '^FuzzParseToken$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./queuer/

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## clean: remove the binary (the development database in .data/ stays; rm -rf .data to drop it)
clean:
	rm -rf bin
