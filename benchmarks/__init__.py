"""Side-by-side measurements, each run from the repo root as `python -m benchmarks.<name>` (`--help` says how):

search_scale  search and serving at any size: cold `ticketsim search`, latency, the page under load, memory, `index add`
approximate   a large index's graph against the exact search: recall@10, latency, its build and additions; float16
ingest        tickets from a CSV to a searchable index at the size claimed, `index add` into it, where a build's time goes
encoding      channel S's encoding per backend and thread count, the ranking of each backend, a float16 copy to carry
pipeline_time the pipeline's time in a clean clone: `dvc repro` targets, each stage's process, speed goals, the suite's CPU
gpu_check     one F epoch and bulk encoding on cuda beside the CPU, on a bare GPU machine

common.py holds what the benchmarks and the tests share. One-off studies are reports: reports/studies/.
"""
