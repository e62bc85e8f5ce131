"""``replaylens paper ...``: registered as the ``paper`` command of the ``replaylens`` group through the
``replaylens.commands`` entry point, so the product CLI never imports the paper wing."""

from . import _data, _joint, _memory_audit, _reproduce, _tools  # noqa: F401  (importing registers the commands)
from ._group import paper

__all__ = ["paper"]
