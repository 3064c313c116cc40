"""The SimPy model of the TFA kernel on a chip: pipes, GM, block programs, the chip loop."""
