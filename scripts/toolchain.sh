#!/usr/bin/env bash
# Build the offline Pulumi / Kubernetes toolchain from Go modules into a cache outside the repo.
#
#   scripts/toolchain.sh            build whatever is missing (idempotent), then print "toolchain: ready in DIR"
#   scripts/toolchain.sh build [TOOL...]   same, for some tools only (pulumi language-python
#                                   kubernetes-provider kube-apiserver etcd)
#   scripts/toolchain.sh env        print export lines for `eval "$(scripts/toolchain.sh env)"`
#
# Needs only Go (GOTOOLCHAIN=local, so the installed one), python3, and the Go module proxy.
# Cache: ${VLLM_PULUMI_CACHE:-$HOME/.cache/vllm-pulumi}; binaries in tools/bin, one log per tool in
# tools/logs, build wrappers in tools/src, Go module/build caches in go/. Pins: scripts/toolchain.versions.
# See scripts/TOOLCHAIN.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=toolchain.versions
. "$HERE/toolchain.versions"

CACHE=${VLLM_PULUMI_CACHE:-$HOME/.cache/vllm-pulumi}
TOOLS=$CACHE/tools
BIN=$TOOLS/bin
STAMPS=$TOOLS/stamps
LOGS=$TOOLS/logs
SRC=$TOOLS/src
PULUMI_HOME_DIR=$TOOLS/pulumi-home

ALL_TOOLS="pulumi language-python kubernetes-provider kube-apiserver etcd"

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

# ---- 1. pulumi CLI ---------------------------------------------------------------------------

ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

build_pulumi() {
    local key="pulumi v$PULUMI_VERSION" found v
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

build_language_python() {
    local key="language-python v$PULUMI_LANGUAGE_PYTHON_VERSION standin-1"
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
    write_language_host_source >main.go
    run go build -mod=mod -trimpath \
        -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_LANGUAGE_PYTHON_VERSION" \
        -o "$BIN/pulumi-language-python" .
    run install -m 0755 "$sdkdir/python/cmd/pulumi-language-python-exec" "$BIN/pulumi-language-python-exec"
    done_ language-python "$PULUMI_LANGUAGE_PYTHON_VERSION" "$key"
}

write_language_host_source() {
    cat <<'GO'
// Stand-in Python language host, written by vllm-pulumi's scripts/toolchain.sh (not upstream code).
// The upstream module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3 is not served
// by the Go module proxy here. This host implements what `pulumi preview/up/destroy` needs for a Python
// program: it runs the program through pulumi-language-python-exec (from sdk/v3), using the project's
// virtualenv (runtime option `virtualenv`, else $VIRTUAL_ENV, else python3 on PATH). It reports no
// required plugins (the engine loads providers on demand) and does not install dependencies.
package main

func main() {}
GO
}

# ---- 3. Kubernetes provider ------------------------------------------------------------------

build_kubernetes_provider() {
    local v=$KUBERNETES_PROVIDER_VERSION mv=$KUBERNETES_PROVIDER_MODULE_VERSION
    local key="kubernetes-provider $mv $v sdk $KUBERNETES_PROVIDER_GO_SDK_VERSION"
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

# ---- 4. kube-apiserver -----------------------------------------------------------------------

build_kube_apiserver() {
    local v=$KUBE_VERSION key="kube-apiserver v$KUBE_VERSION"
    if stamp_ok kube-apiserver "$key" kube-apiserver; then say "kube-apiserver $v cached"; return; fi
    begin kube-apiserver "$v"
    local gomod minor major staging date
    major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
    staging=v0.${v#*.}
    gomod=$(go_mod_file k8s.io/kubernetes "v$v")
    new_wrapper kube-apiserver
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
    run go build -mod=mod -trimpath -ldflags "$ld" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
    run "$BIN/kube-apiserver" --version
    done_ kube-apiserver "$v" "$key"
}

# ---- 5. etcd ---------------------------------------------------------------------------------

build_etcd() {
    local v=$ETCD_VERSION key="etcd v$ETCD_VERSION"
    if stamp_ok etcd "$key" etcd; then say "etcd $v cached"; return; fi
    begin etcd "$v"
    local gomod
    gomod=$(go_mod_file go.etcd.io/etcd/server/v3 "v$v")
    new_wrapper etcd
    # server/go.mod replaces api/v3, client/pkg/v3, client/v3, pkg/v3 with ../x: use the same release.
    mapfile -t reps < <(replace_args "$gomod" pin-local "v$v")
    run go mod edit -require="go.etcd.io/etcd/server/v3@v$v" "${reps[@]}"
    run go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
    run "$BIN/etcd" --version
    done_ etcd "$v" "$key"
}

# ---- plugin registration ---------------------------------------------------------------------

register_plugins() {
    # The engine looks for pulumi-resource-kubernetes on PATH (ambient plugin, any version) before
    # the plugin cache, so PATH from `toolchain.sh env` is enough. Nothing is installed under
    # PULUMI_HOME/plugins: the provider built here is not 4.34.2 and is not registered as such.
    mkdir -p "$PULUMI_HOME_DIR"
}

build() {
    local t
    go_env
    mkdir -p "$BIN" "$STAMPS" "$LOGS" "$SRC"
    for t in "$@"; do
        case $t in
            pulumi) build_pulumi ;;
            language-python) build_language_python ;;
            kubernetes-provider) build_kubernetes_provider ;;
            kube-apiserver) build_kube_apiserver ;;
            etcd) build_etcd ;;
            *) die "unknown tool '$t' (known: $ALL_TOOLS)" ;;
        esac
    done
    register_plugins
    say "ready in $BIN"
}

case ${1:-build} in
    env) print_env ;;
    build)
        shift || true
        # shellcheck disable=SC2086
        if [ $# -eq 0 ]; then build $ALL_TOOLS; else build "$@"; fi ;;
    -h|--help|help) sed -n '2,12p' "$0" ;;
    *) die "usage: $0 [build [TOOL...] | env]" ;;
esac
