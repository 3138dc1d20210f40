"""Steps/s of a keras-hub GPT2 causal LM: a bare `fit` against kerasteps's callbacks.

The program of issue 49: `keras_hub.models.GPT2CausalLM` built from config
(vocabulary 128, 2 layers, 2 heads, hidden 32, intermediate 64, sequence 16,
dropout 0.1), batch 8 of random tokens, `--steps` steps per `fit`, in interleaved
rounds (the order shuffled each round), with:

- `bare`: no callbacks;
- `logging`: `LogEvery`, `StepTensorBoard`, `JSONLinesLogger` and `Throughput`,
  every=50 (all async-safe: on JAX and PyTorch Keras runs batch ends on its thread);
- `full`: the same and `StepCheckpoint(every=200)` (async-safe too: at a signal
  its handler stops training itself);
- `never`: `full` scheduled never to fire (every=10**9).

It prints the median steps/s of each and its ratio to the bare fit, by wall clock
and per CPU-second of the process. keras-hub is not a dependency of kerasteps;
install it beside, without what it would pull for TensorFlow text:

    pip install --no-deps keras-hub regex kagglehub kagglesdk tqdm tokenizers

Usage:

    python benchmarks/gpt2_overhead.py --backend jax [--steps 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from callback_overhead import interleaved, print_medians  # noqa: E402

from kerasteps.callbacks import (  # noqa: E402
    JSONLinesLogger,
    LogEvery,
    StepCheckpoint,
    StepTensorBoard,
    Throughput,
)

VOCABULARY, SEQUENCE, BATCH = 128, 16, 8


def build_model() -> keras.Model:
    from keras_hub.models import GPT2Backbone, GPT2CausalLM

    backbone = GPT2Backbone(
        vocabulary_size=VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=SEQUENCE,
        dropout=0.1,
    )
    model = GPT2CausalLM(backbone=backbone, preprocessor=None)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=["accuracy"],
    )
    return model


def callbacks(name: str, root: str, every: int) -> list:
    if name == "bare":
        return []
    sinks = [
        LogEvery(every),
        StepTensorBoard(os.path.join(root, "tb"), every=every),
        JSONLinesLogger(os.path.join(root, "log.jsonl"), every=every),
        Throughput(every),
    ]
    if name == "logging":
        return sinks
    return [*sinks, StepCheckpoint(os.path.join(root, "ckpt"), every=4 * every)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="steps per fit")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=["tensorflow", "jax", "torch"])
    args = parser.parse_args()
    if args.backend and args.backend != keras.backend.backend():
        env = {**os.environ, "KERAS_BACKEND": args.backend}
        os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)
    logging.basicConfig(level=logging.WARNING)
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(0, VOCABULARY, size=(BATCH * args.steps, SEQUENCE + 1))
    x = {
        "token_ids": tokens[:, :-1].astype("int32"),
        "padding_mask": np.ones((len(tokens), SEQUENCE), "bool"),
    }
    y = tokens[:, 1:].astype("int32")
    keras.utils.set_random_seed(args.seed)
    model = build_model()
    root = tempfile.mkdtemp(prefix="kerasteps-gpt2-")
    names = ["bare", "logging", "full", "never"]

    def fit(name: str, run: int) -> None:
        every = 10**9 if name == "never" else 50
        model.fit(
            x,
            y,
            batch_size=BATCH,
            epochs=1,
            verbose=0,
            shuffle=False,
            callbacks=callbacks(name, os.path.join(root, f"{name}{run}"), every),
        )

    results = interleaved(names, fit, args.steps, args.rounds, args.seed)
    print(
        f"keras-hub GPT2 causal LM ({model.count_params()} parameters), batch "
        f"{BATCH}, {args.steps} steps/fit, {args.rounds} interleaved rounds, backend "
        f"{keras.backend.backend()}, medians:"
    )
    print_medians(results)


if __name__ == "__main__":
    main()
