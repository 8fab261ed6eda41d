"""What the runs say: the verdict (did the metric change, beyond noise?), the EAGLE-3 decomposition, the
mechanism from run telemetry and profiler traces, and the statistics behind them."""
