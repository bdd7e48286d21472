"""Grids of runs over sessions and what they answer: the grid, its run keys, executors and stored
results (``grid``, ``plan``, ``columns``), one row per configuration with its Pareto front and
recommendation (``analysis``), how sure a figure is (``uncertainty``), and which setting to ship
(``tuning``).

May import: files, model, provider, llm, strategies, retention, replay, fidelity, importers, synth, calibration.
"""
