package main

// The small RPCs: the engine handshake, plugin info, cancellation, dependencies and About. Run and RunPlugin, the
// two that start Python, are in run.go and plugin.go.

import (
	"context"
	"fmt"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/protobuf/types/known/emptypb"
)

func (h *host) Handshake(ctx context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.mu.Lock()
	h.engine = req.EngineAddress
	h.mu.Unlock()
	if req.EngineAddress != "" {
		hc, stop := context.WithCancel(context.Background())
		go func() { <-hc.Done(); h.shutdown() }()
		if err := rpcutil.Healthcheck(hc, req.EngineAddress, 5*time.Minute, stop); err != nil {
			return nil, fmt.Errorf("cannot start the engine health check: %w", err)
		}
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.stopAll()
	return &emptypb.Empty{}, nil
}

func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest,
	server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	// The options are read before the output streams are opened, the toolchain resolved after (as before the split).
	opts, err := pythonOptions(req.Info, req.IsPlugin)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeInstallDependenciesStreams(server, req.IsTerminal)
	if err != nil {
		return err
	}
	defer closer.Close()
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	dir := ""
	if req.Info != nil {
		dir = req.Info.ProgramDirectory
	}
	fmt.Fprintln(stdout, "Installing dependencies...")
	if err := tc.InstallDependencies(server.Context(), dir, req.UseLanguageVersionTools, true, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Finished installing dependencies")
	return closer.Close()
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	var info *pulumirpc.ProgramInfo
	if req != nil {
		info = req.Info
	}
	tc, opts, err := resolveToolchain(info, false)
	if err != nil {
		return nil, err
	}
	about, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{
		Executable: about.PythonExecutable,
		Version:    about.PythonVersion.String(),
		Metadata:   map[string]string{"toolchain": toolchain.Name(opts.Toolchain)},
	}, nil
}

func (h *host) GetProgramDependencies(ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	tc, _, err := resolveToolchain(req.Info, false)
	if err != nil {
		return nil, err
	}
	pkgs, err := tc.ListPackages(ctx, req.TransitiveDependencies)
	if err != nil {
		return nil, fmt.Errorf("listing Python packages: %w", err)
	}
	resp := &pulumirpc.GetProgramDependenciesResponse{}
	for _, p := range pkgs {
		resp.Dependencies = append(resp.Dependencies, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return resp, nil
}

func (h *host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest,
) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}
