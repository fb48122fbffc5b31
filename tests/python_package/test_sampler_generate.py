"""aft.Sampler and aft.generate."""

from __future__ import annotations

import math
import unittest

import numpy as np

from package_support import SHIPPED_MODEL, aft, fixture, small_model

LOGITS = np.array([0.5, 3.0, -1.0, 2.5, 0.0], dtype=np.float32)


def sampled_by_hand(model, prompt, n, sampler, end_of_text=None):
    """The tokens generate samples after prompt, drawn here one by one (up to end_of_text)."""
    for token in model.tokenize(prompt):
        sampler.accept(token)
    tokens = []
    with aft.Session(model) as session:
        logits = session.eval(model.tokenize(prompt))
        for _ in range(n):
            token = sampler.sample(logits)
            if token == end_of_text:
                break
            tokens.append(token)
            logits = session.eval([token])
    return tokens


class SamplerTest(unittest.TestCase):
    def test_greedy_and_top_k_1_pick_the_argmax(self):
        self.assertEqual(aft.Sampler(temperature=0).sample(LOGITS), 1)
        top1 = aft.Sampler(temperature=1.5, top_k=1, seed=3)
        self.assertEqual({top1.sample(LOGITS) for _ in range(20)}, {1})

    def test_same_seed_same_tokens(self):
        def draws(seed):
            sampler = aft.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
            return [sampler.sample(LOGITS) for _ in range(50)]
        self.assertEqual(draws(7), draws(7))
        self.assertNotEqual(draws(7), draws(8))
        self.assertGreater(len(set(draws(7))), 2)

    def test_invalid_logits(self):
        sampler = aft.Sampler()
        for bad in ([0.0, math.nan], [0.0, math.inf]):
            with self.assertRaises(aft.AftError) as caught:
                sampler.sample(np.array(bad, dtype=np.float32))
            self.assertEqual(caught.exception.status, aft.Status.INVALID_ARGUMENT)
        with self.assertRaises(ValueError):
            sampler.sample(np.zeros((2, 3), dtype=np.float32))

    def test_closed_sampler(self):
        sampler = aft.Sampler()
        sampler.close()
        with self.assertRaises(aft.AftError) as caught:
            sampler.sample(LOGITS)
        self.assertEqual(caught.exception.message, "the sampler is closed")

    def test_reset_restarts_the_generator(self):
        sampler = aft.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=5)
        first = [sampler.sample(LOGITS) for _ in range(20)]
        sampler.reset()
        self.assertEqual([sampler.sample(LOGITS) for _ in range(20)], first)

    # The library that has aft_sampler_accept also applies logit bias and penalties.
    def test_logit_bias_and_penalties(self):
        banned = aft.Sampler(temperature=0, logit_bias={1: -math.inf, 3: -0.1})
        self.assertEqual(banned.sample(LOGITS), 3)
        with self.assertRaises(aft.AftError):
            aft.Sampler(temperature=0, logit_bias={t: -math.inf for t in range(5)}).sample(LOGITS)
        penalized = aft.Sampler(temperature=0, repeat_last_n=8, presence_penalty=1.0)
        penalized.accept(1)
        self.assertEqual(penalized.sample(LOGITS), 3)  # 3.0 - 1 < 2.5

    # ctypes would wrap them: token 2**32 + 1 would ban token 1, top_k 2**32 + 1 be top_k 1.
    def test_integers_outside_their_c_types_are_refused(self):
        for kwargs, named in (({"logit_bias": {2**32 + 1: -math.inf}}, "logit_bias token"),
                              ({"top_k": 2**32 + 1}, "top_k"),
                              ({"repeat_last_n": -2**31 - 1}, "repeat_last_n"),
                              ({"seed": -1}, "seed"), ({"seed": 2**64}, "seed")):
            with self.subTest(**{k: str(v) for k, v in kwargs.items()}):
                with self.assertRaises(aft.AftError) as caught:
                    aft.Sampler(temperature=0, **kwargs)
                self.assertEqual(caught.exception.status, aft.Status.OUT_OF_RANGE)
                self.assertIn(named, caught.exception.message)
        with self.assertRaises(TypeError):
            aft.Sampler(top_k=2.5)
        widest = aft.Sampler(temperature=0, seed=2**64 - 1, top_k=2**31 - 1)
        self.assertEqual(widest.sample(LOGITS), 1)


class GenerateTest(unittest.TestCase):
    def test_deterministic_for_a_seed(self):
        with aft.Model(SHIPPED_MODEL) as model:
            def text(seed):
                return "".join(aft.generate(model, "The jury said", 60,
                                            aft.Sampler(temperature=0.8, seed=seed)))
            self.assertEqual(text(1), text(1))
            self.assertNotEqual(text(1), text(2))
            self.assertEqual(len(text(1)), 60)

    def test_greedy_equals_the_argmax_loop(self):
        with aft.Model(SHIPPED_MODEL) as model, aft.Session(model) as session:
            pieces = list(aft.generate(model, "The jury said", 30, aft.Sampler(temperature=0),
                                       session=session))
            self.assertEqual(session.position, 13 + 30)
            manual = aft.Session(model)
            logits = manual.eval(model.tokenize("The jury said"))
            tokens = []
            for _ in range(30):
                tokens.append(int(np.argmax(logits)))
                logits = manual.eval(tokens[-1:])
            self.assertEqual("".join(pieces), model.detokenize(tokens))
            self.assertEqual(session.state(), manual.state())

    def test_byte_model_pieces_are_whole_characters(self):
        path, _, _ = fixture("local")  # random weights: arbitrary bytes, partial characters
        with aft.Model(path) as model:
            def sampler():
                return aft.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=4)
            pieces = list(aft.generate(model, "é", 50, sampler()))
            tokens = sampled_by_hand(model, "é", 50, sampler())
            self.assertTrue(any(token >= 0x80 for token in tokens))
            self.assertEqual("".join(pieces), model.detokenize(tokens))
            self.assertNotIn("", pieces)

    def test_stops_at_the_models_positions(self):
        with aft.Model(SHIPPED_MODEL) as model, aft.Session(model) as session:
            session.eval(model.tokenize("a " * 125), logits="none")
            pieces = list(aft.generate(model, "The", 20, aft.Sampler(temperature=0),
                                       session=session))
            self.assertEqual(session.position, 256)
            self.assertEqual(len("".join(pieces)), 256 - 250 - 3)
            with self.assertRaises(aft.AftError) as caught:
                next(aft.generate(model, "x", 5, session=session))
            self.assertEqual(caught.exception.status, aft.Status.OUT_OF_RANGE)
            with self.assertRaises(aft.AftError):
                next(aft.generate(model, "", 5))


# A char model whose end of text is "e" (token 4).
END_MODEL = {"type": "char", "vocab": list("abcde"), "end_of_text": 4}
LIKELY_END = {4: 30.0}  # head bias: the end of text is the model's choice every time


class GenerateEndOfTextTest(unittest.TestCase):
    def generate(self, sampler, head_bias=None, max_tokens=10):
        """generate's text on END_MODEL after "ab", and how many tokens the session evaluated."""
        with aft.Model.from_bytes(small_model(END_MODEL, head_bias)) as model, \
                aft.Session(model) as session:
            text = "".join(aft.generate(model, "ab", max_tokens, sampler, session))
            return text, session.position - 2

    def test_stops_at_it_neither_yielded_nor_evaluated(self):
        self.assertEqual(self.generate(aft.Sampler(temperature=0, logit_bias={4: 100})), ("", 0))
        self.assertEqual(self.generate(aft.Sampler(temperature=0), LIKELY_END), ("", 0))

    def test_a_ban_goes_on_past_it(self):  # as aft-run's --ignore-eos
        text, evaluated = self.generate(aft.Sampler(temperature=0, logit_bias={4: -math.inf}),
                                        LIKELY_END)
        self.assertEqual((len(text), evaluated), (10, 10))
        self.assertNotIn("e", text)

    def test_stops_where_sampling_meets_it(self):
        def sampler():
            return aft.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=3)
        with aft.Model.from_bytes(small_model(END_MODEL)) as model:
            tokens = sampled_by_hand(model, "ab", 50, sampler(), end_of_text=4)
            expected = model.detokenize(tokens)
        self.assertTrue(3 <= len(tokens) < 50, tokens)  # a stop mid-text
        self.assertEqual(self.generate(sampler(), max_tokens=50), (expected, len(tokens)))


if __name__ == "__main__":
    unittest.main()
