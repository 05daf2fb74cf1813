"""The fixtures the end-to-end tests share: the simulated cluster (`cluster`), the bare control plane (`plane`: etcd
and kube-apiserver, no controllers) and a runnable project copy (`project`). The harness they start is in
tests/e2e/harness/.

A test (or a module, through pytestmark) that needs the cluster started otherwise says how with the `cluster_options`
marker: keyword arguments of harness.cluster.simulated_cluster (pod_ready_delay_milliseconds, running_while_loading);
`crd_prefix` to install only the CRD files whose name starts with it (default: every CRD of tests/schema.py's
crd_files()); `keda=True` to start KEDA in it (harness/keda.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..schema import crd_files
from .harness.cluster import SimulatedCluster, simulated_cluster
from .harness.control_plane import ControlPlane, control_plane
from .harness.engine import TOOLS, copy_project
from .harness.keda import start_keda


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster_options(**options): how the `cluster` fixture starts the simulated cluster "
        "(tests/e2e/conftest.py)")


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SimulatedCluster]:
    """A fresh simulated cluster in tmp_path/cluster, stopped after the test."""
    marker = request.node.get_closest_marker("cluster_options")
    options = dict(marker.kwargs) if marker else {}
    prefix = options.pop("crd_prefix", "")
    keda = options.pop("keda", False)
    crds = [path for path in crd_files() if path.name.startswith(prefix)]
    with simulated_cluster(tmp_path / "cluster", crd_files=crds, **options) as running:
        if keda:  # KEDA's operator, metrics adapter and admission webhooks
            start_keda(running, tmp_path / "cluster")
        yield running


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver with the upstream CRDs installed, shared by a module's tests."""
    with control_plane(TOOLS, tmp_path_factory.mktemp("control-plane")) as running:
        running.install_crds(crd_files())
        yield running


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runnable copy of the project (its own stacks, state and venv link), shared by a module's tests."""
    return copy_project(tmp_path_factory.mktemp("project"))
