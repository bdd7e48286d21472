"""NovaCode, the seed's context system (spec/novacode.md), one module per layer.

Context layers (sections 1, 2, 6): ``spill`` (N-SPILL), ``accounting`` (N-COMP-5), ``compaction``
(triggers and tail choice), ``breaker`` (N-COMP-4), ``restore`` (N-COMP-11), ``caching`` (N-CACHE),
``environment`` (N-COMP-12), wired by ``strategy`` (class :class:`~ctxsim.strategies.novacode.strategy.NovaCode`, name ``novacode``).
Memory layers (sections 3–5): ``instructions``, ``memory``, ``lock``, ``transcript``, glued by
``memory_layer``. Nothing is imported here, so loading one layer does not load the others.
"""
