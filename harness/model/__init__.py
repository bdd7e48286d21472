"""The model every layer shares: the conversation a strategy sends (blocks, messages, a persistent
history, requests: ``conversation``), the trace format a session is recorded in (``trace``), many
needles found in one pass (``textmatch``) and the files a prompt @-mentions (``mentions``).

May import: files.
"""
