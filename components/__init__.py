"""What `pulumi up` creates: pure builders (``builders/``: plain Kubernetes dicts, no pulumi import), composed once
per stack (``composition.compose_stack``: every object by stage and component, the stack's labels applied over
them), and thin ComponentResource shells that register that composition (``stack.VllmStack``,
``service.VllmService``, ``store.ModelStore``, ``autoscaler.QueueAutoscaler``, ``observability.Observability``,
``addons.GpuOperator`` / ``Keda`` / ``LwsController``, ``nodes.GpuNodePool``). ``manifests.build_manifests`` returns
the same composition's Kubernetes objects.

Builders by object: ``serving`` (Deployment / LeaderWorkerSet, PDB) around ``pod`` (the vLLM containers),
``placement`` (where a pod on a GPU pool runs), ``karpenter`` (NodePools, EC2NodeClasses), ``nodes`` (EKS managed
node groups), ``storage``, ``network``, ``autoscaling``, ``observability``, ``addons``; ``labels`` holds the
recommended labels and the labelling pass.

Nothing is imported here, so ``vllm_pulumi.components.manifests`` stays importable without the Pulumi SDK's cost.
"""
