"""Comparing two snapshots: each as a view of readable keys, the differences between them, the nodes of
merged snapshots, and the file texts (patches) and recorded patch hunks behind them."""
