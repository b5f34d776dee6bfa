"""The namespace rule of descheduler plugin args (``namespaces: {include: [...], exclude: [...]}``).

With ``include``, only the listed namespaces are considered; with ``exclude``, every namespace but
the listed ones; with neither, every namespace. (Upstream's validation refuses both at once; were
both given, a namespace must be included and not excluded.) One home for the rule: plugin args,
the plugins' pod selectors and the example plugin all use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

NamespaceRule = Callable[[str], bool]


def namespace_rule(include: Iterable[str] | None, exclude: Iterable[str] | None) -> NamespaceRule | None:
    """Whether a namespace is allowed, or ``None`` when every namespace is (hot loops test for it)."""
    included = frozenset(include or ())
    excluded = frozenset(exclude or ())
    if not included and not excluded:
        return None
    if not excluded:
        return included.__contains__

    def allowed(namespace: str) -> bool:
        if included and namespace not in included:
            return False
        return namespace not in excluded

    return allowed
