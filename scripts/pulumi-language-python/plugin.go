package main

// RunPlugin: policy packs and plugin directories.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	sdk "github.com/pulumi/pulumi/sdk/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// RunPlugin runs a policy pack (kind "analyzer": `python -u -m pulumi.policy ARGS... DIR`, in DIR, with the
// stack's configuration in the environment) or a plugin directory with a __main__.py (`python DIR ARGS...`).
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	ctx := server.Context()
	if req.Info == nil {
		return errors.New("RunPluginRequest carries no program info")
	}
	analyzer := req.Kind == "analyzer"
	tc, _, err := resolveToolchain(req.Info, !analyzer)
	if err != nil {
		return err
	}
	args, err := pluginArgs(req, analyzer)
	if err != nil {
		return err
	}
	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()
	if analyzer {
		cmd.Dir = req.Info.ProgramDirectory
	} else {
		cmd.Dir = req.Pwd
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}

	var proxy *sdk.PolicyProxy
	if analyzer {
		if proxy, stdout, err = policyProxy(ctx, cmd, stdout); err != nil {
			return err
		}
	}
	cmd.Env = append(cmd.Env, req.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr

	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot run the plugin: %w", err)
	}
	if proxy != nil {
		if err := proxy.Attach(ctx, cmd); err != nil {
			return fmt.Errorf("cannot attach the policy pack proxy: %w", err)
		}
		return nil
	}
	if err := cmd.Wait(); err != nil {
		return pluginExit(err, server)
	}
	return closer.Close()
}

// pluginArgs: Python's arguments for a policy pack (`-u -m pulumi.policy ARGS... DIR`) or a plugin directory, which
// must hold a __main__.py (`DIR ARGS...`).
func pluginArgs(req *pulumirpc.RunPluginRequest, analyzer bool) ([]string, error) {
	if analyzer {
		args := append([]string{"-u", "-m", "pulumi.policy"}, req.Args...)
		return append(args, req.Info.ProgramDirectory), nil
	}
	if _, err := os.Stat(filepath.Join(req.Info.ProgramDirectory, "__main__.py")); err != nil {
		return nil, fmt.Errorf("plugin %s has no __main__.py (packaged Python plugins are not supported by this host)",
			req.Info.ProgramDirectory)
	}
	return append([]string{req.Info.ProgramDirectory}, req.Args...), nil
}

// policyProxy starts the proxy between the engine and a policy pack, and returns it with the writer the pack's
// stdout goes to. The engine's StackConfigure call reaches the proxy first; the policy pack gets the stack's
// configuration through its environment (added to cmd.Env here), then the proxy forwards everything to it.
func policyProxy(ctx context.Context, cmd *exec.Cmd, stdout io.Writer) (*sdk.PolicyProxy, io.Writer, error) {
	proxy, stdout, err := sdk.NewPolicyProxy(ctx, stdout)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot start the policy pack proxy: %w", err)
	}
	conf, err := proxy.AwaitConfiguration(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot get the stack configuration: %w", err)
	}
	if conf != nil {
		if cmd.Env, err = withStackConfiguration(cmd.Env, conf); err != nil {
			return nil, nil, err
		}
	}
	return proxy, stdout, nil
}

// withStackConfiguration: env plus the stack's organization, project, stack, dry-run flag and configuration, each
// only when set.
func withStackConfiguration(env []string, conf *pulumirpc.AnalyzerStackConfigureRequest) ([]string, error) {
	setenv := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	setenv("PULUMI_ORGANIZATION", conf.Organization)
	setenv("PULUMI_PROJECT", conf.Project)
	setenv("PULUMI_STACK", conf.Stack)
	setenv("PULUMI_DRY_RUN", strconv.FormatBool(conf.DryRun))
	if conf.Config != nil {
		b, err := json.Marshal(conf.Config)
		if err != nil {
			return nil, err
		}
		setenv("PULUMI_CONFIG", string(b))
	}
	return env, nil
}

// pluginExit: a plugin's non-zero exit status goes to the engine as the RunPlugin answer; any other failure is an
// error.
func pluginExit(err error, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok {
			return server.Send(&pulumirpc.RunPluginResponse{
				Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(ws.ExitStatus())},
			})
		}
	}
	return fmt.Errorf("plugin exited unexpectedly: %w", err)
}
