"""desched.kube: the transport to the Kubernetes API (raw bytes in and out, auth, rate limit)."""
