"""desched: a Kubernetes descheduler."""

__version__ = "0.1.0"
