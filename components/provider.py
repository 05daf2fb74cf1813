"""The Kubernetes provider for a stack's cluster mode: render to a directory, a kubeconfig, or an EKS cluster."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from vllm_pulumi.runtime.spec import ClusterSpec, EksCluster, KubeconfigCluster, RenderCluster


def eks_kubeconfig(cluster_name: str, region: str, endpoint: str, certificate_authority: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (no long-lived credentials in state)."""
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {
            "server": endpoint, "certificate-authority-data": certificate_authority}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [{"name": cluster_name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
            "interactiveMode": "Never",
        }}}],
    }, sort_keys=True)


@dataclass
class ClusterConnection:
    provider: k8s.Provider
    aws_provider: aws.Provider | None = None
    cluster_security_group_id: pulumi.Output[str] | None = None

    @property
    def providers(self) -> list[pulumi.ProviderResource]:
        return [self.provider] + ([self.aws_provider] if self.aws_provider is not None else [])


def build_provider(cluster: ClusterSpec) -> ClusterConnection:
    if isinstance(cluster, RenderCluster):
        return ClusterConnection(k8s.Provider("k8s", render_yaml_to_directory=cluster.directory))
    if isinstance(cluster, KubeconfigCluster):
        return ClusterConnection(k8s.Provider("k8s", kubeconfig=cluster.kubeconfig, context=cluster.context))
    assert isinstance(cluster, EksCluster)
    aws_provider = aws.Provider("aws", region=cluster.region)
    found = aws.eks.get_cluster_output(name=cluster.cluster_name,
                                       opts=pulumi.InvokeOutputOptions(provider=aws_provider))
    kubeconfig = pulumi.Output.all(found.endpoint, found.certificate_authorities[0].data).apply(
        lambda values: eks_kubeconfig(cluster.cluster_name, cluster.region, values[0], values[1])
    )
    security_group = found.vpc_config.cluster_security_group_id
    return ClusterConnection(k8s.Provider("k8s", kubeconfig=kubeconfig), aws_provider, security_group)
