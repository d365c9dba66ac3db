"""Every sentence pivot says about a sweep's numbers and a comparison of two runs: the one presentation module the
CLI, the Sweep pane and the report print from. The analysis (console/sweep/analysis/) decides, as data; this says it."""
