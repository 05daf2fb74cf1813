"""Generate docs/policies.md from the rule registry: ``python -m policies.docs [OUTPUT]`` (default docs/policies.md).

A test fails when the checked-in file differs from what this writes, so the registry stays the one source.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from vllm_pulumi.policies.gpu_labels import LABELS as GPU_LABELS
from vllm_pulumi.policies.registry import all_rules
from vllm_pulumi.policies.rule_types import CANNOT_CHECK_POLICY, Rule
from vllm_pulumi.policies.versions import FLAGS, METRICS, release

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "policies.md"
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "policies" / "corpus"
"""Real-world manifests the checker is tested on, with their sources and reviewed findings (a checkout only)."""


def _corpus_section(corpus: Path = CORPUS) -> list[str]:
    """The table of the real-world corpus: per project its manifests, what the checker finds there, and why the
    mandatory findings are right (the review in corpus/SOURCES), counted from the reviewed .expected files."""
    sources = corpus / "SOURCES"
    if not sources.is_file():
        return []
    data = yaml.safe_load(sources.read_text(encoding="utf-8"))
    lines = [
        "## Real-world manifests", "",
        "The checker is tested on vLLM manifests published by other projects (`tests/policies/corpus/`, sources with "
        "commit and licence in `corpus/SOURCES`; the findings of each file are reviewed by hand in "
        "`<file>.expected`, written by `corpus/write_expected.py`).", "",
        "| project | manifests | mandatory / advisory findings | why the mandatory ones are right |",
        "|---|---|---|---|",
    ]
    for project in data["projects"]:
        files = [row["file"] for row in data["manifests"] if row["file"].split("/")[0] == project["name"]]
        counts = {"mandatory": 0, "advisory": 0}
        for file in files:
            expected = corpus / (file + ".expected")
            for line in expected.read_text(encoding="utf-8").splitlines() if expected.is_file() else []:
                level = line.split(" ", 1)[0]
                if level in counts:
                    counts[level] += 1
        lines.append(f"| [{project['repo']}](https://github.com/{project['repo']}) | {len(files)} | "
                     f"{counts['mandatory']} / {counts['advisory']} | {project['review']} |")
    lines.append("")
    return lines


def _rule_section(rule: Rule) -> list[str]:
    lines = [
        f"### `{rule.name}`", "",
        f"**{rule.enforcement}**, severity {rule.severity}; "
        f"{'stack rule over all objects' if rule.scope == 'stack' else 'checked per object'}: "
        f"{', '.join(rule.kinds)}.", "",
        rule.description, "",
        f"*Why:* {rule.why}", "",
        f"*Fix:* {rule.fix}", "",
    ]
    if rule.settings:
        lines += ["| setting | default | meaning |", "|---|---|---|"]
        lines += [f"| `{key}` | `{s.default}` | {s.description} |" for key, s in rule.settings.items()]
        lines.append("")
    return lines


def _versions_section() -> list[str]:
    """The flags and metrics whose presence depends on the image's vLLM release (policies.versions)."""
    def when(version: tuple[int, int, int] | None) -> str:
        return release(version) if version else "-"

    lines = [
        "## vLLM versions", "",
        "Findings and fixes follow the vLLM release of the image (the tag of a `vllm-openai` image; any other image is "
        "assumed to run the pinned default, and the message says so). A fix that needs a newer release says to "
        "upgrade first.", "",
        "| flag or metric | first release | gone by default from | read from |", "|---|---|---|---|",
    ]
    lines += [f"| `--{name}` | {when(c.added)} | {when(c.removed)} | {c.source} |" for name, c in FLAGS.items()]
    lines += [f"| `{name}` | {when(c.added)} | {when(c.removed)} | {c.source} |" for name, c in METRICS.items()]
    lines.append("")
    return lines


def render() -> str:
    rules = all_rules()
    lines = [
        "# Policies", "",
        "<!-- Generated from policies/registry.py by `python -m policies.docs`; do not edit by hand. -->", "",
        "The same rules run in two shells: the Pulumi CrossGuard pack (`pulumi preview --policy-pack policies`) and "
        "the offline checker over rendered YAML (`vllm-pulumi-check PATH... [--format text|json|sarif|github] "
        "[--config FILE] [--jobs N] [--model-config DIR_OR_FILE] [--no-hub]`, also `python -m policies.check`; PATH "
        "is a file, a directory or `-` for standard input; exit 0 without mandatory findings, 1 with, 2 on "
        "unreadable input). Models outside the catalog are read from `--model-config` (a config.json, or a "
        "directory of `<org>/<name>/config.json`) and, unless `--no-hub` or `HF_HUB_OFFLINE=1`, from the Hugging "
        "Face Hub (`pip install 'vllm-pulumi[hub]'`; the usual token, cached, a timeout: `--hub-timeout`). JSON output is a list "
        "of findings: `policy`, `enforcement`, `severity`, `resource` (`apiVersion`, `kind`, `namespace`, `name`), "
        "`message`, `fix`, `file`, `line` and `document`; SARIF 2.1.0 and GitHub annotations are described in the "
        "README's \"Use in CI\".", "",
        "- **Enforcement and settings** are overridable per rule, in the pack's config (`pulumi preview "
        "--policy-pack policies --policy-pack-config FILE`) or in the offline `--config FILE`. The offline file may "
        "be YAML or the pack's JSON: CrossGuard's `all` and `enforcementLevel` spellings are understood too.", "",
        "  ```yaml", "  rules:", "    grace-covers-drain: {enforcement: advisory, margin_seconds: 20}",
        "    metrics-scraped: mandatory", "  ```", "",
        "- **Exemptions** are written on the object, where they are reviewed: the annotation "
        "`vllm-pulumi.dev/policy-exempt: rule-a,rule-b` (on the object or its pod template).",
        "- **Cannot check**: a rule that needs the model or the GPU and cannot resolve them reports an advisory "
        "\"cannot check\" finding instead of passing (in the pack, under the advisory policy "
        f"`{CANNOT_CHECK_POLICY}`). The model comes from the `vllm-pulumi.dev/model` / `model-config` annotations, "
        "`--model` or the positional model (catalog ids and their Hugging Face ids, also as the last parts of a "
        "path); the GPU from the `vllm-pulumi.dev/gpu` annotation or a node selector or required affinity on "
        f"{', '.join(f'`{label}`' for label in GPU_LABELS)} (the last through the instance facts of "
        "runtime/facts/instances.py).",
        "- **Workload kinds**: vLLM containers are found in the pod templates of Deployments, StatefulSets, Pods, "
        "LeaderWorkerSets, Jobs, CronJobs, DaemonSets and ReplicaSets, KubeRay RayService, RayCluster and RayJob "
        "(head and worker groups), and KServe InferenceService, (Cluster)ServingRuntime and LLMInferenceService. "
        "Rules about a Deployment's or LeaderWorkerSet's rollout strategy (`rollout-no-unavailable`) run on those "
        "kinds only. When the engine flags are not in the manifest (Ray Serve apps, KServe's controller-filled "
        "containers) or a vLLM container sits in a kind the checker cannot read, `vllm-workload-readable` says so, "
        "and the text summary counts the vLLM workloads checked, checked without engine flags, and not checked.", "",
        "| rule | enforcement | severity | group |", "|---|---|---|---|",
    ]
    groups: dict[str, list[Rule]] = {}
    for r in rules.values():
        groups.setdefault(r.group, []).append(r)
    lines += [f"| [`{r.name}`](#{r.name}) | {r.enforcement} | {r.severity} | {r.group} |"
              for members in groups.values() for r in members]
    lines.append("")
    lines += _versions_section()
    lines += _corpus_section()
    for group, members in groups.items():
        lines += [f"## {group}", ""]
        for r in members:
            lines += _rule_section(r)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(), encoding="utf-8")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
