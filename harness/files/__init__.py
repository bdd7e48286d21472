"""How ctxsim reads and writes files: every write all or nothing (``atomic``), users' JSON read
strictly with every refusal located (``strictjson``), the data the package ships (``bundled``), file
names made safe from ids in logs (``filenames``), optional dependencies named by their extra (``extras``).

May import: nothing of ctxsim.
"""
