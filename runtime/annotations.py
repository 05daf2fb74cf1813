"""Annotations this project writes on the workloads it renders, so policies read facts instead of guessing.

Builders write them on the workload (Deployment / LeaderWorkerSet) metadata and its pod template; the policy rules
read them back. Manifests written by others simply lack them, and the rules then fall back to `--model` / the
`nvidia.com/gpu.product` selector, or report "cannot check".
"""

PREFIX = "vllm-pulumi.dev"
MODEL = f"{PREFIX}/model"
"""Catalog id or Hugging Face id of the served model."""
MODEL_CONFIG = f"{PREFIX}/model-config"
"""JSON of the config.json fields the planner reads (for models outside the catalog)."""
GPU = f"{PREFIX}/gpu"
"""GPU catalog id."""
STORAGE_KIND = f"{PREFIX}/storage-kind"
"""Where the weights are read from (a runtime.startup.StorageKind), for the startup budget."""
STARTUP_BUDGET_SECONDS = f"{PREFIX}/startup-budget-seconds"
"""The budget the startup probe was sized for."""
POLICY_EXEMPT = f"{PREFIX}/policy-exempt"
"""Comma-separated policy names that do not apply to this object (an exemption, written where it is reviewed)."""
