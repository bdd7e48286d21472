"""The field's published results reproduced (``ctxsim reproduce``, docs/validation.md): for each
study, the figure it published with its citation (``published``), the setup ctxsim approaches it with
and ctxsim's own figure (``studies``), and the study arms no agent ships (``arms``: The Complexity
Trap's SWE-agent history processors).

May import: files, model, provider, llm, strategies, retention, replay, fidelity, importers, synth, calibration, sweep.
"""
