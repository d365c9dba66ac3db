"""The load generator: its own process (python -m console.sweep.loadgen), on the console's machine or on the GPU
host, and the caller's side of it."""
