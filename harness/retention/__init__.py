"""Task retention: the facts and probes a session has (planted, or derived from its content:
``probes``), where each needed fact is at a probe and what that is worth (``scoring``, ``gist``,
``probe_scoring``), the needs at risk that tell a strategy that keeps from one that cuts blind
(``needs``, with their intervals in ``proportions``), and the cost of forgetting (``recovery``).

May import: files, model, llm.
"""
