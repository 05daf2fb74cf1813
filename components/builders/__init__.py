"""Pure builders: ServingPlan / DeploymentSpec -> plain Kubernetes dicts (camelCase, deterministic, no pulumi)."""
