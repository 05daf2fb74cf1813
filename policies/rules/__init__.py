"""The rules, one module per topic. Each module exports its rules as ``RULES`` (a tuple of ``rule_types.Rule``, each
also callable as its check function); ``policies.registry`` lists the modules and builds the one ``RULES`` mapping the
pack, the offline checker and docs/policies.md read. Importing a topic module registers nothing.

Per object: ``probes``, ``drain``, ``rollout``, ``memory_and_cpu``, ``gpus`` (requests and parallelism), ``capacity``
(KV cache), ``placement``, ``storage``, ``images``, ``multi_node``, ``observability``, ``security``,
``flags_and_metrics``, ``coverage``. Over a whole stack: ``autoscaling``, ``observability``, ``services``,
``disruption_budgets``, ``network_policies``, ``placement`` (node pools).
"""
