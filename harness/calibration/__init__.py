"""The simulated model's constants fitted to evidence: the summariser's fact survival on real
compactions and live calls (``summariser``), recovery after a compaction on what real agents re-read
(``recovery_fit``), and which offline tokenizer stands in best for Claude's (``tokenizer_study``).

May import: files, model, provider, llm, strategies, retention, replay, fidelity, importers, synth.
"""
