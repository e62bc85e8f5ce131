"""The paper's reproduction wing: everything that exists to reproduce the paper's tables.

It sits on top of the product (``replaylens`` core and its integrations) and may import any public part of
it; nothing outside this package imports it.  Subpackages: ``experiments`` and ``reproduce`` (the
registered reproductions and their comparison tables), the paper's agents (``fitted``, ``learned``,
``persistent``, ``controllers``, ``operators``), ``substrates`` (synthetic and public-data executors),
``data`` (the verified public data sets), ``tools`` (the closed-loop tool environments), ``joint`` and
``memory_audit`` (the LLM challenge designs) and ``cli`` (``replaylens paper ...``).
"""
