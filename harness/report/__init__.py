"""Reports for design reviews: ``build`` writes report.md, index.html and figures from a sweep's
results, out of sections (``content``, ``needs_sections``, ``tuning_sections``, ``grid_checks``) and
figures (``figures``, ``tuning_figures``), rendered to Markdown and HTML (``html``, ``mdtext``) with
numbers as a reader sees them (``formatting``).

May import: files, model, provider, llm, strategies, retention, replay, fidelity, importers, synth, calibration, sweep.
"""
