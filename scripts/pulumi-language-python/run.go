package main

// Run: the Pulumi program, through pulumi-language-python-exec in the resolved toolchain.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	if req.Info == nil {
		return nil, errors.New("RunRequest carries no program info")
	}
	tc, _, err := resolveToolchain(req.Info, false)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}

	runCtx, stopRun := context.WithCancel(h.stop)
	defer stopRun()
	context.AfterFunc(ctx, stopRun)
	cmd, err := tc.Command(runCtx, h.executorArgs(req)...)
	if err != nil {
		return nil, err
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	if cmd.Env, err = withProgramConfig(env, req); err != nil {
		return nil, err
	}

	if err := cmd.Run(); err != nil {
		_ = os.Stdout.Sync()
		_ = os.Stderr.Sync()
		return programFailure(err), nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// executorArgs: pulumi-language-python-exec's command line for the request (flags with a value only), then the
// program's entry point and its arguments.
func (h *host) executorArgs(req *pulumirpc.RunRequest) []string {
	args := []string{h.execScript}
	flagArg := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	flagArg("monitor", req.MonitorAddress)
	flagArg("engine", h.engineAddr())
	flagArg("project", req.Project)
	flagArg("root_directory", req.Info.RootDirectory)
	flagArg("stack", req.Stack)
	flagArg("pwd", req.Pwd)
	flagArg("dry_run", strconv.FormatBool(req.DryRun))
	flagArg("parallel", strconv.Itoa(int(req.Parallel)))
	flagArg("tracing", h.tracing)
	flagArg("organization", req.Organization)
	args = append(args, req.Info.EntryPoint)
	return append(args, req.Args...)
}

// withProgramConfig: env plus the stack's configuration (PULUMI_CONFIG, when there is any) and the names of its
// secret keys (PULUMI_CONFIG_SECRET_KEYS, always, "[]" when none), as the upstream host passes them.
func withProgramConfig(env []string, req *pulumirpc.RunRequest) ([]string, error) {
	if req.Config != nil {
		b, err := json.Marshal(req.Config)
		if err != nil {
			return nil, err
		}
		env = append(env, "PULUMI_CONFIG="+string(b))
	}
	keys := req.ConfigSecretKeys
	if keys == nil {
		keys = []string{}
	}
	b, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	return append(env, "PULUMI_CONFIG_SECRET_KEYS="+string(b)), nil
}

// programFailure: the RunResponse for a program that did not exit 0. The executor's userActionableExit means it
// has already told the user (Bail: the engine adds nothing); any other exit status or failure is reported.
func programFailure(err error) *pulumirpc.RunResponse {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			if ws.ExitStatus() == userActionableExit {
				return &pulumirpc.RunResponse{Bail: true}
			}
			return &pulumirpc.RunResponse{
				Error: fmt.Sprintf("program exited with non-zero exit code: %d", ws.ExitStatus()),
			}
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited unexpectedly: %v", err)}
	}
	return &pulumirpc.RunResponse{
		Error: fmt.Sprintf("problem executing program (could not run language executor): %v", err),
	}
}
