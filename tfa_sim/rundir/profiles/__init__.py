"""The layouts of a board's profile that tfa-sim reads, one module each (docs/profiles.md); ``tfa_sim.rundir.msprof``
finds the layout a path holds and reads it."""
