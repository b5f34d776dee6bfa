"""Kubernetes semantics as pure functions over the slim records of :mod:`desched.k8s.objects`.

One home per rule: quantities (:mod:`.quantity`), pod/node resources (:mod:`.resources`), label
selectors (:mod:`.labels`), node affinity (:mod:`.affinity`), taints (:mod:`.taints`), pod facts
and QoS (:mod:`.pods`), priority (:mod:`.priority`), node facts (:mod:`.nodes`). Import the
submodule you need; this package re-exports nothing.
"""
