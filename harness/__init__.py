"""ctxsim's simulator, as packages that build on each other in one direction.

Read from the bottom up; a package imports only those listed before it (at module level or inside a
function; ``if TYPE_CHECKING:`` blocks aside), and each package's docstring names exactly which
(``May import:``). tests/core/test_import_graph.py keeps both true.

1. ``files``: how ctxsim reads and writes files (all-or-nothing writes, strict JSON, shipped data).
2. ``model``: the conversation a strategy sends and the trace a session is recorded in.
3. ``provider``: what the API does with a request: tokens, cache, price, latency, rejections.
4. ``llm``: the side calls a strategy makes, answered by a simulated model or the live one.
5. ``strategies`` (``ctxsim.strategies``, beside this package): every context strategy.
6. ``retention``: which facts a session needs, where they are at a probe, what losing them costs.
7. ``replay``: one replay of a trace through a strategy: the engine loop and what it needs.
8. ``fidelity``: a replay of a real log against what its API billed.
9. ``importers``: third-party agent logs turned into traces.
10. ``synth``: synthetic sessions shaped like real logs.
11. ``calibration``: the simulated model's constants fitted to real logs and live calls.
12. ``sweep``: grids of runs over sessions, and what they answer.
13. ``validation``: the field's published results reproduced (``ctxsim reproduce``).
14. ``report``: Markdown, HTML and figures for a design review.
15. ``testing``: the property-test kit for any strategy.
16. ``cli``: the ``ctxsim`` command line.
"""
