"""``desched validate``: the policy file loaded as ``run`` and ``simulate`` load it (the in-tree
plugins' registry, every field checked), then written back with its defaults filled in."""

from __future__ import annotations

from typing import Any

from desched.api.policy import load_policy_file
from desched.plugins import default_registry


def normalised_policy(path: str) -> dict[str, Any]:
    """The policy at ``path`` with every default filled in (a UserError names a wrong field);
    loading it logs its warnings (policy.warnings), once each."""
    return load_policy_file(path, default_registry()).normalised()
