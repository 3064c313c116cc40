"""tfa-sim as a library: the functions ``tfa_sim`` exports and the ``tfa-sim`` command calls."""
