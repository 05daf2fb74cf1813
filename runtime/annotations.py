"""Annotations this project writes on the workloads it renders, so policies read facts instead of guessing.

Builders write them on the workload (Deployment / LeaderWorkerSet) metadata and its pod template (the pool facts of
the rollout on the workload only: on the template a pool resize would restart every pod); the policy rules read
them back. Manifests written by others simply lack them, and the rules then fall back to `--model` / the
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
"""Where the weights are read from (a runtime/planning/startup.py StorageKind), for the startup budget."""
STARTUP_BUDGET_SECONDS = f"{PREFIX}/startup-budget-seconds"
"""The budget the startup probe was sized for."""
POLICY_EXEMPT = f"{PREFIX}/policy-exempt"
"""Comma-separated policy names that do not apply to this object (an exemption, written where it is reviewed)."""
NODE_POOL = f"{PREFIX}/node-pool"
"""The pool the serving pods land on (a node pool, stated nodes, or an assumed pool)."""
POOL_MAX_NODES = f"{PREFIX}/pool-max-nodes"
"""Nodes that pool can have at most (EKS max_size, the stated count, or the count the planner assumed)."""
NODE_GPUS = f"{PREFIX}/node-gpus"
"""GPUs of one node of that pool."""
MAX_REPLICAS = f"{PREFIX}/max-replicas"
"""Replicas at max scale (autoscaling.max_replicas, or replicas)."""
REPLICA_CAPACITY = f"{PREFIX}/replica-capacity"
"""Replicas of this workload the pool holds at max scale beside everything else on it (GPUs, CPU, memory and disk):
more than max-replicas means room for a surge replica."""
