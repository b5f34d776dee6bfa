"""Scheduling knowledge: node fit (kube-scheduler's filters), scoring, placement simulation."""
