"""A stand-in for `python -m sglang.bench_serving` (sglang 0.5.23) for envsnap's tests: no server, no SGLang code.

It prints the summary table and appends the result line of tests/data/runs/sglang-0.5.23-bench_serving-eagle3.*
(composed with 0.5.23's own format calls), and names the result file the way sglang 0.5.23
sglang/benchmark/serving.py:1927-1961 does: `--output-file`, or else
`{backend}_{MMDD}_{num_prompts}_{random_input_len}_{random_output_len}.jsonl` for the random datasets and
`{backend}_{MMDD}_{num_prompts}_{dataset_name}.jsonl` otherwise, in the working directory, opened for append.
"""
import argparse
import json
import os
from datetime import datetime

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "runs")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="sglang")
    parser.add_argument("--dataset-name", default="sharegpt")
    parser.add_argument("--num-prompts", type=int, default=1000)
    parser.add_argument("--random-input-len", type=int, default=1024)
    parser.add_argument("--random-output-len", type=int, default=1024)
    parser.add_argument("--output-file")
    parser.add_argument("--scale", type=float, default=1.0, help="test knob: multiply the throughputs")
    args = parser.parse_args()
    with open(os.path.join(RUNS, "sglang-0.5.23-bench_serving-eagle3.txt")) as handle:
        print(handle.read(), end="")
    with open(os.path.join(RUNS, "sglang-0.5.23-bench_serving-eagle3.jsonl")) as handle:
        result = json.loads(handle.readline())
    for key in ("output_throughput", "input_throughput", "total_throughput", "request_throughput"):
        result[key] *= args.scale
    result.update(backend=args.backend, dataset_name=args.dataset_name)
    if args.output_file:
        name = args.output_file
    else:
        now = datetime.now().strftime("%m%d")
        if args.dataset_name.startswith("random"):
            name = f"{args.backend}_{now}_{args.num_prompts}_{args.random_input_len}_{args.random_output_len}.jsonl"
        else:
            name = f"{args.backend}_{now}_{args.num_prompts}_{args.dataset_name}.jsonl"
    with open(name, "a") as handle:
        handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
