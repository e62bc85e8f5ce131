"""The catalogue of registered reproductions: each a named function returning :class:`Comparison` rows,
run under the declared tolerance policy (``_policy.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import ConfigError
from ._kinds import Kinds
from ._policy import apply_policy
from ._registry import Comparison

__all__ = ["REPRODUCTIONS", "Reproduction", "get_reproduction", "register_reproduction"]


@dataclass(frozen=True)
class Reproduction:
    """A registered reproduction."""

    name: str
    title: str
    compute: Callable[[], list[Comparison]]
    issue: str = ""
    kinds: Kinds = field(default_factory=Kinds)
    """The declared kind of every compared column, the paper's intervals and derived targets (``_kinds.py``)."""

    def run(self) -> list[Comparison]:
        """The reproduction's rows under the declared kinds' bounds and the side checks (``_policy.py``)."""
        return apply_policy(self.compute(), self.kinds)


REPRODUCTIONS: dict[str, Reproduction] = {}


def register_reproduction(name: str, title: str, issue: str = "", kinds: Kinds | None = None,
                          ) -> Callable[[Callable[[], list[Comparison]]], Callable[[], list[Comparison]]]:
    """Decorator registering a reproduction under ``name`` with its declared ``kinds``."""
    def deco(fn: Callable[[], list[Comparison]]) -> Callable[[], list[Comparison]]:
        if name in REPRODUCTIONS:
            raise ConfigError(f"reproduction {name!r} is registered twice")
        REPRODUCTIONS[name] = Reproduction(name, title, fn, issue, kinds or Kinds())
        return fn
    return deco


def get_reproduction(name: str) -> Reproduction:
    """A registered reproduction (the paper's are registered by importing ``replaylens.paper.experiments``)."""
    try:
        return REPRODUCTIONS[name]
    except KeyError:
        raise ConfigError(f"unknown reproduction {name!r}; see `replaylens paper reproduce --list`") from None
