#!/usr/bin/python3
"""Bits per character of a model over a large text, evaluated in shards on a Dask cluster.

    AFT_LIBRARY=build/engine/libaft.so examples/dask_eval.py MODEL TEXT [--workers N]
        [--scheduler ADDRESS] [--shard-chars N] [--window N] [--threads N]

The measure (as tools/aft_train.py's validation): the text's tokens are cut into consecutive
windows of `window` + 1 tokens overlapping by one; each window starts from a fresh session, is fed
its first `window` tokens and scores the next token at every position. Windows are independent, so
a shard (a run of whole windows) needs nothing from the shards before it and sharding changes no
bit of any window's sum: the result equals evaluate_local()'s, the same shards in one process,
summed in the same order. `window` is the model's max_positions (the length it was trained on), or
for a model without a limit --window (default 1024). Tokens are characters for a char model and
bytes for a byte model (bits per byte, as enwik8's "bpc").

Without --scheduler it starts a LocalCluster of --workers processes with one thread each. Every
worker loads the model once (a worker plugin) and evaluates its shards with --threads threads per
session (default 1: one core per worker). docs/scaling.md: running it on several machines.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster, WorkerPlugin, get_worker

# Installed, or from a checkout through the link examples/aft -> ../python/aft (Python puts this
# script's directory first on its path, and so does every worker process it starts).
import aft

DEFAULT_WINDOW = 1024  # for models without a position limit
LN2 = math.log(2.0)


@dataclasses.dataclass(frozen=True)
class Shard:
    """Tokens [start, start + len(tokens)) of the text: whole windows plus the last one's target."""

    start: int
    tokens: np.ndarray


def window_length(model: aft.Model, requested: int | None) -> int:
    limit = model.info.max_positions
    if requested is not None and limit and requested > limit:
        raise ValueError(f"--window {requested} exceeds the model's {limit} positions")
    return requested or limit or DEFAULT_WINDOW


def make_shards(tokens: np.ndarray, window: int, shard_chars: int) -> list[Shard]:
    """Consecutive runs of max(1, shard_chars // window) windows; the last window may be short."""
    step = window * max(1, shard_chars // window)
    return [Shard(start, tokens[start:start + step + 1])
            for start in range(0, len(tokens) - 1, step)]


def evaluate_shard(model: aft.Model, shard: Shard, window: int, n_threads: int) -> tuple[float, int]:
    """(bits, predicted tokens) of the shard's windows."""
    bits, count = 0.0, 0
    with aft.Session(model, n_threads=n_threads) as session:
        for first in range(0, len(shard.tokens) - 1, window):
            inputs = shard.tokens[first:first + window]
            targets = shard.tokens[first + 1:first + window + 1]
            inputs = inputs[:len(targets)]
            session.reset()
            logits = session.eval(inputs, logits="all").astype(np.float64)
            peak = logits.max(axis=1)
            log_total = peak + np.log(np.exp(logits - peak[:, None]).sum(axis=1))
            nats = log_total - logits[np.arange(len(targets)), targets]
            bits += float(nats.sum()) / LN2
            count += len(targets)
    return bits, count


def bits_per_char(results) -> float:
    """The shards' (bits, count), summed in shard order."""
    bits = count = 0
    for shard_bits, shard_count in results:
        bits += shard_bits
        count += shard_count
    return bits / count


def evaluate_local(model_path: str, tokens: np.ndarray, window: int, shard_chars: int,
                   n_threads: int = 1) -> float:
    """The same shards evaluated one after another in this process."""
    with aft.Model(model_path) as model:
        return bits_per_char(evaluate_shard(model, shard, window, n_threads)
                             for shard in make_shards(tokens, window, shard_chars))


def _plugin_name(model_path: str) -> str:
    return f"aft-model:{model_path}"


class ModelLoader(WorkerPlugin):
    """A Dask worker plugin: loads the model once per worker process, for every task there."""

    def __init__(self, model_path: str):
        self.model_path = model_path
        self.model: aft.Model | None = None

    def setup(self, worker) -> None:
        self.model = aft.Model(self.model_path)

    def teardown(self, worker) -> None:
        if self.model is not None:
            self.model.close()


def _evaluate_shard_on_worker(model_path: str, shard: Shard, window: int,
                              n_threads: int) -> tuple[float, int]:
    model = get_worker().plugins[_plugin_name(model_path)].model
    return evaluate_shard(model, shard, window, n_threads)


def evaluate_dask(client, model_path: str, tokens: np.ndarray, window: int, shard_chars: int,
                  n_threads: int = 1) -> float:
    """The shards spread over the cluster of `client`; the same value as evaluate_local()."""
    client.register_worker_plugin(ModelLoader(model_path), name=_plugin_name(model_path))
    shards = make_shards(tokens, window, shard_chars)
    futures = client.map(_evaluate_shard_on_worker, [model_path] * len(shards), shards,
                         window=window, n_threads=n_threads, pure=False)
    return bits_per_char(client.gather(futures))


def read_text(model_path: str, text_path: str, window: int | None) -> tuple[np.ndarray, int]:
    """The text's tokens and the window length (window_length()), from the model."""
    with aft.Model(model_path) as model:
        tokens = model.tokenize(Path(text_path).read_text(encoding="utf-8"))
        return np.asarray(tokens, dtype=np.int32), window_length(model, window)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="model file (.aft), the same path on every worker")
    parser.add_argument("text", help="UTF-8 text in the model's vocabulary")
    parser.add_argument("--scheduler", help="address of a running dask scheduler "
                                            "(default: start a LocalCluster)")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster processes (default 2)")
    parser.add_argument("--shard-chars", type=int, default=65536,
                        help="characters (tokens) per shard, rounded to whole windows")
    parser.add_argument("--window", type=int, help="window length (default: the model's "
                                                   f"max_positions, else {DEFAULT_WINDOW})")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads per session on a worker (default 1; 0 = automatic)")
    args = parser.parse_args(argv)

    model_path = str(Path(args.model).resolve())  # workers run elsewhere: an absolute path
    tokens, window = read_text(model_path, args.text, args.window)
    if len(tokens) < 2:
        parser.error("the text has fewer than 2 tokens: nothing to predict")

    if args.scheduler:
        cluster, client = None, Client(args.scheduler)
    else:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        n_workers = len(client.scheduler_info()["workers"])
        started = time.perf_counter()
        result = evaluate_dask(client, model_path, tokens, window, args.shard_chars, args.threads)
        seconds = time.perf_counter() - started
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    n_shards = len(make_shards(tokens, window, args.shard_chars))
    print(f"bits/char {result:.12f}")
    print(f"{len(tokens) - 1} characters predicted in {n_shards} shards of {window}-character "
          f"windows on {n_workers} workers: {seconds:.2f} s, {(len(tokens) - 1) / seconds:.0f} chars/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
