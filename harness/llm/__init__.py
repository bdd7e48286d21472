"""Side calls: the interface a strategy holds for summaries, memory selection and extraction,
judging (``services``), the simulated model that answers them by default (``simulated``, with the
fact-survival model of its summaries in ``survival``), and the real model through the ``anthropic``
SDK with its recorded answers (``live``, ``render``, ``response_store``).

May import: files, model.
"""
