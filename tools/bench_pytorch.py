#!/usr/bin/python3
"""The PyTorch baseline for aft-bench: the same model file, run by the reference model.

    /usr/bin/python3 tools/bench_pytorch.py MODEL [-p 512] [-n 32] [-c 16,128,256] [-t 1,2]
        [-r 3] [-o md|json]

Loads the .aft file (aft.modelfile) into aft.reference's AftLM and measures, under
torch.inference_mode, for each thread count (each in its own process, with OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS set to it: PyTorch's OpenMP pool and OpenBLAS's threads otherwise
oversubscribe the cores):

* pp: the parallel forward of a p-token prompt (tokens/s = p / time; it computes the logits of
  every position, as a training-style forward does);
* rerun @ c: decoding by re-running the whole prefix for each new token, as labml's sampler does:
  one forward of c tokens per generated token (tokens/s = 1 / time), at each context length c;
* stream @ c: decoding with AftStream (aft.reference), the per-layer running state, one step
  per token: n timed steps after c untimed ones.

Reports mean +- stddev over r repetitions after one warm-up, per thread count, and the best
thread count per test (docs/benchmarks.md).
Exit status: 0 success, 1 an error, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path


def int_list(text: str) -> list[int]:
    try:
        values = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, found {text!r}")
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected integers >= 0, found {text!r}")
    return values


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() == "model name":
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_model(path: str):
    import torch
    from aft.modelfile import read_file
    from aft.reference import AftLM
    contents = read_file(path)
    model = AftLM(contents.config)
    state = {name: torch.from_numpy(array.copy()) for name, array in contents.tensors.items()}
    model.load_state_dict(state)
    return model.eval(), contents.config


def timed(run, repetitions: int) -> list[float]:
    """Seconds of each of `repetitions` calls of run(), after one untimed warm-up call."""
    run()
    samples = []
    for _ in range(repetitions):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return samples


def worker(args) -> dict:
    """All tests with the thread count of this process's environment."""
    import torch
    from aft.reference import AftStream, max_positions
    torch.set_num_threads(args.threads)
    model, config = load_model(args.model)
    limit = max_positions(config)
    longest = max([args.n_prompt] + [c + args.n_gen for c in args.contexts])
    tokens = torch.randint(0, config["vocab_size"], (longest,),
                           generator=torch.Generator().manual_seed(1234))
    rows, skipped = [], []

    def fits(positions: int, name: str) -> bool:
        if limit and positions > limit:
            skipped.append(f"{name}: needs {positions} positions, the model stops at {limit}")
            return False
        return True

    def add(name: str, kind: str, context: int, tokens_per_run: int, seconds: list[float]):
        rates = [tokens_per_run / s for s in seconds]
        rows.append({"test": name, "kind": kind, "context": context, "threads": args.threads,
                     "tokens_per_second": {"mean": statistics.mean(rates),
                                           "stddev": statistics.stdev(rates) if len(rates) > 1 else 0.0},
                     "samples_tokens_per_second": rates})

    with torch.inference_mode():
        p = args.n_prompt
        if p > 0 and fits(p, f"pp{p}"):
            add(f"pp{p}", "pp", 0, p, timed(lambda: model(tokens[:p]), args.repetitions))
        for c in args.contexts:
            if c > 0 and fits(c, f"rerun @ c{c}"):
                add(f"rerun @ c{c}", "rerun", c, 1,
                    timed(lambda: model(tokens[:c])[-1], args.repetitions))
        for c in args.contexts:
            n = args.n_gen
            if n == 0 or not fits(c + n, f"stream{n} @ c{c}"):
                continue

            def stream_run():
                stream = AftStream(model)
                for t in tokens[:c]:
                    stream.step(int(t))
                start = time.perf_counter()
                for t in tokens[c:c + n]:
                    stream.step(int(t))
                return time.perf_counter() - start

            stream_run()   # warm-up
            add(f"stream{n} @ c{c}", "stream", c, n,
                [stream_run() for _ in range(args.repetitions)])
    return {"threads": args.threads, "results": rows, "skipped": skipped}


def run_workers(args) -> dict:
    import torch
    _, config = load_model(args.model)   # fail early, in this process, on a bad file
    report = {"tool": "bench_pytorch", "torch": torch.__version__, "python": platform.python_version(),
              "cpu": cpu_model(), "logical_cpus": os.cpu_count(), "model": {"path": args.model, **config},
              "repetitions": args.repetitions, "results": [], "skipped": []}
    for threads in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
        command = [sys.executable, __file__, args.model, "--worker", "-t", str(threads),
                   "-p", str(args.n_prompt), "-n", str(args.n_gen), "-r", str(args.repetitions),
                   "-c", ",".join(map(str, args.contexts))]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the {threads}-thread run failed:\n{done.stderr}")
        part = json.loads(done.stdout)
        report["results"] += part["results"]
        report["skipped"] += [f"{s} ({threads} threads)" for s in part["skipped"]]
    return report


def best_by_test(results: list[dict]) -> dict[str, dict]:
    best: dict[str, dict] = {}
    for row in results:
        current = best.get(row["test"])
        if current is None or row["tokens_per_second"]["mean"] > current["tokens_per_second"]["mean"]:
            best[row["test"]] = row
    return best


def write_markdown(report: dict) -> None:
    m = report["model"]
    print("## bench_pytorch\n")
    print(f"- PyTorch {report['torch']} (Python {report['python']}); CPU: {report['cpu']}, "
          f"{report['logical_cpus']} logical CPUs; {report['repetitions']} repetitions after one warm-up")
    print(f"- model: {m['path']}: {m['mixer']} mixer, {m['n_layers']} layers x {m['d_model']}, "
          f"d_ff {m['d_ff']}, vocab {m['vocab_size']}\n")
    print("| threads | test | tokens/s | ms/token |")
    print("|---:|---|---:|---:|")
    for row in report["results"]:
        s = row["tokens_per_second"]
        print(f"| {row['threads']} | {row['test']} | {s['mean']:.2f} ± {s['stddev']:.2f} | "
              f"{1000.0 / s['mean']:.3g} |")
    print("\nBest thread count per test:\n")
    print("| test | tokens/s | threads |")
    print("|---|---:|---:|")
    for name, row in best_by_test(report["results"]).items():
        s = row["tokens_per_second"]
        print(f"| {name} | {s['mean']:.2f} ± {s['stddev']:.2f} | {row['threads']} |")
    for s in report["skipped"]:
        print(f"\nskipped: {s}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("-p", "--n-prompt", type=int, default=512, help="prompt length (0 = none)")
    parser.add_argument("-n", "--n-gen", type=int, default=32, help="streamed decode steps (0 = none)")
    parser.add_argument("-c", "--contexts", type=int_list, default=[16, 128, 256],
                        help="context lengths of the decode tests (comma list)")
    parser.add_argument("-t", "--threads", type=int_list, default=[1, 2], help="thread counts")
    parser.add_argument("-r", "--repetitions", type=int, default=3)
    parser.add_argument("-o", "--output", choices=("md", "json"), default="md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repetitions < 1 or args.n_prompt < 0 or args.n_gen < 0 or 0 in args.threads:
        parser.error("-r and -t must be >= 1, -p and -n >= 0")
    try:
        if args.worker:
            args.threads = args.threads[0]
            print(json.dumps(worker(args)))
            return 0
        report = run_workers(args)
    except Exception as e:   # a bad file, a failed run: say what, exit 1
        print(f"bench_pytorch: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(report, indent=2))
    else:
        write_markdown(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
