"""GpuNodePool: an EKS managed node group of GPU nodes on an existing cluster (pulumi-aws)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from vllm_pulumi.components.builders.nodes import (
    NODE_ROLE_POLICY_ARNS,
    NodeGroupDescription,
    launch_template_args,
    node_group_args,
    node_role_assume_policy,
    placement_group_args,
)


class GpuNodePool(pulumi.ComponentResource):
    """NVIDIA AMI, the GPU taint, a root disk sized for the vLLM image, an IAM role when none is given, and for
    multi-node pools EFA interfaces plus a cluster placement group (both through the launch template)."""

    node_group: aws.eks.NodeGroup

    def __init__(
        self,
        name: str,
        description: NodeGroupDescription,
        *,
        cluster_security_group_id: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("vllm-pulumi:index:GpuNodePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role_arn: pulumi.Input[str]
        attachments: list[pulumi.Resource] = []
        if description.node_role_arn is not None:
            role_arn = description.node_role_arn
        else:
            role = aws.iam.Role(f"{name}-node-role", assume_role_policy=node_role_assume_policy(), opts=child)
            attachments = [
                aws.iam.RolePolicyAttachment(f"{name}-node-role-{arn.rsplit('/', 1)[1]}", role=role.name,
                                             policy_arn=arn, opts=child)
                for arn in NODE_ROLE_POLICY_ARNS
            ]
            role_arn = role.arn
        template_args = launch_template_args(
            description, [cluster_security_group_id] if cluster_security_group_id is not None else None
        )
        placement = placement_group_args(description)
        if placement is not None:
            group = aws.ec2.PlacementGroup(f"{name}-placement", **placement, opts=child)
            template_args["placement"] = {"group_name": group.name}
        template = aws.ec2.LaunchTemplate(f"{name}-launch-template", **template_args, opts=child)
        self.node_group = aws.eks.NodeGroup(
            name,
            node_role_arn=role_arn,
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            **node_group_args(description),
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments,
                                        ignore_changes=["scalingConfig.desiredSize"]),
        )
        self.register_outputs({"node_group_name": self.node_group.node_group_name})
