"""The offline checker: ``vllm-pulumi-check PATH... [--format text|json|sarif|github] [--config FILE]`` (also
``python -m vllm_pulumi.policies.check``, and ``python -m policies.check`` in a checkout).

Exit status: 0 when no mandatory rule fires, 1 when one does, 2 when the input or the config cannot be read.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from vllm_pulumi.policies.engine import Config, ConfigError
from vllm_pulumi.policies.loader import InputError
from vllm_pulumi.policies.model_configs import HUB_TIMEOUT_SECONDS, ModelConfigError, ModelConfigs, configure
from vllm_pulumi.policies.offline import Coverage, check_paths
from vllm_pulumi.policies.registry import all_rules
from vllm_pulumi.policies.report import FORMATS, format_github, format_json, format_sarif, format_text

__all__ = ["EXIT_INPUT", "EXIT_MANDATORY", "EXIT_OK", "format_text", "load_config", "main"]

EXIT_OK, EXIT_MANDATORY, EXIT_INPUT = 0, 1, 2


MODULE_PROG = "python -m vllm_pulumi.policies.check"


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Check Kubernetes manifests (files or directories of YAML) against the vllm-pulumi policies.",
        epilog="Exit status: 0 no mandatory finding, 1 a mandatory finding, 2 input or config unreadable. "
               "Findings name file and line; for standard input <stdin>, the line in the stream and the document "
               "(counting the documents that hold something).",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="YAML file, directory (walked recursively), or - for standard input "
                             "(helm template ... | %(prog)s -)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), json, sarif (SARIF 2.1.0 for code scanning) or github (GitHub Actions "
                             "annotations)")
    parser.add_argument("--skip-non-kubernetes", action="store_true",
                        help="pass over YAML documents that are not Kubernetes objects (CI configs, Helm values) "
                             "instead of refusing them; the pre-commit hook sets it, since it is handed every YAML "
                             "file of a repository")
    parser.add_argument("--jobs", "-j", type=int, metavar="N",
                        help="processes that parse in parallel (default: one per core for many files)")
    parser.add_argument("--model-config", action="append", default=[], metavar="DIR_OR_FILE",
                        help="config.json of models outside the catalog: a file (for every such model) or a directory "
                             "of <org>/<name>/config.json; may be repeated")
    parser.add_argument("--no-hub", dest="hub", action="store_false",
                        help="do not fetch config.json of models outside the catalog from the Hugging Face Hub "
                             "(also off when HF_HUB_OFFLINE=1: then only the local Hugging Face cache is read)")
    parser.add_argument("--hub-timeout", type=float, default=HUB_TIMEOUT_SECONDS, metavar="SECONDS",
                        help="timeout of one Hub request (default %(default)s)")
    parser.add_argument("--config", metavar="FILE",
                        help="YAML: {rules: {<rule>: {enforcement: mandatory|advisory|disabled, <setting>: value}}}")
    return parser


def load_config(path: str | None) -> Config:
    if path is None:
        return Config()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{line}: invalid YAML: {error.problem}") from None
    try:
        return Config.from_mapping(raw)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None


def main(argv: Sequence[str] | None = None, prog: str = MODULE_PROG) -> int:
    args = _parser(prog).parse_args(argv)
    # A one-shot run builds millions of small acyclic objects (the parsed YAML); the cyclic garbage collector would
    # rescan them again and again for nothing (about a third of the parse time), so it stays off while we run.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        configure(ModelConfigs())  # in-process callers (tests, the pre-commit hook) start the next run clean
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    try:
        sources = ModelConfigs(args.model_config, hub=args.hub, timeout_seconds=args.hub_timeout)
        sources.validate()
        configure(sources)
        config = load_config(args.config)
        coverage = Coverage()
        findings = check_paths(args.paths, config, jobs=args.jobs, skip_non_kubernetes=args.skip_non_kubernetes,
                               coverage=coverage)
    except (InputError, ConfigError, ModelConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INPUT
    findings = sorted(findings, key=lambda f: (
        f.file, f.line, f.resource["namespace"], f.resource["kind"], f.resource["name"], f.enforcement != "mandatory",
        f.policy))
    if args.format == "json":
        report = format_json(findings)
    elif args.format == "sarif":
        report = format_sarif(findings, all_rules().values())
    elif args.format == "github":
        report = format_github(findings, coverage.summary())
    else:
        report = format_text(findings, coverage.summary())
    try:
        print(report, flush=True)
    except BrokenPipeError:
        # A reader that stopped early (`| head`) is no failure of the check: the verdict stays in the exit status,
        # and the rest of the output goes nowhere instead of into a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_MANDATORY if any(f.enforcement == "mandatory" for f in findings) else EXIT_OK
