"""Grids of runs over sessions and what they answer: the grid (``grid``), its run keys (``keys``),
how runs become tasks and where they run (``plan``, ``executors``), the results store and what it
covers (``store``, ``coverage``, ``columns`` for the Parquet export), one row per configuration with its Pareto front and
recommendation (``analysis``), how sure a figure is (``uncertainty``), and which setting to ship
(``tuning``).

May import: files, model, provider, llm, strategies, retention, replay, fidelity, importers, synth, calibration.
"""
