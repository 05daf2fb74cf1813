"""Model storage: the volume the weights are read from is mounted read-only."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vllm_pulumi.policies.kinds import SERVING_KINDS
from vllm_pulumi.policies.pods import env_by_name
from vllm_pulumi.policies.rule_types import Rule, Violation, rule
from vllm_pulumi.policies.values import mapping, sequence
from vllm_pulumi.policies.vllm_command import is_vllm_image
from vllm_pulumi.policies.workload import Resource, Server


@rule("model-volume-read-only", group="Storage", enforcement="mandatory", severity="medium", kinds=SERVING_KINDS)
def model_volume_read_only(res: Resource, settings: Mapping[str, Any]) -> Iterator[Violation]:
    """The volume the model is read from is mounted readOnly: mounted where --model points, or, for a Hugging Face id, a
    shared volume holding the cache it is read through (--download-dir, HF_HUB_CACHE, HF_HOME or TRANSFORMERS_CACHE
    under the mount).

    Why: Weights are shared by every replica; a writable mount lets one pod corrupt the store for all, and ReadOnlyMany
    PVCs need read-only mounts to bind on several nodes.

    Fix: Set readOnly: true on the model volumeMount (download into it from a separate hydration Job).
    """
    for server in res.servers:
        paths = model_read_paths(server)
        if not paths:
            continue
        containers = [server.container] + [
            c for t in res.templates if t.role == "worker" and t is not server.template for c in t.containers
            if is_vllm_image(c.get("image"))
        ]
        for container in containers:
            for mount in sequence(container.get("volumeMounts")):
                mount = mapping(mount)
                path = str(mount.get("mountPath", "")).rstrip("/")
                read = next(((where, how) for where, how in paths if path and (where == path or
                                                                                where.startswith(path + "/"))), None)
                if read is None:
                    continue
                where, how = read
                template = next((t for t in res.templates if container in t.containers), server.template)
                volume = mapping(template.volume(str(mount.get("name"))))
                if how != "path" and ("emptyDir" in volume or not volume):
                    continue  # a cache of the pod's own: nothing shared to protect
                claim_read_only = mapping(volume.get("persistentVolumeClaim")).get("readOnly") is True
                if mount.get("readOnly") is not True and not claim_read_only:
                    if how == "path":
                        yield Violation(
                            f"container {container.get('name')!r}: the model {where} is read from volume "
                            f"{mount.get('name')!r} mounted writable at {path}",
                            f"set readOnly: true on the {mount.get('name')!r} volumeMount",
                        )
                    else:
                        yield Violation(
                            f"container {container.get('name')!r}: the model {server.command.model_ref} is read through "
                            f"the Hugging Face cache at {where} ({how}) on shared volume {mount.get('name')!r}, "
                            f"mounted writable at {path}",
                            f"set readOnly: true on the {mount.get('name')!r} volumeMount and HF_HUB_OFFLINE=1 in the "
                            "env; fill the cache from a separate download Job",
                        )


HF_CACHE_ENV = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "TRANSFORMERS_CACHE")
"""Environment variables that move the Hugging Face cache vLLM downloads into and reads from, most specific first."""


def model_read_paths(server: Server) -> list[tuple[str, str]]:
    """(path, how) the model's weights are read from: its local path (how ``path``), or for a Hub id the cache
    directories set by --download-dir or the Hugging Face env variables (how names the setting)."""
    ref = server.command.model_ref or ""
    if ref.startswith("/"):
        return [(ref.rstrip("/"), "path")]
    if not ref or "://" in ref:
        return []
    paths = []
    download_dir = server.command.value("download-dir")
    if download_dir and download_dir.startswith("/"):
        paths.append((download_dir.rstrip("/"), "--download-dir"))
    env = env_by_name(server.container)
    for name in HF_CACHE_ENV:
        value = mapping(env.get(name)).get("value")
        if isinstance(value, str) and value.startswith("/"):
            paths.append((value.rstrip("/"), name))
    return paths


RULES: tuple[Rule, ...] = (model_volume_read_only,)
"""This topic's rules, in the order the registry lists them."""
