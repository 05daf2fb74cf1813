"""vLLM-on-Kubernetes policies: pure rules over manifests, and two thin shells around them.

- ``registry``: each rule's name, description, enforcement, severity, why, fix and settings (docs/policies.md is
  generated from it by ``docs``).
- ``workload`` / ``facts``: what a manifest says (vLLM servers, flags, model, GPU, probes) and what the runtime layer
  derives from it (startup budget, KV-cache plan).
- ``rules_workload`` (one object at a time) and ``rules_stack`` (autoscalers, Services and monitors against the pods).
- ``engine``: run rules with a config and exemptions; ``loader`` / ``offline`` / ``cli`` / ``check``: the offline
  checker (the ``vllm-pulumi-check`` command, ``python -m policies.check``); ``report``: its output formats (text,
  JSON, SARIF, GitHub annotations); ``pack`` + ``__main__``: the Pulumi CrossGuard pack.
"""
