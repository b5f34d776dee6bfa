"""Scheduling knowledge: descheduler's node fit (NodeFit: a subset of kube-scheduler's filters, with
descheduler's own semantics), kube-scheduler's scoring, placement simulation."""
