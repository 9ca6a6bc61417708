"""Kubernetes cluster models: nodes of priced instance types bought and released by Cluster
Autoscaler (:mod:`.cluster_autoscaler`), over a pool of typed node slots (:mod:`.pool`)."""
