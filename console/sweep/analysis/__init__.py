"""What the runs say: comparisons and their intervals, speculation's acceptance, refinements, adaptive
profiles."""
