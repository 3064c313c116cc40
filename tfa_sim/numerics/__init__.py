"""The numbers: every rounding point of the kernel, the goldens and the comparison rule, the inputs, the
intermediates registry and the BLAS threads."""
