"""What the end-to-end tests run against, and nothing that is a test: the Pulumi engine in a project copy
(engine.py), etcd and kube-apiserver (control_plane.py), the simulated GPU cluster with its controllers and KWOK
nodes (cluster.py), a reference stack deployed in it (simulation.py), KEDA (keda.py), Prometheus and the vLLM metrics
stand-in (metrics.py), both together under a stack (autoscaled.py), and Karpenter with its KWOK provider
(karpenter.py). bench/ drives the same harness. The fixtures the tests share are in tests/e2e/conftest.py.
"""
