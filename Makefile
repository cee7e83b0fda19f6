# Hermes Sandbox. `make run` builds and runs the main job; `make test` runs every test.
GO ?= go
BIN := bin
LDFLAGS := -s -w
export CGO_ENABLED := 0

# SLIM_TAGS leaves out every backend but local (see backends/all); drop a tag to keep one.
SLIM_TAGS := no_docker,no_ssh,no_singularity,no_modal,no_daytona,no_vercel,no_kubernetes

# Where `make install` puts the CLI and its helpers (beside it, where the CLI looks for them).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin

.PHONY: build slim run install uninstall test test-fast vet bench clean dist cross

# Static binaries: the CLI (which can also serve as its own in-sandbox helper) and the small
# helper for both architectures, for remote hosts over SSH.
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/hermes-sandbox ./cmd/hermes-sandbox
	GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/sandbox-agent-linux-amd64 ./cmd/sandbox-agent
	GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/sandbox-agent-linux-arm64 ./cmd/sandbox-agent

# A slim CLI with only the backends SLIM_TAGS keeps; a left-out one says so when chosen.
slim:
	$(GO) build -trimpath -tags '$(SLIM_TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN)/hermes-sandbox-slim ./cmd/hermes-sandbox

# Puts hermes-sandbox on PATH: `make install` (as root) or `make install PREFIX=~/.local`.
install: build
	install -d '$(DESTDIR)$(BINDIR)'
	install -m 0755 $(BIN)/hermes-sandbox $(BIN)/sandbox-agent-linux-amd64 $(BIN)/sandbox-agent-linux-arm64 '$(DESTDIR)$(BINDIR)/'
	@echo 'installed $(DESTDIR)$(BINDIR)/hermes-sandbox (and its helpers beside it)'
	@case ':$(PATH):' in *':$(BINDIR):'*) ;; *) echo 'note: $(BINDIR) is not on your PATH; add it, e.g. export PATH="$(BINDIR):$$PATH"';; esac

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/hermes-sandbox' '$(DESTDIR)$(BINDIR)/sandbox-agent-linux-amd64' '$(DESTDIR)$(BINDIR)/sandbox-agent-linux-arm64'

# The main job: build, report what works on this machine, and run a first command.
run: build
	./scripts/demo.sh

# The full tier: everything the tests need (apt packages, an SSH server binary), then vet and
# the race tests, with the tests that need a Docker engine or the test kube-apiserver turned on
# (HERMES_SANDBOX_TEST_FULL=1; plain go test ./... skips them). testsummary prints go test's
# usual lines, then every skipped test with its reason and a closing "N passed, N failed,
# N skipped" line.
test:
	./scripts/test-deps.sh
	CGO_ENABLED=1 $(GO) vet ./...
	HERMES_SANDBOX_TEST_FULL=1 CGO_ENABLED=1 $(GO) run ./internal/tools/testsummary -race -timeout 40m ./...

# The contributor loop: no root, no docker, nothing installed; the same as go test ./..., with
# the skip summary. The docker and kube-apiserver tests skip and say so.
test-fast:
	$(GO) run ./internal/tools/testsummary ./...

bench: build
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench . -skip 'BenchmarkFirstResult/pool' -benchtime 200x ./backends/... ./policy/ ./audit/
	# kubernetes: each first result makes a pod (about 0.7 s), so fewer of them
	CGO_ENABLED=1 $(GO) test -run '^$$' -bench 'FirstResult/pool' -benchtime 5x ./backends/kubernetes/

clean:
	rm -rf $(BIN)

# Release artefacts: `make dist` (or `make dist DIST=DIR`) builds static CLIs for every
# platform we ship, the Linux helpers, and SHA256SUMS. Every CLI embeds both Linux helpers
# (build tag embedhelpers; package agentbin writes the one a sandbox needs into the user's cache
# directory the first time), so a macOS or Windows CLI starts sessions in Linux sandboxes
# (docker, ssh, kubernetes...) on its own; the helpers are also shipped beside it, and one
# found beside the CLI wins. `hermes-sandbox version` names the commit stamped here.
DIST ?= dist
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
DIST_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DIST_LDFLAGS := $(LDFLAGS) -X github.com/hermes-sandbox/hermes-sandbox/internal/cli.Commit=$(DIST_COMMIT)

dist:
	mkdir -p '$(DIST)' internal/agentbin/helpers
	set -e; for arch in amd64 arm64; do \
	  GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' -o '$(DIST)'/sandbox-agent-linux-$$arch ./cmd/sandbox-agent; \
	  cp '$(DIST)'/sandbox-agent-linux-$$arch internal/agentbin/helpers/; \
	done
	set -e; for p in $(DIST_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
	  echo "dist: hermes-sandbox-$$os-$$arch$$ext"; \
	  GOOS=$$os GOARCH=$$arch $(GO) build -tags embedhelpers -trimpath -ldflags '$(DIST_LDFLAGS)' -o '$(DIST)'/hermes-sandbox-$$os-$$arch$$ext ./cmd/hermes-sandbox; \
	done
	rm -rf internal/agentbin/helpers
	cd '$(DIST)' && sha256sum hermes-sandbox-* sandbox-agent-linux-* > SHA256SUMS
	@echo 'dist: $(DIST)/SHA256SUMS'

# Cross-platform checks: the code and its tests compile and vet for macOS and Windows (CI runs
# this before make test). Nothing is executed for them. CROSS_PLATFORMS=... to check others.
CROSS_PLATFORMS ?= darwin/amd64 darwin/arm64 windows/amd64

cross:
	set -e; for p in $(CROSS_PLATFORMS); do \
	  echo "cross: $$p"; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./...; \
	  GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./...; \
	done
