"""Every context strategy, one module (or package, ``novacode``) each, behind one protocol
(``base``), found by name (``registry``). A strategy sees what a real agent sees: it may import
only what carries no ground truth (the true token counts, the cache state and the facts live in
ctxsim.harness.provider, .replay and .retention).

May import: files, model, llm (of ctxsim.harness).
"""
