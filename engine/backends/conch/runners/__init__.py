"""Model runners: the contract the scheduler asks of one (runner.py), the flattened runner and the HF one."""
