"""Images: every image pinned, and vllm-openai images at the release these rules are written for."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import POD_KINDS, SERVING_KINDS
from vllm_pulumi.policies.pods import image_tag
from vllm_pulumi.policies.rule_types import Rule, Violation, rule
from vllm_pulumi.policies.workload import Resource
from vllm_pulumi.runtime.spec.engine import MIN_VLLM_VERSION, parse_version


@rule("image-pinned", group="Images", enforcement="mandatory", severity="medium", kinds=POD_KINDS)
def image_pinned(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """Every container image has a version tag or a digest, never none or :latest.

    Why: An unpinned image changes under a running deployment: a node that pulls later runs another vLLM with other
    flags, defaults and metrics than the ones these rules checked.

    Fix: Pin the image, e.g. vllm/vllm-openai:v0.33.0 (or @sha256:...).
    """
    for template in res.templates:
        for container in template.all_containers:
            image = container.get("image")
            if not isinstance(image, str) or not image:
                continue
            if "$" in image or "{{" in image:
                yield Violation(f"cannot check whether container {container.get('name')!r} is pinned: image {image!r} "
                                "is a template placeholder", "check the manifest after substitution",
                                cannot_check=True)
                continue
            _, tag, digest = image_tag(image)
            if digest:
                continue
            if tag is None or tag == "latest":
                yield Violation(f"container {container.get('name')!r}: image {image!r} is not pinned "
                                f"({'no tag' if tag is None else ':latest'})",
                                "use a version tag or a digest")


@rule("vllm-image-version", group="Images", enforcement="advisory", severity="low", kinds=SERVING_KINDS)
def vllm_image_version(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """The vllm/vllm-openai image is v0.33 or newer, the release these rules (flags, defaults, metric names) are written
    for.

    Why: Older releases lack --shutdown-timeout and export other metric names, so drain and autoscaling settings that
    pass here behave differently.

    Fix: Use vllm/vllm-openai:v0.33.0 or newer.
    """
    for server in res.servers:
        image = server.container.get("image")
        if not isinstance(image, str):
            continue
        repository, tag, _ = image_tag(image)
        if not tag or "vllm-openai" not in repository:
            continue  # other images' tags are their own release numbers, not vLLM's
        try:
            version = parse_version(tag)
        except ValueError:
            continue
        if version[:2] < MIN_VLLM_VERSION:
            yield Violation(f"{server.where}: image {image} is vLLM {tag}, older than 0.33",
                            "use vllm/vllm-openai:v0.33.0")


RULES: tuple[Rule, ...] = (image_pinned, vllm_image_version)
"""This topic's rules, in the order the registry lists them."""
