package main

import (
	"errors"
	"fmt"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
)

// pythonOptions reads Pulumi.yaml's runtime options (virtualenv, toolchain) into toolchain options.
func pythonOptions(info *pulumirpc.ProgramInfo, plugin bool) (toolchain.PythonOptions, error) {
	opts := toolchain.PythonOptions{}
	if info == nil {
		opts.Toolchain = toolchain.Pip
		return opts, nil
	}
	opts.Root, opts.ProgramDir = info.RootDirectory, info.ProgramDirectory
	var m map[string]any
	if info.Options != nil {
		m = info.Options.AsMap()
	}
	if v, ok := m["virtualenv"]; ok {
		s, ok := v.(string)
		if !ok {
			return opts, errors.New("runtime option virtualenv must be a string")
		}
		opts.Virtualenv = s
	}
	if v, ok := m["toolchain"]; ok {
		switch v {
		case "pip":
			opts.Toolchain = toolchain.Pip
		case "poetry":
			opts.Toolchain = toolchain.Poetry
		case "uv":
			opts.Toolchain = toolchain.Uv
		default:
			return opts, fmt.Errorf("unsupported runtime option toolchain: %v", v)
		}
	}
	if plugin && opts.Virtualenv == "" && (opts.Toolchain == toolchain.Pip || opts.Toolchain == toolchain.Auto) {
		opts.Virtualenv = "venv"
	}
	return opts, nil
}

// resolveToolchain is pythonOptions followed by the toolchain those options name: what every RPC that runs Python
// starts with.
func resolveToolchain(info *pulumirpc.ProgramInfo, plugin bool) (toolchain.Toolchain, toolchain.PythonOptions, error) {
	opts, err := pythonOptions(info, plugin)
	if err != nil {
		return nil, opts, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, opts, err
	}
	return tc, opts, nil
}
