"""What a run is, checked before anything runs: the config and its legality, the chip preset, unit
names, the work a config asks for, blocks and masks, instruction costs, the error kinds and the input guards."""
