"""One run of the kernel: the stage programs on the engine (``simulation``), folded from short samples
(``fold``), or without time (``functional``); the CPUs a run may use (``parallel``)."""
