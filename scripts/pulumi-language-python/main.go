// Stand-in Python language host of vllm-pulumi (not upstream code), built by scripts/toolchain.sh on sdk/v3.
//
// The upstream module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3 is not served
// by the Go module proxy reachable here, so this small host is built on sdk/v3 instead. It covers what
// `pulumi preview/up/destroy/refresh` and Python policy packs need:
//   - Run: runs the program with pulumi-language-python-exec (copied from sdk/v3, next to this binary),
//     in the toolchain/virtualenv named by Pulumi.yaml's runtime options (else the active one).
//   - RunPlugin: policy packs (`python -m pulumi.policy`) and plugins with a __main__.py.
//   - InstallDependencies, About, GetProgramDependencies, Handshake, GetPluginInfo, Cancel.
//
// It reports no required packages (the engine loads providers on demand); code generation, templates,
// packing and linking are not implemented.
//
// Files: main.go (the process and its gRPC server), options.go (Pulumi.yaml's runtime options), rpc.go (the small
// RPCs), run.go (Run: the program), plugin.go (RunPlugin: policy packs and plugins).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/logging"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
)

// Exit status of pulumi-language-python-exec after it has printed a message meant for the user.
const userActionableExit = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	execScript string
	tracing    string

	mu       sync.Mutex
	engine   string
	stop     context.Context // cancelled by the Cancel RPC
	stopAll  context.CancelFunc
	shutdown func() // stops the gRPC server (engine gone or interrupted)
}

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	tracing := flag.String("tracing", "", "Zipkin-compatible tracing endpoint (passed on to the program)")
	executor := flag.String("use-executor", "", "path of pulumi-language-python-exec (default: next to this binary)")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	logging.InitLogging(false, 0, false)

	script := *executor
	if script == "" {
		self, err := os.Executable()
		if err != nil {
			cmdutil.Exit(fmt.Errorf("cannot locate this executable: %w", err))
		}
		script = filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
	}
	if _, err := os.Stat(script); err != nil {
		cmdutil.Exit(fmt.Errorf("missing executor %s: %w", script, err))
	}

	stop, stopAll := context.WithCancel(context.Background())
	h := &host{execScript: script, tracing: *tracing, stop: stop, stopAll: stopAll}

	sigCtx, sigStop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer sigStop()
	cancel := make(chan bool)
	var once sync.Once
	h.shutdown = func() { once.Do(func() { close(cancel) }) }
	go func() { <-sigCtx.Done(); h.shutdown() }()

	if args := flag.Args(); len(args) > 0 {
		h.engine = args[0]
		if err := rpcutil.Healthcheck(sigCtx, h.engine, 5*time.Minute, sigStop); err != nil {
			cmdutil.Exit(fmt.Errorf("cannot start the engine health check: %w", err))
		}
	}

	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancel,
		Init: func(s *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(s, h)
			return nil
		},
		Options: rpcutil.TracingServerInterceptorOptions(nil),
	})
	if err != nil {
		cmdutil.Exit(fmt.Errorf("cannot start the language host gRPC server: %w", err))
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		cmdutil.Exit(fmt.Errorf("language host gRPC server stopped: %w", err))
	}
}

func (h *host) engineAddr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.engine
}
