"""Small CuTe DSL kernels compiled (never run) by the SASS analyzer tests."""
