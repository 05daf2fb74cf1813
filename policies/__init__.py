"""vLLM-on-Kubernetes policies: pure rules over manifests, and two thin shells around them.

Imported as ``vllm_pulumi.policies`` only (``python -m policies.check`` and the pack's ``__main__`` import through that
name too), so no module loads twice under two names. This file imports nothing.

- ``rules/``: the rules, one module per topic, each exporting ``RULES``; ``rule_types``: what a rule is (``Rule``,
  ``Violation``, ``Setting``); ``registry``: every rule in order (docs/policies.md is generated from it by ``docs``).
- ``workload`` (with ``values``, ``kinds``, ``pods``, ``vllm_command``, ``gpu_labels``, ``model_configs``,
  ``versions``): what a manifest says (vLLM servers, flags, model, GPU, probes); ``facts``: what the runtime layer
  derives from it (startup budget, KV-cache plan); ``label_selectors`` and ``node_pools``: what selects what, and what
  a node pool can launch, across a stack.
- ``engine``: run rules with a config and exemptions; ``loader`` / ``offline`` / ``cli`` / ``check``: the offline
  checker (the ``vllm-pulumi-check`` command, ``python -m policies.check``); ``report``: its output formats (text,
  JSON, SARIF, GitHub annotations); ``pack`` + ``aws_objects`` + ``__main__``: the Pulumi CrossGuard pack.
"""
