"""The simulation's clock and event loop: SimPy, with the shortcuts the hot path takes (``simpy_adapter``).

It sits below the buffers, whose flags schedule their arrival on it, and the engine, whose pipes and issue
streams run on it (docs/architecture.md, "Which way imports go").
"""
