#!/usr/bin/env bash
# `make demo`: the main job on the embedded default. Builds (or reuses) the offline Pulumi toolchain, logs into a
# local file backend, and runs `pulumi up --stack local` with the policy pack: the reference deployment is rendered to
# rendered/local/ (0-crd/, 1-manifest/) without any cloud or cluster. Ends with what was rendered and the capacity
# plan of the stack's model. A second run changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Only the engine and the provider: the simulated cluster is for the tests.
scripts/toolchain.sh demo
eval "$(scripts/toolchain.sh env)"
export PULUMI_BACKEND_URL="file://$PWD/.pulumi-state"
# The local stack holds no secret values: its committed encryptionsalt is for the empty passphrase.
export PULUMI_CONFIG_PASSPHRASE=""
unset PULUMI_CONFIG_PASSPHRASE_FILE
mkdir -p .pulumi-state

pulumi stack select --create --non-interactive local
pulumi up --stack local --yes --non-interactive --policy-pack policies

echo
echo "Rendered to rendered/local/:"
find rendered/local -type f | sort | sed 's/^/  /'
echo
echo "Capacity plan of the local stack:"
.venv/bin/python -m runtime plan --stack-file stacks/Pulumi.local.yaml
