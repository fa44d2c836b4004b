# Eraser: the usual kubebuilder targets, plus the control plane that tests run
# against (built from the Go module proxy, cached by version; see
# hack/build-control-plane.sh).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# One build configuration for the tests, the tools run from this tree and
# the shipped binaries: static (no cgo), source paths trimmed, gRPC without
# tracing (GO_TAGS). The tests test what ships, and each package compiles
# once for all of them: the release the kubelet tier builds links what the
# tiers before it compiled. What the caller's GOFLAGS adds comes after.
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip -buildvcs=false -trimpath -tags=grpcnotrace $(filter-out -buildvcs=false -trimpath -tags=grpcnotrace,$(GOFLAGS)))
export GOTOOLCHAIN ?= local

BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
GO_PACKAGES := ./...
BINARIES := manager collector remover eraser kubectl-eraser

.PHONY: all
all: build

##@ Development

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	GOBIN=$(BIN) go -C hack/tools install sigs.k8s.io/controller-tools/cmd/controller-gen

# actionlint, pinned in hack/tools like controller-gen.
ACTIONLINT := $(BIN)/actionlint

$(ACTIONLINT): hack/tools/go.mod hack/tools/go.sum
	GOBIN=$(BIN) go -C hack/tools install github.com/rhysd/actionlint/cmd/actionlint

.PHONY: lint-workflows
lint-workflows: $(ACTIONLINT) ## Lint the GitHub Actions workflows in .github/workflows (run by verify).
	$(ACTIONLINT) -no-color

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (v1 stored, v1alpha1 served), RBAC, the chart's CRDs and deploy/eraser.yaml.
	rm -f config/crd/bases/*.yaml
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./hack/crdversions config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./internal/... output:rbac:artifacts:config=config/rbac
	rm -f charts/eraser/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/eraser/files/crds/
	cp config/rbac/role.yaml charts/eraser/files/role.yaml
	cp charts/eraser/values.yaml charts/eraser/files/values-defaults.yaml
	go run ./hack/configschema charts/eraser/values.schema.json
	go -C hack/render run ./cmd/kustomize $(CURDIR)/config/default > deploy/eraser.yaml.tmp
	mv deploy/eraser.yaml.tmp deploy/eraser.yaml

.PHONY: fmt
fmt:
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet:
	go vet $(GO_PACKAGES)
	$(SCANNER_ENV) go -C $(SCANNER_MODULE) vet -trimpath -tags=$(GO_TAGS) ./...

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Regenerate everything; fail if that changed anything, or on unformatted code or untidy modules.
	hack/verify.sh

.PHONY: verify-selftest
verify-selftest: $(CONTROLLER_GEN) ## Prove that verify catches a stale CRD.
	hack/verify-selftest.sh

##@ Build

# Release flags: static, stripped, and without gRPC's tracing (which pulls
# in html/template): the workers are smaller and use ~3 MiB less memory.
# GOFLAGS above carries the same tag for every other go command.
GO_TAGS := grpcnotrace
GO_LDFLAGS := -s -w
GO_BUILD_FLAGS := -trimpath -tags=$(GO_TAGS) -ldflags="$(GO_LDFLAGS)"

.PHONY: build
build: ## Build the binaries into bin/.
	CGO_ENABLED=0 go build $(GO_BUILD_FLAGS) -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

# The Trivy scanner is its own module (Trivy's dependencies never pin the
# operator's); Trivy needs encoding/json/v2, behind GOEXPERIMENT in Go 1.26.
SCANNER_MODULE := scanner/trivy
SCANNER_ENV := GOEXPERIMENT=jsonv2 CGO_ENABLED=0

.PHONY: build-scanner
build-scanner: ## Build the Trivy scanner into bin/ (cold: ~9 min, Trivy is large).
	$(SCANNER_ENV) go -C $(SCANNER_MODULE) build $(GO_BUILD_FLAGS) -o $(BIN)/ ./cmd/trivy-scanner

# Images: a subset with e.g. IMAGES="manager remover" PLATFORMS=linux/amd64.
# VERSION (the tag and the stamped version) defaults to internal/process/version.Version;
# SOURCE_DATE_EPOCH (default 0) is every timestamp in them.
# CA_CERTS: the CA bundle the Linux images carry (default: the build host's,
# found where Debian, Ubuntu, Alpine, Fedora, RHEL, openSUSE or macOS keep
# it; CA_CERTS=none for none).
IMAGES ?= manager collector remover trivy-scanner
PLATFORMS ?= linux/amd64 linux/arm64 windows/amd64
VERSION ?=
CA_CERTS ?=
# REGISTRY: the registry path the images are named under, and that the
# manager defaults its workers to (default: internal/process/version.DefaultRepo).
REGISTRY ?=
IMAGES_DIR := $(BIN)/images

.PHONY: images
images: ## Build the container images without a Docker engine: OCI layouts and docker-archive tarballs in bin/images/ (docs/images.md).
	go run ./hack/ocibuild -out $(IMAGES_DIR) -images "$(IMAGES)" -platforms "$(PLATFORMS)" -version "$(VERSION)" -registry "$(REGISTRY)" \
		-ca-certs "$(CA_CERTS)" -tags "$(GO_TAGS)" -ldflags "$(GO_LDFLAGS)"

##@ Release

# make release REGISTRY=ghcr.io/<owner>/eraser VERSION=1.2.3 (docs/release.md):
# every image with every platform, built for REGISTRY and VERSION, pushed as
# one multi-platform index each; the commands eraser (the node command) and
# kubectl-eraser (the kubectl plugin) for linux/amd64, linux/arm64 and
# windows/amd64, written with SHA256SUMS to
# bin/release/VERSION and pushed as the artifact REGISTRY/eraser-cli:VERSION;
# then the chart as oci://REGISTRY/charts/eraser.
# INSECURE=1: plain HTTP, only to a registry on this machine.
# COSIGN_KEY=cosign.key (its password in COSIGN_PASSWORD): every image, its
# platform images, the commands' artifact and the chart signed, and each
# image's SBOM and provenance attested, as cosign does with a key; required
# unless REGISTRY is on this machine. BUILDER_ID: the builder the
# provenance names (the workflow gives its run's URL). HELM_KEYRING and
# HELM_KEY (an OpenPGP secret keyring and the key's name; its passphrase in
# HELM_KEY_PASSPHRASE): the chart also gets Helm's provenance file.
COSIGN_KEY ?=
BUILDER_ID ?=
HELM_KEYRING ?=
HELM_KEY ?=
# PLATFORMS=linux/amd64 (given on the command line or in the environment):
# a partial release of those platforms only, for tests and local use (the
# kubelet tier releases linux/amd64 into a loopback registry); unset, every
# platform, as a release is.
RELEASE_TOOL := $(BIN)/eraser-release
RELEASE_PLATFORMS = $(if $(filter file,$(origin PLATFORMS)),,-platforms "$(PLATFORMS)")
RELEASE_FLAGS = -registry "$(REGISTRY)" -version "$(VERSION)" $(if $(filter 1 true yes,$(INSECURE)),-insecure) $(RELEASE_PLATFORMS) \
	$(if $(COSIGN_KEY),-cosign-key "$(COSIGN_KEY)") $(if $(BUILDER_ID),-builder-id "$(BUILDER_ID)") \
	$(if $(HELM_KEYRING),-helm-keyring "$(HELM_KEYRING)" -helm-key "$(HELM_KEY)")

.PHONY: release
release: ## Push the images, the eraser and kubectl-eraser commands (also in bin/release/VERSION) and the Helm chart to REGISTRY at VERSION (both required), e.g. REGISTRY=ghcr.io/<owner>/eraser VERSION=1.2.3.
	@if [ -z "$(REGISTRY)" ] || [ -z "$(VERSION)" ]; then \
		echo "release: REGISTRY and VERSION are required, e.g. make release REGISTRY=ghcr.io/<owner>/eraser VERSION=1.2.3" >&2; exit 1; fi
	go -C hack/render build -o $(RELEASE_TOOL) ./cmd/release
	$(RELEASE_TOOL) -check $(RELEASE_FLAGS)
	$(MAKE) --no-print-directory images IMAGES="manager collector remover trivy-scanner" \
		PLATFORMS="$(PLATFORMS)" VERSION="$(VERSION)" REGISTRY="$(REGISTRY)"
	$(RELEASE_TOOL) $(RELEASE_FLAGS) -images $(IMAGES_DIR) -chart $(CURDIR)/charts/eraser $(if $(KREW_URI_BASE),-krew-uri-base "$(KREW_URI_BASE)") \
		-cli-out $(BIN)/release/$(VERSION) -source $(CURDIR) -commit "$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
		-tags "$(GO_TAGS)" -ldflags "$(GO_LDFLAGS)"

##@ Test

.PHONY: control-plane
control-plane: ## Build kube-apiserver, kubectl and etcd once (cold ~11 min), cached under ~/.cache/eraser.
	hack/build-control-plane.sh >/dev/null

.PHONY: test-deps
test-deps: ## Install containerd and runc (Debian packages) if missing.
	hack/install-test-deps.sh

.PHONY: build-windows
build-windows: ## Check that the node workers build for Windows.
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go build -o /dev/null ./cmd/collector ./cmd/remover ./cmd/eraser ./examples/scanner
	GOOS=windows GOARCH=amd64 go vet ./internal/node/handoff ./internal/node/cri ./internal/node/remover ./internal/node/collector ./pkg/scanner \
		./internal/node/containerdrecords ./internal/node/criorecords ./internal/node/leftover ./internal/node/reclaim ./internal/node/footprint ./internal/cli/nodecmd ./internal/testing/piperelay

# The Windows tier: these packages' tests built for Windows and run under
# Wine (a CRI server on a named pipe, the remover against it, the portable
# hand-off tests, which skip AF_UNIX there). Packages whose tests clean up
# t.TempDir are left out: Wine 8 cannot remove a non-empty directory.
WINDOWS_TEST_PACKAGES := ./internal/node/cri ./internal/node/handoff ./internal/node/remover ./internal/wire/imageref ./internal/wire/endpoint \
	./internal/wire/podpaths ./internal/node/protect ./internal/wire/workerresult ./internal/node/nodestate ./internal/node/retention ./internal/node/diskusage ./internal/node/regret
# Then, from Linux, the Windows eraser command under Wine against a real
# containerd reached through a named pipe (test/windows): root, containerd.
WINDOWS_HOST_TEST_PACKAGES := ./test/windows

.PHONY: test-windows
test-windows: test-deps ## Run the Windows tier under Wine (installs Wine and builds its shim once).
	prefix="$$(hack/install-wine.sh)"; \
	WINEPREFIX="$$prefix" WINEDEBUG=-all GOOS=windows GOARCH=amd64 CGO_ENABLED=0 \
		go test -exec wine -count=1 $(GO_TEST_RUN) $(WINDOWS_TEST_PACKAGES); \
	WINEPREFIX="$$prefix" WINEDEBUG=-all go test -count=1 -timeout 10m $(GO_TEST_RUN) $(WINDOWS_HOST_TEST_PACKAGES)

# The kubelet tier: a local cluster of real kubelets (hack/kubecluster) whose
# nodes pull from a registry on loopback that the test serves; it runs
# make release REGISTRY=127.0.0.1:PORT/eraser VERSION=0.0.0-e2e INSECURE=1
# PLATFORMS=linux/amd64 into it, then installs Eraser from the chart there
# (oci://) and from deploy/eraser.yaml rendered for it. One node more runs
# its kubelet on CRI-O (hack/build-crio.sh, cached), for TestCRIONode.
# Root; it restores what it changes on the machine when it ends.
.PHONY: test-e2e-kubelet
test-e2e-kubelet: test-deps ## End to end on real kubelets, installed from a loopback registry (make release): ImageLists, "*" under the minimum age, scheduled runs (with the scanner; disk pressure and its dry run on a tmpfs image filesystem), chart and uninstall on a local 2-node cluster, and a node on CRI-O (ImageList, scheduled run with the scanner).
	KUBELET=1 EXTRA=1 hack/build-control-plane.sh >/dev/null
	CRIO_BIN_DIR="$$(hack/build-crio.sh)" HELM="$$(hack/build-helm.sh)" ERASER_E2E_KUBELET=1 go test -count=1 -timeout 45m -v $(GO_TEST_RUN) ./test/e2e/kubelet

# The tiers of make test, each a target of its own; RUN=<regexp> passes -run
# to every go test of a tier (RUN=TestPlan, RUN='TestEraser/ReportOutlivesThePods').
# docs/dev/testing.md says what each tier proves and how to run one test.
RUN ?=
GO_TEST_RUN = $(if $(RUN),-run '$(RUN)')

# The control-plane tier: the API, the manager's assembly and every
# reconciler against a real kube-apiserver and etcd.
CONTROL_PLANE_PACKAGES := ./api/... ./cmd/... ./internal/manager/... ./internal/testing/testenv
# The worker tier: the node workers and their test support against a real
# containerd (Debian's 1.6 here; 1.7 and 2.x in test-containerd-versions) and
# a real CRI-O.
RUNTIME_PACKAGES := ./test/e2e ./internal/node/... ./internal/cli/... \
	./internal/testing/noderuntime ./internal/testing/testcontainerd ./internal/testing/testcrio ./internal/testing/containerdconfig ./internal/testing/workertest \
	./hack/ocibuild ./hack/kubecluster

.PHONY: test
test: ## Every tier (checks, unit, control plane, fault, worker on every runtime, install, Windows, kubelet, race), with a table of each tier's time at the end.
	hack/test-tiers.sh checks unit control-plane fault runtimes install windows kubelet race

# The race detector needs cgo, so these packages build once more, apart
# from the one configuration: the node queue's callers from many runs at
# once (a package of its own, which needs neither client-go nor
# controller-runtime), the workload index's readers and writers, the scan
# service's verdicts under many scanners' claims (and a fleet of the nodes'
# clients sharing through it), and the rest of their fast tests, all under
# -race.
RACE_PACKAGES := ./internal/manager/nodequeue ./internal/manager/workloadindex ./internal/util/parallel ./internal/manager/scanservice ./test/integration/scanshare
.PHONY: test-race
test-race: ## The race tier: the manager's shared state (the node queue, the workload index, the scan service's verdicts) under the race detector, with concurrent callers.
	CGO_ENABLED=1 go test -race -short -count=1 $(GO_TEST_RUN) $(RACE_PACKAGES)

# make test's first tier. The fault tier and the later tiers' tool builds
# start beside it (hack/test-tiers.sh): on a cold machine its module
# downloads and package installs leave the CPU idle, and the control plane
# they build is the longest build of all.
.PHONY: test-checks
test-checks: verify verify-selftest vet build-windows test-deps ## make test's first tier: verify, vet (the Trivy scanner's module too), the Windows build check, the runtimes' packages.

.PHONY: test-unit
# The Trivy scanner's module is not in the loop: it compiles Trivy, about
# 3,000 packages, which would make a cold loop 12 minutes instead of 4 on 2
# cores. Its tests, the fast ones included, are make test-scanner's.
test-unit: ## The inner loop: every test that needs no control plane, runtime, Wine or kubelet (go test -short, the operator's module and hack/render).
	go test -short -count=1 $(GO_TEST_RUN) ./...
	go -C hack/render test -short -count=1 $(GO_TEST_RUN) ./...

.PHONY: test-control-plane
test-control-plane: ## The API, the manager and its reconcilers against a real kube-apiserver and etcd (built once, cached).
	assets="$$(hack/build-control-plane.sh)"; KUBEBUILDER_ASSETS="$$assets" go test -count=1 -timeout 30m $(GO_TEST_RUN) $(CONTROL_PLANE_PACKAGES)

# EXTRA=1: the fault tier runs kube-controller-manager's garbage collector
# beside the API server (the kubelet tier's build; the same cache).
.PHONY: test-fault
test-fault: ## The real manager binary against a real API server and garbage collector, with faults injected.
	assets="$$(EXTRA=1 hack/build-control-plane.sh)"; KUBEBUILDER_ASSETS="$$assets" go test -count=1 -timeout 30m $(GO_TEST_RUN) ./test/fault

.PHONY: test-runtimes
test-runtimes: test-deps ## The worker tier: the workers against a real containerd 1.6 and CRI-O, then containerd 1.7 and 2.x, then the Trivy scanner on both runtimes.
	CRIO_BIN_DIR="$$(hack/build-crio.sh)" go test -count=1 -timeout 45m $(GO_TEST_RUN) $(RUNTIME_PACKAGES)
	$(MAKE) --no-print-directory test-containerd-versions
	$(MAKE) --no-print-directory test-scanner

.PHONY: test-install
test-install: ## The install tier: the alert rules under promtool, then the chart and manifest with the real Helm CLI and kubectl on a real API server.
	$(MAKE) --no-print-directory test-promrules
	$(MAKE) --no-print-directory test-deploy

.PHONY: test-kubelet
test-kubelet: test-e2e-kubelet ## The kubelet tier (test-e2e-kubelet): end to end on real kubelets, installed from a loopback registry.

# The alert rules' unit tests: promtool, built from the module proxy once
# (hack/build-promtool.sh), runs hack/render/promrules/testdata against the
# chart's PrometheusRule as rendered. Before test-deploy, whose ./... runs
# them again with the cached promtool.
.PHONY: test-promrules
test-promrules: ## promtool unit tests of every alert of the chart's PrometheusRule (promtool built once from the module proxy, cached under ~/.cache/eraser).
	promtool="$$(hack/build-promtool.sh)"; PROMTOOL="$$promtool" go -C hack/render test -count=1 $(GO_TEST_RUN) ./promrules

# The install tier lives in its own module (hack/render), whose Helm and
# kustomize dependencies stay out of the root module.
.PHONY: test-deploy
test-deploy: ## Render the Helm chart and deploy/eraser.yaml, apply them to a real API server, run the manager with the shipped RBAC; the real Helm 3 and Helm 4 CLIs and kubectl migrating from upstream (helm upgrade, --reuse-values, kubectl apply), rolling back, uninstalling and installing over existing CRDs; a signed release verified with the cosign CLI (built once from the module proxy).
	go -C hack/render vet ./...
	assets="$$(hack/build-control-plane.sh)"; helm="$$(hack/build-helm.sh)"; helm3="$$(HELM_MAJOR=3 hack/build-helm.sh)"; cosign="$$(hack/build-cosign.sh)"; \
		KUBEBUILDER_ASSETS="$$assets" HELM="$$helm" HELM3="$$helm3" COSIGN="$$cosign" go -C hack/render test -count=1 -timeout 30m $(GO_TEST_RUN) ./...

# The worker tier again on containerd 1.7 and 2.x (Debian's 1.6 runs in
# test-runtimes' first line): each built once from the module proxy
# (hack/build-containerd.sh, cached), run by internal/testing/testcontainerd when
# CONTAINERD_BIN_DIR names it; then the scanner's pipeline on each. CRI-O's
# subtests (/crio) are not run again.
CONTAINERD_VERSIONS := v1.7.29 v2.3.3
.PHONY: test-containerd-versions
test-containerd-versions: test-deps ## The worker tier (test/e2e, internal/node/remover, internal/node/reclaim, internal/node/cri, internal/testing/containerdconfig) and the scanner pipeline on containerd 1.7.29 and 2.3.3, built once from the module proxy.
	@for v in $(CONTAINERD_VERSIONS); do \
		dir="$$(CONTAINERD_VERSION=$$v hack/build-containerd.sh)" || exit 1; \
		echo "worker tier on containerd $$v ($$dir)"; \
		CONTAINERD_BIN_DIR="$$dir" CRIO_BIN_DIR="$$(hack/build-crio.sh)" go test -count=1 -timeout 45m $(GO_TEST_RUN) -skip /crio ./test/e2e ./internal/node/remover ./internal/node/reclaim ./internal/node/cri ./internal/testing/containerdconfig || exit 1; \
		CONTAINERD_BIN_DIR="$$dir" $(SCANNER_ENV) go -C $(SCANNER_MODULE) test -trimpath -tags=$(GO_TAGS) -count=1 $(GO_TEST_RUN) -skip /crio/ ./test/e2e || exit 1; \
	done

.PHONY: prebuild
prebuild: ## Build the tools of the later tiers ahead of them, at a lower priority (make test runs it in the background).
	CONTAINERD_VERSIONS="$(CONTAINERD_VERSIONS)" nice -n 10 hack/prebuild.sh

.PHONY: test-crio
test-crio: test-deps ## The real CRI-O tier: CRI-O v1.34.0 built from the module proxy once (cold ~5 min, hack/build-crio.sh), started privately by the tests.
	CRIO_BIN_DIR="$$(hack/build-crio.sh)" go test -count=1 ./internal/testing/testcrio/

.PHONY: test-scanner
test-scanner: test-deps ## The Trivy scanner's tests, offline: fixture DB and images, the pipeline on a real containerd and a real CRI-O.
	CRIO_BIN_DIR="$$(hack/build-crio.sh)" $(SCANNER_ENV) go -C $(SCANNER_MODULE) test -trimpath -tags=$(GO_TAGS) -count=1 $(GO_TEST_RUN) ./...

.PHONY: fuzz
fuzz: ## Fuzz the parsers, matchers and decoders of outside input for a short while each.
	go test ./internal/wire/config -run=^$$ -fuzz=^FuzzParse$$ -fuzztime=30s
	go test ./internal/wire/config -run=^$$ -fuzz=^FuzzParseImage$$ -fuzztime=30s
	go test ./internal/node/scan -run=^$$ -fuzz=^FuzzParseConfig$$ -fuzztime=30s
	go test ./internal/node/scan -run=^$$ -fuzz=^FuzzParseTrivyJSON$$ -fuzztime=30s
	go test ./internal/wire/endpoint -run=^$$ -fuzz=^FuzzParse$$ -fuzztime=30s
	go test ./internal/wire/imageref -run=^$$ -fuzz=^FuzzParse$$ -fuzztime=30s
	go test ./internal/wire/imageref -run=^$$ -fuzz=^FuzzPattern$$ -fuzztime=30s
	go test ./internal/node/handoff -run=^$$ -fuzz=^FuzzDecode$$ -fuzztime=30s
	go test ./internal/node/exclusion -run=^$$ -fuzz=^FuzzParse$$ -fuzztime=30s
	go test ./internal/util/strictkeys -run=^$$ -fuzz=^FuzzJSON$$ -fuzztime=30s
	go test ./internal/util/strictkeys -run=^$$ -fuzz=^FuzzYAML$$ -fuzztime=30s
	go test ./internal/wire/workerresult -run=^$$ -fuzz=^FuzzDecode$$ -fuzztime=30s
	go test ./internal/node/cri -run=^$$ -fuzz=^FuzzSandboxImage$$ -fuzztime=30s
	go test ./internal/node/cri -run=^$$ -fuzz=^FuzzDecodeListImages$$ -fuzztime=30s
	go test ./internal/util/kname -run=^$$ -fuzz=^FuzzLabelValue$$ -fuzztime=30s
	go test ./internal/util/kname -run=^$$ -fuzz=^FuzzDNSLabel$$ -fuzztime=30s
	go test ./internal/node/nodestate -run=^$$ -fuzz=^FuzzParse$$ -fuzztime=30s
	go test ./internal/node/retention -run=^$$ -fuzz=^FuzzChoose$$ -fuzztime=30s
	go test ./internal/wire/nodereport -run=^$$ -fuzz=^FuzzParseLog$$ -fuzztime=30s
	go test ./internal/wire/nodereport -run=^$$ -fuzz=^FuzzDecode$$ -fuzztime=30s
	go test ./internal/node/criorecords -run=^$$ -fuzz=^FuzzTimes$$ -fuzztime=30s
	go test ./internal/node/criorecords -run=^$$ -fuzz=^FuzzParse$$ -fuzztime=30s
	$(SCANNER_ENV) go -C $(SCANNER_MODULE) test ./internal/storeimage -run=^$$ -fuzz=^FuzzLayerTar$$ -fuzztime=30s
	go test ./internal/wire/references -run=^$$ -fuzz=^FuzzReaders$$ -fuzztime=30s
	go test ./internal/node/remover -run=^$$ -fuzz=^FuzzReferenceMatchesAsInUse$$ -fuzztime=30s
	go test ./internal/manager/scandb -run=^$$ -fuzz=^FuzzReadMetadata$$ -fuzztime=30s

##@ Demo

.PHONY: demo
demo: ## Root: a local cluster of real kubelets, Eraser installed in it, an ImageList removing images from a node (before/after); all undone at the end.
	hack/demo.sh

.PHONY: bench
bench: bench-remover bench-manager bench-scanner bench-index ## Run every benchmark; figures are printed and written under bench/results.

.PHONY: bench-manager
bench-manager: ## Manager fan-out, completion and cleanup on 1,000, 5,000 and 10,000 KWOK nodes vs a bare client, then the queue case (10 ImageLists at once on 1,000 nodes: one worker per node, BENCH_QUEUE_NODES=0 skips it); writes per node, CPU per node, peak RSS, the control plane's CPU shares. BENCH_NODES=1000 for one size, BENCH_REPEAT=n runs each size n times (default 3 at 1,000 nodes, 1 above; medians printed), BENCH_PPROF=dir for profiles, BENCH_LONG_NAMES=1 for node names of 253 characters (every record the manager keeps is printed by size per node), BENCH_HUGE_REFERENCE=1 for one 1.2 MB image among the workload templates.
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -tags bench -count=1 -run TestManagerBench -v -timeout 80m ./test/bench

.PHONY: bench-references
bench-references: ## The manager's reference index on a real API server: 10,000 nodes with 30 Running pods each and 20,000 workload templates (BENCH_REF_NODES, BENCH_REF_PODS, BENCH_REF_TEMPLATES; BENCH_REF_RUNNING=0 leaves the pods Pending): sync time, heap and peak RSS, a wave's Cluster()/Node() times and the bytes it writes, the manager binary's peak RSS (BENCH_REF_MANAGER=0 skips it). About 20 minutes, most of it creating the objects.
	KUBEBUILDER_ASSETS="$$(hack/build-control-plane.sh)" go test -tags bench -count=1 -run TestReferencesBench -v -timeout 40m ./test/bench

.PHONY: bench-index
bench-index: ## The reference index in process at the size the sets are meant for: 10,000 nodes with 110 Running pods each and 50,000 workload templates, the objects of bench-references fed to its stores with no API server (BENCH_INDEX_NODES, BENCH_INDEX_PODS, BENCH_INDEX_TEMPLATES): ingest time, heap per pod, a wave's Cluster()/Node() times and the bytes it writes. About 70 s on 2 loaded cores.
	go test -tags bench -count=1 -run TestIndexAtFullSize -v -timeout 30m ./internal/manager/workloadindex

.PHONY: bench-remover
bench-remover: test-deps ## Remover vs raw CRI RemoveImage loops on a real containerd (200 and 2,000 images), and worker peak RSS.
	go test -tags bench -count=1 -run "TestRemoverBench|TestRemoverAtScale" -v -timeout 80m ./test/bench

.PHONY: bench-scanner
bench-scanner: test-deps ## Our Trivy scanner vs the Trivy CLI (built once from the module proxy) on 20 fixture images: time per image, peak RSS; then the fleet case: N = 1, 10, 100 nodes sharing the cluster's DB and verdicts vs each scanning alone (DB fetches, scans, wall time, the service's CPU and heap; BENCH_FLEET="1 10" for fewer).
	TRIVY_BIN="$$(hack/build-trivy.sh)" $(SCANNER_ENV) go -C $(SCANNER_MODULE) test -tags bench -count=1 -run 'TestScannerBench|TestScannerFleetBench' -v -timeout 90m ./test/bench

# The regret benchmark lives in its own module (test/bench/regret), so that
# k8s.io/kubernetes, whose image garbage collector is its baseline, never
# enters the operator's go.mod.
REGRET_MODULE := test/bench/regret

.PHONY: bench-regret
bench-regret: ## Removal without regret: seeded 30-day traces of a node fleet (web releases and rollbacks, CI runners, daily tag bumps, CronJobs) replayed through the kubelet's own image GC, Eraser's default scheduled run (also at 85/80) and the regret-aware policy: bytes pulled and re-pulled, starts that waited on a re-pull or failed because the registry dropped the image, peak and mean disk, bytes freed, and the goal's verdict per profile. BENCH_REGRET_PROFILES="web ci" and BENCH_REGRET_POLICIES for fewer, BENCH_REGRET_SCALE for the kubelet's clock (default 60000), BENCH_REGRET_KEEP_VERSIONS for the regret-aware policy's keepVersions. About 8 minutes on 2 cores shared with other work (load average 20-30).
	go -C $(REGRET_MODULE) vet ./...
	BENCH_REGRET=1 go -C $(REGRET_MODULE) test -count=1 -run TestRegretBench -v -timeout 60m .

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
