"""vLLM on Kubernetes GPUs with Pulumi: typed spec, planner (runtime), components and policies.

Import the parts directly: ``vllm_pulumi.runtime`` (pure planning), ``vllm_pulumi.components`` (Pulumi
ComponentResources), ``vllm_pulumi.policies`` (rules over rendered manifests).
"""
