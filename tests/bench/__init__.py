"""Benchmarks, run by `make bench` (never collected as tests). Each bench_*.py has a main()."""
