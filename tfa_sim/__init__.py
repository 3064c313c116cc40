"""tfa-sim: a bit-accurate, timed simulator of the tiled FlashAttention (TFA) kernel
of Ascend A2/A3 NPUs.  See README.md for the tour and ``tfa-sim --help``."""

__version__ = "0.1.0"
