"""One replay of a trace through a strategy. ``engine`` is the loop (one pass over the events, no
I/O, no display); around it: the provider side and seed of a run (``runconfig``), what is built
before the loop (``run_setup``), the run's real directory (``rundirs``), side calls billed like any
call (``side_calls``), trace events as the strategy sees them (``events``), read-backs
(``readback``), and after the loop the rows, metrics and provenance of the result (``call_rows``,
``results``, ``metrics``, ``provenance``); ``setting`` says which options override a recorded one.

May import: files, model, provider, llm, strategies, retention.
"""
