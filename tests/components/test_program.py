"""The Pulumi program under mocks: what gets registered, under which parent, in which order, and secrets kept secret."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from vllm_pulumi.components.builders.addons import GPU_OPERATOR_CHART, KEDA_CHART, LWS_CHART
from vllm_pulumi.components.manifests import read_stack_config

from .mocking import (
    Registration,
    RecordingMonitor,
    by_type,
    plain_strings,
    run_program,
    run_program_expecting_error,
    unwrap_secrets,
)

API_KEY = "sk-test-5f1d3c0e-never-in-plain-text"
HF_TOKEN = "hf_test_b7a9e2-never-in-plain-text"
SECRETS = {"vllmApiKey": API_KEY, "hfToken": HF_TOKEN}
OUR_COMPONENTS = {
    "vllm-pulumi:index:VllmStack", "vllm-pulumi:index:GpuNodePool", "vllm-pulumi:index:GpuOperator",
    "vllm-pulumi:index:Keda", "vllm-pulumi:index:LwsController", "vllm-pulumi:index:ModelStore",
    "vllm-pulumi:index:VllmService", "vllm-pulumi:index:QueueAutoscaler", "vllm-pulumi:index:Observability",
}
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"

_RUNS: dict[str, RecordingMonitor] = {}


def run_stack(stack: str) -> RecordingMonitor:
    """One mocked run per reference stack, shared by the tests that only read it."""
    if stack not in _RUNS:
        _RUNS[stack] = run_program(read_stack_config(stack), SECRETS, stack=stack)
    return _RUNS[stack]


def named(monitor: RecordingMonitor, type_: str, name: str) -> Registration:
    matches = [r for r in monitor.registrations if r.type == type_ and r.name == name]
    assert len(matches) == 1, f"expected one {type_} {name}, got {[r.name for r in by_type(monitor, type_)]}"
    return matches[0]


SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
CUSTOM_TYPES = (SCALED_OBJECT, SERVICE_MONITOR, PROMETHEUS_RULE, LWS, NODE_POOL, EC2_NODE_CLASS)


def applied_objects(monitor: RecordingMonitor) -> list[dict[str, Any]]:
    """Every Kubernetes object the program applies: ConfigGroup documents and custom resources (not Secrets)."""
    result = [o for r in by_type(monitor, CONFIG_GROUP) for o in objs(r)]
    for registration in monitor.registrations:
        if registration.type in CUSTOM_TYPES:
            inputs = registration.inputs
            result.append({"apiVersion": inputs["apiVersion"], "kind": inputs["kind"], "metadata": inputs["metadata"],
                           "spec": inputs["spec"]})
    return result


def objs(registration: Registration) -> list[dict[str, Any]]:
    """The objects a ConfigGroup applies (registered as a YAML stream)."""
    return [doc for doc in yaml.safe_load_all(registration.inputs["yaml"]) if doc is not None]


# ---- resource types -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("stack", "expected"), [
    pytest.param("local", {CONFIG_GROUP: 4, SCALED_OBJECT: 1, SERVICE_MONITOR: 1, LWS: 0, RELEASE: 0, NODE_GROUP: 0},
                 id="render-mode-no-addons-no-nodes"),
    pytest.param("edge", {CONFIG_GROUP: 3, SCALED_OBJECT: 1, SERVICE_MONITOR: 1, LWS: 0, RELEASE: 0, NODE_GROUP: 0},
                 id="kubeconfig-addons-marked-installed-namespace-existing"),
    pytest.param("prod", {CONFIG_GROUP: 4, SCALED_OBJECT: 1, SERVICE_MONITOR: 1, LWS: 0, RELEASE: 2, NODE_GROUP: 1},
                 id="eks-gpu-operator-and-keda"),
    pytest.param("multinode", {CONFIG_GROUP: 4, SCALED_OBJECT: 0, SERVICE_MONITOR: 1, LWS: 1, RELEASE: 2,
                               NODE_GROUP: 1}, id="eks-gpu-operator-and-lws"),
    pytest.param("karpenter", {CONFIG_GROUP: 4, SCALED_OBJECT: 1, SERVICE_MONITOR: 1, LWS: 0, RELEASE: 2,
                               NODE_GROUP: 0, NODE_POOL: 1, EC2_NODE_CLASS: 1},
                 id="eks-karpenter-nodepool-instead-of-a-node-group"),
])
def test_resource_counts_per_stack(stack: str, expected: dict[str, int]) -> None:
    monitor = run_stack(stack)
    assert {type_: len(by_type(monitor, type_)) for type_ in expected} == expected


def test_kinds_in_config_groups_match_build_manifests() -> None:
    from vllm_pulumi.components.manifests import build_manifests, load_stack

    monitor = run_stack("prod")
    registered = [(o["kind"], o["metadata"]["name"]) for o in applied_objects(monitor)]
    secrets = [("Secret", r.inputs["metadata"]["name"]) for r in by_type(monitor, "kubernetes:core/v1:Secret")]
    rendered = [(o["kind"], o["metadata"]["name"]) for o in build_manifests(load_stack("prod"))]
    assert sorted(registered + secrets) == sorted(rendered)


# ---- parents --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stack", ["local", "prod", "multinode", "karpenter"])
def test_every_resource_has_one_of_our_components_as_parent(stack: str) -> None:
    monitor = run_stack(stack)
    by_urn = {r.urn: r for r in monitor.registrations}
    for registration in monitor.registrations:
        if registration.type.startswith("pulumi:providers:") or registration.type == "vllm-pulumi:index:VllmStack":
            continue
        parent = by_urn.get(registration.parent)
        assert parent is not None and parent.type in OUR_COMPONENTS, (
            f"{registration.type} {registration.name} has parent {registration.parent}")
    stack_component = by_type(monitor, "vllm-pulumi:index:VllmStack")[0]
    for registration in monitor.registrations:
        if registration.type in OUR_COMPONENTS - {"vllm-pulumi:index:VllmStack"}:
            assert registration.parent == stack_component.urn


# ---- order: nodes -> add-ons -> storage -> serving -> autoscaling -> observability ---------------------------------
def _depends(monitor: RecordingMonitor, later: Registration, earlier: Registration) -> bool:
    return earlier.urn in later.dependencies


@pytest.mark.parametrize(("stack", "model", "addons"), [
    pytest.param("prod", "llama-3-3-70b", ["gpu-operator", "keda"], id="prod-deployment"),
    pytest.param("multinode", "llama-3-1-405b", ["gpu-operator", "lws"], id="multinode-lws"),
])
def test_explicit_order(stack: str, model: str, addons: list[str]) -> None:
    monitor = run_stack(stack)
    node_group = by_type(monitor, NODE_GROUP)[0]
    releases = [named(monitor, RELEASE, addon) for addon in addons]
    storage = named(monitor, CONFIG_GROUP, f"{model}-storage")
    serving = named(monitor, CONFIG_GROUP, f"{model}-serving")
    if stack == "multinode":
        lws = named(monitor, LWS, f"{model}-serving-leaderworkerset")
        assert lws.dependencies == serving.dependencies, "the LWS waits for what the rest of serving waits for"
    observability = named(monitor, SERVICE_MONITOR, f"{model}-observability-servicemonitor")
    namespace = named(monitor, CONFIG_GROUP, "namespace")
    for release in releases:
        assert _depends(monitor, release, node_group), f"{release.name} does not wait for the GPU nodes"
        assert _depends(monitor, storage, release), f"storage does not wait for {release.name}"
        assert _depends(monitor, serving, release), f"serving does not wait for {release.name} (CRDs)"
    assert _depends(monitor, storage, namespace)
    assert _depends(monitor, serving, storage), "serving does not wait for the hydrated store"
    assert _depends(monitor, observability, serving)
    if stack == "prod":
        autoscaling = named(monitor, SCALED_OBJECT, f"{model}-autoscaling-scaledobject")
        assert _depends(monitor, autoscaling, serving)
        assert _depends(monitor, autoscaling, named(monitor, RELEASE, "keda"))


# ---- secrets --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stack", ["prod", "multinode", "karpenter"])
def test_pulumi_secrets_never_appear_in_plain_text(stack: str) -> None:
    monitor = run_stack(stack)
    for registration in monitor.registrations:
        visible = plain_strings(unwrap_secrets(registration.inputs))
        for secret in (API_KEY, HF_TOKEN):
            assert not any(secret in text for text in visible), f"{secret} in plain text in {registration.name}"


def test_secret_objects_carry_their_value_as_a_secret() -> None:
    monitor = run_stack("prod")
    secrets = {r.name: r for r in by_type(monitor, "kubernetes:core/v1:Secret")}
    assert set(secrets) == {"llama-3-3-70b-api-key", "llama-3-3-70b-hf-token"}
    assert unwrap_secrets(secrets["llama-3-3-70b-api-key"].inputs["stringData"]) == "[secret]"
    assert unwrap_secrets(secrets["llama-3-3-70b-hf-token"].inputs["stringData"]) == "[secret]"
    serving = named(monitor, CONFIG_GROUP, "llama-3-3-70b-serving")
    assert secrets["llama-3-3-70b-api-key"].urn in serving.dependencies
    deployment = next(o for o in objs(serving) if o["kind"] == "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llama-3-3-70b-api-key",
                                                                   "key": "api-key"}}} in env


def test_missing_pulumi_secret_config_fails_before_registering() -> None:
    error, monitor = run_program_expecting_error(read_stack_config("prod"), {"hfToken": HF_TOKEN}, stack="prod")
    assert "vllmApiKey" in str(error)
    assert monitor.registrations == []


# ---- providers, add-ons, nodes --------------------------------------------------------------------------------------
def test_render_mode_provider_writes_to_the_stack_directory() -> None:
    provider = by_type(run_stack("local"), "pulumi:providers:kubernetes")[0]
    assert provider.inputs["renderYamlToDirectory"] == "rendered/local"


def test_kubeconfig_mode_provider_uses_the_context() -> None:
    provider = by_type(run_stack("edge"), "pulumi:providers:kubernetes")[0]
    assert provider.inputs["context"] == "edge"


def test_eks_mode_kubeconfig_authenticates_with_aws_eks_get_token() -> None:
    provider = by_type(run_stack("prod"), "pulumi:providers:kubernetes")[0]
    kubeconfig = json.loads(provider.inputs["kubeconfig"])
    user = kubeconfig["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"][:4] == ["eks", "get-token", "--cluster-name", "ml-prod"]
    assert "us-east-1" in user["args"]
    assert by_type(run_stack("prod"), "pulumi:providers:aws")[0].inputs["region"] == "us-east-1"


@pytest.mark.parametrize(("stack", "release", "chart"), [
    pytest.param("prod", "gpu-operator", GPU_OPERATOR_CHART, id="gpu-operator"),
    pytest.param("prod", "keda", KEDA_CHART, id="keda"),
    pytest.param("multinode", "lws", LWS_CHART, id="lws-oci"),
])
def test_addon_releases_are_pinned_upstream_charts(stack: str, release: str, chart: Any) -> None:
    registration = named(run_stack(stack), RELEASE, release)
    assert registration.inputs["chart"] == chart.chart
    assert registration.inputs["version"] == chart.version
    assert registration.inputs["namespace"] == chart.namespace
    if chart.repository:
        assert registration.inputs["repositoryOpts"] == {"repo": chart.repository}
    else:
        assert "repositoryOpts" not in registration.inputs


def test_gpu_operator_on_eks_keeps_the_ami_driver() -> None:
    values = named(run_stack("prod"), RELEASE, "gpu-operator").inputs["values"]
    assert values["driver"]["enabled"] is False
    assert values["toolkit"]["enabled"] is False
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is True


def test_prod_node_group() -> None:
    monitor = run_stack("prod")
    node_group = by_type(monitor, NODE_GROUP)[0].inputs
    assert node_group["instanceTypes"] == ["p5.48xlarge"]
    assert node_group["amiType"] == "AL2023_x86_64_NVIDIA"
    assert node_group["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert node_group["capacityType"] == "ON_DEMAND"
    assert node_group["nodeRoleArn"].endswith("h100-node-role")
    assert len(by_type(monitor, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")) == 3
    template = by_type(monitor, "aws:ec2/launchTemplate:LaunchTemplate")[0].inputs
    assert template["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 200
    assert "networkInterfaces" not in template, "single-node pool: no EFA"
    assert not by_type(monitor, "aws:ec2/placementGroup:PlacementGroup")


def test_multinode_node_group_gets_efa_and_a_cluster_placement_group() -> None:
    monitor = run_stack("multinode")
    template = by_type(monitor, "aws:ec2/launchTemplate:LaunchTemplate")[0].inputs
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == 32 and {i["interfaceType"] for i in interfaces} == {"efa"}
    assert interfaces[0]["securityGroups"] == ["sg-0123456789abcdef0"]
    placement = by_type(monitor, "aws:ec2/placementGroup:PlacementGroup")[0]
    assert placement.inputs["strategy"] == "cluster"
    assert template["placement"]["groupName"] == placement.name


def test_hydration_job_is_awaited_by_default() -> None:
    storage = named(run_stack("prod"), CONFIG_GROUP, "llama-3-3-70b-storage")
    job = next(o for o in objs(storage) if o["kind"] == "Job")
    assert "pulumi.com/skipAwait" not in job["metadata"].get("annotations", {})


def test_render_mode_never_creates_helm_releases() -> None:
    raw = read_stack_config("local")
    raw["addons"] = {"gpu_operator": {"install": True}, "keda": {"install": True}}
    monitor = run_program(raw, stack="local")
    assert not by_type(monitor, RELEASE)
    assert by_type(monitor, "vllm-pulumi:index:GpuOperator"), "the component stays, marked not installed"


@pytest.mark.parametrize("stack", ["local", "edge", "prod", "multinode", "karpenter"])
def test_the_program_applies_exactly_the_built_manifests(stack: str) -> None:
    from vllm_pulumi.components.manifests import build_manifests, load_stack

    monitor = run_stack(stack)
    registered = applied_objects(monitor)
    rendered = [o for o in build_manifests(load_stack(stack)) if o["kind"] != "Secret"]
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(registered, key=key) == sorted(rendered, key=key)


def test_plan_warnings_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        run_program(read_stack_config("local"), stack="local")
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert any(message.startswith("llama-3-1-8b: 8 sequences of 32,768 tokens") for message in warnings), warnings


def test_render_mode_refuses_pulumi_secrets_and_registers_nothing() -> None:
    raw = read_stack_config("local")
    raw["models"][0]["api_key"] = {"pulumi_secret": "vllmApiKey"}
    error, monitor = run_program_expecting_error(raw, {"vllmApiKey": API_KEY}, stack="local")
    assert "vllm-pulumi:deployment.models[0].api_key.pulumi_secret" in str(error)
    assert API_KEY not in str(error)
    assert monitor.registrations == []


def test_karpenter_stack_registers_node_pools_before_the_add_ons_and_no_node_group() -> None:
    monitor = run_stack("karpenter")
    node_pool = named(monitor, NODE_POOL, "karpenter-p5-nodepool")
    node_class = named(monitor, EC2_NODE_CLASS, "karpenter-p5-ec2nodeclass")
    assert not by_type(monitor, NODE_GROUP)
    for addon in ("gpu-operator", "keda"):
        release = named(monitor, RELEASE, addon)
        assert _depends(monitor, release, node_pool) and _depends(monitor, release, node_class)
