"""What `pulumi up` creates: pure builders (``builders/``, ``manifests.py``: plain Kubernetes dicts, no pulumi import)
and thin ComponentResource shells that register those dicts (``stack.VllmStack``, ``service.VllmService``,
``store.ModelStore``, ``autoscaler.QueueAutoscaler``, ``observability.Observability``, ``addons.GpuOperator`` /
``Keda`` / ``LwsController``, ``nodes.GpuNodePool``).

Nothing is imported here, so ``vllm_pulumi.components.manifests`` stays importable without the Pulumi SDK's cost.
"""
