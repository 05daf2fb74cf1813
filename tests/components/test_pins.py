"""What the stacks install and what the tests run are the same versions (a simulation of LWS 0.8 proves nothing about
another release): the add-on chart pins against scripts/toolchain.versions, from which the simulated cluster's
controllers are built and the upstream CRDs are read."""

from __future__ import annotations

import pytest

from vllm_pulumi.components.builders.addons import KARPENTER_CHART, KEDA_CHART, LWS_CHART

from ..toolchain import VERSIONS_FILE, pinned_versions


@pytest.mark.parametrize(("chart_version", "pin"), [
    pytest.param(LWS_CHART.version, "LWS_VERSION", id="lws-chart-is-the-simulated-lws-controller"),
    pytest.param(KEDA_CHART.version, "KEDA_VERSION", id="keda-chart-is-the-keda-of-the-validated-crds"),
    pytest.param(KARPENTER_CHART.version, "KARPENTER_AWS_VERSION",
                 id="karpenter-chart-is-the-karpenter-of-the-validated-crds"),
])
def test_chart_pins_match_what_the_tests_run(chart_version: str, pin: str) -> None:
    assert chart_version == pinned_versions()[pin], f"{pin} in {VERSIONS_FILE.name} differs from the chart the stacks install"


def test_karpenter_core_pin_is_the_one_the_aws_provider_pin_requires() -> None:
    """The NodePool CRD (core) and the EC2NodeClass CRD (AWS provider) validate one Karpenter release together: the
    provider's go.mod names the core it is built with."""
    from ..toolchain import module_dir

    pins = pinned_versions()
    go_mod = (module_dir("github.com/aws/karpenter-provider-aws", pins["KARPENTER_AWS_VERSION"]) / "go.mod").read_text()
    required = [line.split()[1] for line in go_mod.splitlines() if line.strip().startswith("sigs.k8s.io/karpenter ")]
    assert required == [f"v{pins['KARPENTER_VERSION']}"], (required, pins["KARPENTER_VERSION"])
