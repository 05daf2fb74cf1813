"""Cluster add-ons as Helm releases of their upstream charts at pinned versions (builders/addons.py)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from vllm_pulumi.components.builders.addons import AddonRelease
from vllm_pulumi.components.kube import inherited_depends_on


class HelmAddon(pulumi.ComponentResource):
    """One upstream chart. When the stack marks the add-on as already installed, nothing is created."""

    TYPE = "vllm-pulumi:index:HelmAddon"
    release: k8s.helm.v3.Release | None

    def __init__(self, name: str, addon: AddonRelease, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        chart = addon.chart
        self.release = None
        if addon.install:
            self.release = k8s.helm.v3.Release(
                name,
                name=chart.release,
                chart=chart.chart,
                version=chart.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository) if chart.repository else None,
                namespace=chart.namespace,
                create_namespace=True,
                values=addon.values,
                # Roll back a failed install instead of leaving half a release; CRDs must be there for what follows.
                atomic=True,
                opts=pulumi.ResourceOptions(parent=self, depends_on=inherited_depends_on(opts)),
            )
        self.register_outputs({"installed_by_stack": addon.install, "chart_version": chart.version})


class GpuOperator(HelmAddon):
    TYPE = "vllm-pulumi:index:GpuOperator"


class Keda(HelmAddon):
    TYPE = "vllm-pulumi:index:Keda"


class LwsController(HelmAddon):
    TYPE = "vllm-pulumi:index:LwsController"


ADDON_CLASSES: dict[str, type[HelmAddon]] = {"gpu-operator": GpuOperator, "keda": Keda, "lws": LwsController}
