#!/usr/bin/env bash
# Build the offline Pulumi / Kubernetes toolchain from Go modules into a cache outside the repo.
#
#   scripts/toolchain.sh            build whatever is missing (idempotent), then print "toolchain: ready in DIR"
#   scripts/toolchain.sh build [TOOL...]   same, for some tools only (pulumi language-python
#                                   kubernetes-provider kube-apiserver etcd kube-scheduler
#                                   kube-controller-manager kwok lws-controller keda prometheus
#                                   karpenter-kwok kube-score crds karpenter-kwok-crds)
#   scripts/toolchain.sh demo       only what `make demo` needs (the Pulumi engine and the provider)
#   scripts/toolchain.sh env        print export lines for `eval "$(scripts/toolchain.sh env)"`
#   scripts/toolchain.sh key [TOOL...]   print each tool's stamp key, building nothing (a tool is rebuilt when
#                                   its stamp differs from it: see "stamp keys" below)
#
# Needs only Go (GOTOOLCHAIN=local, so the installed one), python3, and the Go module proxy.
# Cache: ${VLLM_PULUMI_CACHE:-$HOME/.cache/vllm-pulumi}; binaries in tools/bin, one log per tool in
# tools/logs, build wrappers in tools/src, Go module/build caches in go/. Pins: scripts/toolchain.versions.
# See scripts/TOOLCHAIN.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=toolchain.versions
. "$HERE/toolchain.versions"
# The names toolchain.versions pins, in its order (stamp keys name those a build reads).
PINS=$(sed -n 's/^\([A-Z][A-Z0-9_]*\)=.*/\1/p' "$HERE/toolchain.versions")

CACHE=${VLLM_PULUMI_CACHE:-$HOME/.cache/vllm-pulumi}
TOOLS=$CACHE/tools
BIN=$TOOLS/bin
STAMPS=$TOOLS/stamps
LOGS=$TOOLS/logs
SRC=$TOOLS/src
PULUMI_HOME_DIR=$TOOLS/pulumi-home

# `make demo` needs only the engine; `make test` adds the simulated cluster and the upstream CRDs.
DEMO_TOOLS="pulumi language-python kubernetes-provider"
CLUSTER_TOOLS="kube-apiserver etcd kube-scheduler kube-controller-manager kwok lws-controller keda prometheus"
# Karpenter with its KWOK cloud provider, and the CRDs it runs with (tests/e2e/harness/karpenter.py).
CLUSTER_TOOLS="$CLUSTER_TOOLS karpenter-kwok karpenter-kwok-crds"
# The linters platform teams run over manifests; tests/policies/test_kube_score.py runs kube-score over the goldens.
LINT_TOOLS="kube-score"
ALL_TOOLS="$DEMO_TOOLS $CLUSTER_TOOLS $LINT_TOOLS crds"

say() { echo "toolchain: $*" >&2; }
die() { echo "toolchain: ERROR: $*" >&2; exit 1; }

print_env() {
    cat <<EOF
export PATH="$BIN:\$PATH"
export PULUMI_HOME="$PULUMI_HOME_DIR"
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
EOF
}

go_env() {
    command -v go >/dev/null || die "go is not on PATH (Go >= 1.26 is needed)"
    command -v python3 >/dev/null || die "python3 is not on PATH"
    export GOPATH="$CACHE/go"
    export GOMODCACHE="$CACHE/go/mod"
    export GOCACHE="$CACHE/go/build"
    export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0
    GO_VERSION=$(go env GOVERSION)
    GO_VERSION=${GO_VERSION#go}
}

# ---- cache bookkeeping ---------------------------------------------------------------------

stamp_ok() {  # TOOL KEY BIN...
    local tool=$1 key=$2 b
    shift 2
    [ -f "$STAMPS/$tool" ] && [ "$(cat "$STAMPS/$tool")" = "$key" ] || return 1
    for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done
}
stamp_write() { mkdir -p "$STAMPS"; printf '%s\n' "$2" >"$STAMPS/$1"; }

# ---- stamp keys: everything a build depends on ----------------------------------------------
#
# A tool is rebuilt when its stamp (tools/stamps/TOOL) differs from its key, so the key names everything that can
# change what the build produces (scripts/TOOLCHAIN.md, "Stamps"): the installed Go version, the pins of
# toolchain.versions the build reads, a hash of the bash functions that build it (its build function and every
# function it calls, found in their text, less the bookkeeping ones below) and of the repo's source files it copies
# in. `declare -f` prints a function without its comments, so a comment edit rebuilds nothing.
# `scripts/toolchain.sh key [TOOL...]` prints the keys without building (tests/test_toolchain_stamps.py).

# Functions that log, time, stamp or compute keys: they change no built byte, so they are not part of any recipe.
declare -A BOOKKEEPING_FUNCTIONS=()
for f in say die run begin done_ stamp_ok stamp_write stamp_key recipe recipe_functions recipe_pins tool_sources \
    build_function; do
    BOOKKEEPING_FUNCTIONS[$f]=1
done
unset f

# The function that builds each tool: build_tools() dispatches through it and stamp_key() starts its recipe there.
build_function() {
    case $1 in
        pulumi) echo build_pulumi ;;
        language-python) echo build_language_python ;;
        kubernetes-provider) echo build_kubernetes_provider ;;
        kube-apiserver|kube-scheduler|kube-controller-manager) echo build_kube_binary ;;
        etcd) echo build_etcd ;;
        kwok) echo build_kwok ;;
        lws-controller) echo build_lws ;;
        keda) echo build_keda ;;
        prometheus) echo build_prometheus ;;
        kube-score) echo build_kube_score ;;
        crds) echo build_crds ;;
        karpenter-kwok) echo build_karpenter_kwok ;;
        karpenter-kwok-crds) echo build_karpenter_kwok_crds ;;
        *) return 1 ;;
    esac
}

# The repo's own source folders a tool's build copies into its wrapper module.
tool_sources() {
    case $1 in
        language-python) echo "$HERE/pulumi-language-python" ;;
        prometheus) echo "$HERE/promql-check" ;;
    esac
}

# recipe_functions FUNCTION: FUNCTION and every function of this script it calls, directly or not (a word of a
# function's text that names a function counts as a call), bookkeeping apart; sorted.
recipe_functions() {
    local -A seen=()
    local queue=("$1") f word
    while [ ${#queue[@]} -gt 0 ]; do
        f=${queue[0]}
        queue=("${queue[@]:1}")
        [ -n "${seen[$f]:-}" ] && continue
        seen[$f]=1
        for word in $(declare -f "$f" | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u); do
            if [ -z "${seen[$word]:-}" ] && [ -z "${BOOKKEEPING_FUNCTIONS[$word]:-}" ] &&
                declare -F "$word" >/dev/null; then
                queue+=("$word")
            fi
        done
    done
    printf '%s\n' "${!seen[@]}" | LC_ALL=C sort
}

# recipe_pins FUNCTION...: NAME=VALUE of each pin of toolchain.versions that the functions' text names.
recipe_pins() {
    local -A named=()
    local pin word
    for word in $(declare -f "$@" | grep -oE '[A-Z][A-Z0-9_]*'); do named[$word]=1; done
    for pin in $PINS; do
        if [ -n "${named[$pin]:-}" ]; then printf '%s=%s ' "$pin" "${!pin}"; fi
    done
}

# recipe TOOL FUNCTION...: the text stamp_key hashes: the recipe's functions, go_env (the build environment), and
# each source file the build copies in (path and content hash).
recipe() {
    local tool=$1 dir
    shift
    declare -f "$@" go_env
    for dir in $(tool_sources "$tool"); do
        (cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    done
}

# stamp_key TOOL (after go_env): "TOOL PIN=VALUE... go<version> recipe-<hash>".
stamp_key() {
    local fn functions
    fn=$(build_function "$1") || die "unknown tool '$1' (known: $ALL_TOOLS)"
    mapfile -t functions < <(recipe_functions "$fn")
    printf '%s %sgo%s recipe-%s\n' "$1" "$(recipe_pins "${functions[@]}")" "$GO_VERSION" \
        "$(recipe "$1" "${functions[@]}" | sha256sum | cut -c1-16)"
}

LOG=
run() {  # run a build step, appending to $LOG; on failure name the tool and the log
    echo "+ $*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || die "building $CUR_TOOL failed; see $LOG"
}

begin() {  # TOOL VERSION
    CUR_TOOL=$1
    LOG=$LOGS/$1.log
    mkdir -p "$LOGS" "$BIN" "$SRC"
    : >"$LOG"
    T0=$(date +%s)
    say "building $1 $2 ... (log: $LOG)"
}
done_() {  # TOOL VERSION KEY
    stamp_write "$1" "$3"
    say "built $1 $2 in $(( $(date +%s) - T0 ))s"
}

# ---- Go wrapper modules --------------------------------------------------------------------

# go_mod_file MODULE VERSION -> path of the module's go.mod in the module cache
go_mod_file() {
    local out
    out=$(cd "$SRC" && go mod download -json "$1@$2" 2>>"$LOG") ||
        die "building $CUR_TOOL failed: the Go module proxy does not serve $1@$2; see $LOG"
    printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])'
}
go_mod_dir() {
    local out
    out=$(cd "$SRC" && go mod download -json "$1@$2" 2>>"$LOG") ||
        die "building $CUR_TOOL failed: the Go module proxy does not serve $1@$2; see $LOG"
    printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

# replace_args GOMOD MODE [VERSION]: `go mod edit -replace` arguments repeating GOMOD's replace
# directives. Non-local replaces are copied. Local ones (=> ../x) are dropped (MODE=drop-local)
# or pinned to the published module at VERSION (MODE=pin-local, e.g. k8s.io/api => k8s.io/api v0.35.4).
replace_args() {
    python3 - "$@" <<'PY'
import json, subprocess, sys
gomod, mode = sys.argv[1], sys.argv[2]
ver = sys.argv[3] if len(sys.argv) > 3 else ""
d = json.loads(subprocess.check_output(["go", "mod", "edit", "-json", gomod]))
for r in d.get("Replace") or []:
    old, new = r["Old"], r["New"]
    lhs = old["Path"] + ("@" + old["Version"] if old.get("Version") else "")
    if new.get("Version"):
        print("-replace=%s=%s@%s" % (lhs, new["Path"], new["Version"]))
    elif mode == "pin-local" and "FORBIDDEN" not in new["Path"]:
        print("-replace=%s=%s@%s" % (lhs, old["Path"], ver))
PY
}

# new_wrapper NAME: fresh wrapper module dir $SRC/NAME with an empty go.mod; cd into it
new_wrapper() {
    WDIR=$SRC/$1
    rm -rf "$WDIR"
    mkdir -p "$WDIR"
    cd "$WDIR"
    printf 'module toolchain.invalid/%s\n\ngo %s\n' "$1" "$GO_VERSION" >go.mod
}

# module_wrapper TOOL MODULE VERSION REPLACE_MODE: a fresh wrapper module $SRC/TOOL (cd into it) requiring MODULE at
# VERSION and repeating MODULE's replace directives (REPLACE_MODE as in replace_args).
module_wrapper() {
    local gomod
    gomod=$(go_mod_file "$2" "$3")
    new_wrapper "$1"
    mapfile -t reps < <(replace_args "$gomod" "$4" "$3")
    run go mod edit -require="$2@$3" "${reps[@]}"
}

# ---- 1. pulumi CLI ---------------------------------------------------------------------------

ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

build_pulumi() {
    local key found v
    key=$(stamp_key pulumi)
    if stamp_ok pulumi "$key" pulumi; then say "pulumi $PULUMI_VERSION cached"; return; fi
    # A suitable pulumi CLI elsewhere on PATH: link it instead of building.
    found=$(PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$BIN" | paste -sd: -) command -v pulumi || true)
    if [ -n "$found" ]; then
        v=$("$found" version 2>/dev/null | head -n1 | sed 's/^v//') || v=
        if [ -n "$v" ] && ver_ge "${v%%[-+]*}" "$PULUMI_MIN_VERSION"; then
            key="pulumi external $found $v"
            if ! stamp_ok pulumi "$key" pulumi; then
                mkdir -p "$BIN"
                ln -sfn "$found" "$BIN/pulumi"
                stamp_write pulumi "$key"
            fi
            say "pulumi $v found on PATH ($found), not building"
            return
        fi
    fi
    begin pulumi "$PULUMI_VERSION"
    rm -f "$BIN/pulumi"  # may be a symlink to an external pulumi: never build through it
    local pkg sdk
    pkg=$(go_mod_file github.com/pulumi/pulumi/pkg/v3 "v$PULUMI_VERSION")
    sdk=$(go_mod_file github.com/pulumi/pulumi/sdk/v3 "v$PULUMI_VERSION")
    new_wrapper pulumi
    # pkg/go.mod replaces sdk/v3 with ../sdk: require the same released sdk instead.
    mapfile -t reps < <(replace_args "$pkg" drop-local; replace_args "$sdk" drop-local)
    run go mod edit -require="github.com/pulumi/pulumi/pkg/v3@v$PULUMI_VERSION" \
        -require="github.com/pulumi/pulumi/sdk/v3@v$PULUMI_VERSION" "${reps[@]}"
    run go build -mod=mod -trimpath -tags osusergo,grpcnotrace \
        -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
        -o "$BIN/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
    run "$BIN/pulumi" version
    done_ pulumi "$PULUMI_VERSION" "$key"
}

# ---- 2. Python language host -----------------------------------------------------------------

# The stand-in host's source is scripts/pulumi-language-python (why it exists: its main.go); its files are copied into
# the wrapper module, which requires sdk/v3 at PULUMI_LANGUAGE_PYTHON_VERSION, and built there.
build_language_python() {
    local key
    key=$(stamp_key language-python)
    if stamp_ok language-python "$key" pulumi-language-python pulumi-language-python-exec; then
        say "pulumi-language-python $PULUMI_LANGUAGE_PYTHON_VERSION cached"; return
    fi
    begin language-python "$PULUMI_LANGUAGE_PYTHON_VERSION"
    local sdk sdkdir
    sdk=$(go_mod_file github.com/pulumi/pulumi/sdk/v3 "v$PULUMI_LANGUAGE_PYTHON_VERSION")
    sdkdir=$(go_mod_dir github.com/pulumi/pulumi/sdk/v3 "v$PULUMI_LANGUAGE_PYTHON_VERSION")
    new_wrapper language-python
    mapfile -t reps < <(replace_args "$sdk" drop-local)
    run go mod edit -require="github.com/pulumi/pulumi/sdk/v3@v$PULUMI_LANGUAGE_PYTHON_VERSION" "${reps[@]}"
    run cp "$(tool_sources language-python)"/*.go .
    run go build -mod=mod -trimpath \
        -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_LANGUAGE_PYTHON_VERSION" \
        -o "$BIN/pulumi-language-python" .
    run install -m 0755 "$sdkdir/python/cmd/pulumi-language-python-exec" "$BIN/pulumi-language-python-exec"
    done_ language-python "$PULUMI_LANGUAGE_PYTHON_VERSION" "$key"
}

# ---- 3. Kubernetes provider ------------------------------------------------------------------

build_kubernetes_provider() {
    local v=$KUBERNETES_PROVIDER_VERSION mv=$KUBERNETES_PROVIDER_MODULE_VERSION
    local key
    key=$(stamp_key kubernetes-provider)
    local mod=github.com/pulumi/pulumi-kubernetes/provider/v4
    if stamp_ok kubernetes-provider "$key" pulumi-resource-kubernetes; then
        say "pulumi-resource-kubernetes $v cached"; return
    fi
    begin kubernetes-provider "$v"
    local gomod dir
    gomod=$(go_mod_file $mod "$mv")
    dir=$(go_mod_dir $mod "$mv")
    new_wrapper kubernetes-provider
    mapfile -t reps < <(replace_args "$gomod" drop-local)
    run go mod edit -require="$mod@$mv" \
        -replace="github.com/pulumi/pulumi-kubernetes/sdk/v4=github.com/pulumi/pulumi-kubernetes/sdk/v4@$KUBERNETES_PROVIDER_GO_SDK_VERSION" \
        "${reps[@]}"
    # main.go embeds schema-embed.json and terraform-mapping-embed.json, made by `go generate`
    # (generate.go) and absent from the module zip: build the upstream main from a copy in the wrapper.
    run cp "$dir/cmd/pulumi-resource-kubernetes/main.go" "$dir/cmd/pulumi-resource-kubernetes/generate.go" \
        "$dir/cmd/pulumi-resource-kubernetes/schema.json" "$dir/cmd/pulumi-resource-kubernetes/terraform-mapping.json" .
    chmod u+w ./*
    VERSION=$v run go run -mod=mod generate.go
    run go build -mod=mod -trimpath \
        -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$v" \
        -o "$BIN/pulumi-resource-kubernetes" ./main.go
    rm -f schema.json schema-embed.json terraform-mapping.json terraform-mapping-embed.json
    done_ kubernetes-provider "$v" "$key"
}

# ---- 4. kube-apiserver, kube-scheduler, kube-controller-manager -------------------------------

# build_kube_binary NAME: k8s.io/kubernetes/cmd/NAME at KUBE_VERSION. The three binaries share one wrapper
# shape and the Go build cache, so the second and third compile only their own packages.
build_kube_binary() {
    local name=$1 v=$KUBE_VERSION
    local key
    key=$(stamp_key "$name")
    if stamp_ok "$name" "$key" "$name"; then say "$name $v cached"; return; fi
    begin "$name" "$v"
    local gomod minor major staging date
    major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
    staging=v0.${v#*.}
    gomod=$(go_mod_file k8s.io/kubernetes "v$v")
    new_wrapper "$name"
    # k8s.io/kubernetes replaces every k8s.io/* staging module with ./staging/src/...: use the
    # published k8s.io/X v0.<minor>.<patch> instead.
    mapfile -t reps < <(replace_args "$gomod" pin-local "$staging")
    run go mod edit -require="k8s.io/kubernetes@v$v" "${reps[@]}"
    date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    local ld="-s -w" p
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld="$ld -X $p.gitVersion=v$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
        ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=$date"
    done
    run go build -mod=mod -trimpath -ldflags "$ld" -o "$BIN/$name" "k8s.io/kubernetes/cmd/$name"
    run "$BIN/$name" --version
    done_ "$name" "$v" "$key"
}

# ---- 5-7. etcd, KWOK, the LWS controller: one main package of one module each ----------------------

# build_module_main TOOL VERSION MODULE PACKAGE REPLACE_MODE [LDFLAGS...]: build MODULE's PACKAGE at vVERSION into
# $BIN/TOOL in a wrapper module that repeats MODULE's replace directives (REPLACE_MODE as in replace_args).
build_module_main() {
    local tool=$1 v=$2 mod=$3 pkg=$4 mode=$5
    shift 5
    local key
    key=$(stamp_key "$tool")
    if stamp_ok "$tool" "$key" "$tool"; then say "$tool $v cached"; return; fi
    begin "$tool" "$v"
    module_wrapper "$tool" "$mod" "v$v" "$mode"
    run go build -mod=mod -trimpath -ldflags "-s -w $*" -o "$BIN/$tool" "$pkg"
    run "$BIN/$tool" --version
    done_ "$tool" "$v" "$key"
}

# etcd: server/go.mod replaces api/v3, client/pkg/v3, client/v3, pkg/v3 with ../x: use the same release.
build_etcd() {
    build_module_main etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 pin-local
}

# KWOK, the node and pod lifecycle simulator of the simulated cluster.
build_kwok() {
    build_module_main kwok "$KWOK_VERSION" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok drop-local
}

# The LeaderWorkerSet controller manager (its main package is ./cmd).
build_lws() {
    build_module_main lws-controller "$LWS_VERSION" sigs.k8s.io/lws sigs.k8s.io/lws/cmd drop-local \
        "-X sigs.k8s.io/lws/pkg/version.GitVersion=v$LWS_VERSION"
}

# KEDA: the operator (controllers and the gRPC metrics service), the external-metrics adapter and the admission
# webhooks, from one wrapper module (KEDA's go.mod has only non-local replaces, which the wrapper repeats).
build_keda() {
    local v=$KEDA_VERSION mod=github.com/kedacore/keda/v2
    local key c
    key=$(stamp_key keda)
    if stamp_ok keda "$key" keda-operator keda-adapter keda-webhooks; then say "keda $v cached"; return; fi
    begin keda "$v"
    module_wrapper keda $mod "v$v" drop-local
    for c in operator adapter webhooks; do
        run go build -mod=mod -trimpath -ldflags "-s -w -X $mod/version.Version=$v" -o "$BIN/keda-$c" "$mod/cmd/$c"
    done
    done_ keda "$v" "$key"
}

# Prometheus (the server the KEDA tests query) and promql-check (scripts/promql-check: Prometheus's own PromQL
# parser over the queries the package renders), both from github.com/prometheus/prometheus at v$PROMETHEUS_VERSION.
# The server is built without the builtinassets tag: no web UI, the HTTP API is all the tests use.
build_prometheus() {
    local v=$PROMETHEUS_VERSION mod=github.com/prometheus/prometheus
    local check key
    check=$(tool_sources prometheus)/main.go
    key=$(stamp_key prometheus)
    if stamp_ok prometheus "$key" prometheus promql-check; then say "prometheus $v cached"; return; fi
    begin prometheus "$v (app $PROMETHEUS_APP_VERSION)"
    module_wrapper prometheus $mod "v$v" drop-local
    mkdir -p promql-check
    run cp "$check" promql-check/main.go
    run go build -mod=mod -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_APP_VERSION" \
        -o "$BIN/prometheus" "$mod/cmd/prometheus"
    run "$BIN/prometheus" --version
    run go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/promql-check" ./promql-check
    done_ prometheus "$v" "$key"
}

# kube-score (github.com/zegl/kube-score, main package cmd/kube-score): the linter whose findings on our own rendered
# output docs/linters.md answers. Its version is a subcommand (`kube-score version`), not a flag, and goreleaser
# normally sets it through main.version.
build_kube_score() {
    local v=$KUBE_SCORE_VERSION mod=github.com/zegl/kube-score
    local key
    key=$(stamp_key kube-score)
    if stamp_ok kube-score "$key" kube-score; then say "kube-score $v cached"; return; fi
    begin kube-score "$v"
    module_wrapper kube-score $mod "v$v" drop-local
    run go build -mod=mod -trimpath -ldflags "-s -w -X main.version=$v" -o "$BIN/kube-score" "$mod/cmd/kube-score"
    run "$BIN/kube-score" version
    done_ kube-score "$v" "$key"
}

# ---- 8. upstream CRDs, from the same Go modules -------------------------------------------------

# The custom resources the stacks render are validated against their upstream CRDs at the versions the project
# pins (the add-on charts' app versions). The modules ship them; they are copied out of the module cache into
# $CACHE/crds (outside the repo) with a SOURCES.tsv naming module, version and path of each.
# One line a CRD: module, the pin of its version, its path in the module, and optionally the pin of the Go toolchain
# the module's go.mod asks for (else the installed one). A function, not an array, so that its text is part of the
# crds recipe (stamp_key).
crd_files() {
    cat <<'EOF'
sigs.k8s.io/lws LWS_VERSION config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml
github.com/kedacore/keda/v2 KEDA_VERSION config/crd/bases/keda.sh_scaledobjects.yaml
github.com/kedacore/keda/v2 KEDA_VERSION config/crd/bases/keda.sh_triggerauthentications.yaml
github.com/prometheus-operator/prometheus-operator PROMETHEUS_OPERATOR_VERSION example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
github.com/prometheus-operator/prometheus-operator PROMETHEUS_OPERATOR_VERSION example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml
github.com/prometheus-operator/prometheus-operator PROMETHEUS_OPERATOR_VERSION example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
sigs.k8s.io/karpenter KARPENTER_VERSION pkg/apis/crds/karpenter.sh_nodepools.yaml KARPENTER_GO_TOOLCHAIN
sigs.k8s.io/karpenter KARPENTER_VERSION pkg/apis/crds/karpenter.sh_nodeclaims.yaml KARPENTER_GO_TOOLCHAIN
github.com/aws/karpenter-provider-aws KARPENTER_AWS_VERSION pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml KARPENTER_GO_TOOLCHAIN
EOF
}
CRD_DIR=$CACHE/crds

# extract_crds DIR LIST: the CRD files LIST (a function printing "MODULE VERSION_PIN PATH [GO_TOOLCHAIN_PIN]" a line)
# names, copied out of the module cache into DIR (replaced whole) with a SOURCES.tsv naming module, version and path of
# each.
extract_crds() {
    local out=$1 entry entries mod var path toolchain dir version
    mkdir -p "$SRC"
    rm -rf "$out.new"
    mkdir -p "$out.new"
    printf 'file\tmodule\tversion\tpath\n' >"$out.new/SOURCES.tsv"
    mapfile -t entries < <("$2")
    for entry in "${entries[@]}"; do
        read -r mod var path toolchain <<<"$entry"
        version=v${!var}
        if [ -n "$toolchain" ]; then
            dir=$(GOTOOLCHAIN=${!toolchain} go_mod_dir "$mod" "$version")
        else
            dir=$(go_mod_dir "$mod" "$version")
        fi
        [ -f "$dir/$path" ] || die "$mod@$version has no $path"
        run install -m 0644 "$dir/$path" "$out.new/$(basename "$path")"
        printf '%s\t%s\t%s\t%s\n' "$(basename "$path")" "$mod" "$version" "$path" >>"$out.new/SOURCES.tsv"
    done
    rm -rf "$out"
    mv "$out.new" "$out"
}

build_crds() {
    local key
    key=$(stamp_key crds)
    if stamp_ok crds "$key" && [ -f "$CRD_DIR/SOURCES.tsv" ]; then say "CRDs cached in $CRD_DIR"; return; fi
    begin crds "(lws $LWS_VERSION, keda $KEDA_VERSION, prometheus-operator $PROMETHEUS_OPERATOR_VERSION, karpenter $KARPENTER_VERSION, karpenter-provider-aws $KARPENTER_AWS_VERSION)"
    extract_crds "$CRD_DIR" crd_files
    done_ crds "(lws, keda, prometheus-operator, karpenter, karpenter-provider-aws)" "$key"
}

# ---- 9. Karpenter core with its KWOK cloud provider (the simulated cluster's node autoscaler) -------

# sigs.k8s.io/karpenter's go.mod asks for a newer Go than the installed one (v1.15.0: go 1.26.9, while go1.26.8 is
# installed here), so this build runs the Go toolchain pinned in KARPENTER_GO_TOOLCHAIN, which the go command
# fetches from the module proxy as the module golang.org/toolchain into the same module cache (as build_crds does for
# the Karpenter modules' CRDs). Every other tool keeps GOTOOLCHAIN=local. Its compiled packages do not share the
# build cache with the other tools' (the compiler version is part of each cache key).
with_karpenter_go() {
    local saved=$GOTOOLCHAIN rc=0
    export GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN
    "$@" || rc=$?
    export GOTOOLCHAIN=$saved
    return $rc
}

build_karpenter_kwok() {
    local v=$KARPENTER_VERSION mod=sigs.k8s.io/karpenter
    local key
    key=$(stamp_key karpenter-kwok)
    if stamp_ok karpenter-kwok "$key" karpenter-kwok; then say "karpenter-kwok $v cached"; return; fi
    begin karpenter-kwok "$v ($KARPENTER_GO_TOOLCHAIN)"
    with_karpenter_go module_wrapper karpenter-kwok $mod "v$v" drop-local
    # The wrapper declares the Go version the module asks for (its own would be the installed one's, which is older).
    local want
    want=$(go mod edit -json "$(with_karpenter_go go_mod_file $mod "v$v")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Go"])')
    run go mod edit -go="$want"
    with_karpenter_go run go version
    # Karpenter has no --version flag; it logs and exports (metric build_info) pkg/operator.Version, set like its releases do.
    with_karpenter_go run go build -mod=mod -trimpath -ldflags "-s -w -X $mod/pkg/operator.Version=v$v" \
        -o "$BIN/karpenter-kwok" "$mod/kwok"
    done_ karpenter-kwok "$v" "$key"
}

# The CRDs Karpenter's controllers watch (it fails to start without any of them: NodePool, NodeClaim, NodeOverlay,
# CapacityBuffer from pkg/apis/crds) and the KWOK provider's node class (kwok/apis/crds), into $CACHE/crds-karpenter-kwok,
# a directory of their own: the simulation installs Karpenter's whole set; the stacks are validated against build_crds'.
karpenter_kwok_crd_files() {
    cat <<'EOF'
sigs.k8s.io/karpenter KARPENTER_VERSION pkg/apis/crds/karpenter.sh_nodepools.yaml KARPENTER_GO_TOOLCHAIN
sigs.k8s.io/karpenter KARPENTER_VERSION pkg/apis/crds/karpenter.sh_nodeclaims.yaml KARPENTER_GO_TOOLCHAIN
sigs.k8s.io/karpenter KARPENTER_VERSION pkg/apis/crds/karpenter.sh_nodeoverlays.yaml KARPENTER_GO_TOOLCHAIN
sigs.k8s.io/karpenter KARPENTER_VERSION pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml KARPENTER_GO_TOOLCHAIN
sigs.k8s.io/karpenter KARPENTER_VERSION kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml KARPENTER_GO_TOOLCHAIN
EOF
}

build_karpenter_kwok_crds() {
    local out=$CACHE/crds-karpenter-kwok key
    key=$(stamp_key karpenter-kwok-crds)
    if stamp_ok karpenter-kwok-crds "$key" && [ -f "$out/SOURCES.tsv" ]; then say "Karpenter KWOK CRDs cached in $out"; return; fi
    begin karpenter-kwok-crds "$KARPENTER_VERSION"
    extract_crds "$out" karpenter_kwok_crd_files
    done_ karpenter-kwok-crds "$KARPENTER_VERSION" "$key"
}

# ---- plugin registration ---------------------------------------------------------------------

register_plugins() {
    # The engine looks for pulumi-resource-kubernetes on PATH (ambient plugin, any version) before
    # the plugin cache, so PATH from `toolchain.sh env` is enough. Nothing is installed under
    # PULUMI_HOME/plugins: the provider built here is not 4.34.2 and is not registered as such.
    mkdir -p "$PULUMI_HOME_DIR"
}

build_tools() {
    local t fn
    go_env
    mkdir -p "$BIN" "$STAMPS" "$LOGS" "$SRC"
    for t in "$@"; do
        fn=$(build_function "$t") || die "unknown tool '$t' (known: $ALL_TOOLS)"
        "$fn" "$t"
    done
    register_plugins
    say "ready in $BIN"
}

print_keys() {  # TOOL...: each tool's stamp key (what its stamp must hold for it to count as built), one a line
    local t
    go_env
    for t in "$@"; do printf '%s\n' "$(stamp_key "$t")"; done
}

case ${1:-build} in
    env) print_env ;;
    build)
        shift || true
        # shellcheck disable=SC2086
        if [ $# -eq 0 ]; then build_tools $ALL_TOOLS; else build_tools "$@"; fi ;;
    demo)
        # shellcheck disable=SC2086
        build_tools $DEMO_TOOLS ;;
    key)
        shift
        # shellcheck disable=SC2086
        if [ $# -eq 0 ]; then print_keys $ALL_TOOLS; else print_keys "$@"; fi ;;
    -h|--help|help) sed -n '2,16p' "$0" ;;
    *) die "usage: $0 [build [TOOL...] | demo | env | key [TOOL...]]" ;;
esac
