"""On-chip buffers: capacity accounting (``capacity``) and, in the engine, slot pools."""
