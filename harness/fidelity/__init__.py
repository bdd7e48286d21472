"""A replay of a real log against what its API billed: the log's own calls (``recorded``), the sizes
its growth measured (``measured``), the cache misses it shows (``cache_misses``), the call-by-call
comparison (``compare``) and what a run on an imported trace says about its bill (``billcheck``).

May import: files, model, provider, llm, strategies, retention, replay.
"""
