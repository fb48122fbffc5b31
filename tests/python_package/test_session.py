"""aft.Session and aft.batch_decode: logits, state, fork, errors."""

from __future__ import annotations

import unittest

import numpy as np

from package_support import SHIPPED_MODEL, aft, assert_rows_close, fixture

# One model of each mixer, with their fixture tokens (the shipped one: text).
MODELS = ("simple", "local", "conv", "full_table")


def token_by_token(session: aft.Session, tokens) -> np.ndarray:
    return np.stack([session.eval([token], logits="last") for token in tokens])


class EvalTest(unittest.TestCase):
    def test_prompt_at_once_matches_token_by_token(self):
        for name in MODELS:
            with self.subTest(model=name):
                path, tokens, _ = fixture(name)
                with aft.Model(path) as model:
                    at_once = aft.Session(model).eval(tokens, logits="all")
                    one_by_one = token_by_token(aft.Session(model), tokens)
                    again = token_by_token(aft.Session(model, n_threads=1), tokens)
                assert_rows_close(at_once, one_by_one)
                np.testing.assert_array_equal(one_by_one, again)

    def test_last_none_and_position(self):
        with aft.Model(SHIPPED_MODEL) as model, aft.Session(model) as session:
            tokens = model.tokenize("The jury said")
            all_rows = aft.Session(model).eval(tokens, logits="all")
            self.assertIsNone(session.eval(tokens[:5], logits="none"))
            self.assertEqual(session.position, 5)
            last = session.eval(tokens[5:], logits="last")
            self.assertEqual(last.shape, (85,))
            self.assertEqual(session.position, len(tokens))
            assert_rows_close(last, all_rows[-1])
            session.reset()
            self.assertEqual(session.position, 0)
            np.testing.assert_array_equal(session.eval(tokens, logits="all"), all_rows)

    def test_errors_leave_the_session_unchanged(self):
        with aft.Model(SHIPPED_MODEL) as model, aft.Session(model) as session:
            session.eval([1, 2, 3])
            for tokens, status, words in (([4, 85], aft.Status.OUT_OF_RANGE, "85"),
                                          ([-1], aft.Status.OUT_OF_RANGE, "-1"),
                                          ([2**31], aft.Status.OUT_OF_RANGE, "not an int32"),
                                          ([1] * 254, aft.Status.OUT_OF_RANGE, "256")):
                with self.assertRaises(aft.AftError) as caught:
                    session.eval(tokens)
                self.assertEqual(caught.exception.status, status)
                self.assertIn(words, caught.exception.message)
                self.assertEqual(session.position, 3)
            with self.assertRaises(ValueError):
                session.eval([1], logits="first")
            with self.assertRaises(TypeError):
                session.eval([1.5])

    def test_closed_session(self):
        with aft.Model(SHIPPED_MODEL) as model:
            session = aft.Session(model)
            session.close()
            session.close()
            for use in (lambda: session.eval([1]), lambda: session.position, session.state,
                        session.fork, session.reset, lambda: session.load_state(b"")):
                with self.assertRaises(aft.AftError) as caught:
                    use()
                self.assertEqual(caught.exception.status, aft.Status.INVALID_ARGUMENT)
                self.assertEqual(caught.exception.message, "the session is closed")

    def test_bad_thread_count(self):
        with aft.Model(SHIPPED_MODEL) as model:
            with self.assertRaises(aft.AftError) as caught:
                aft.Session(model, n_threads=-1)
            self.assertEqual(caught.exception.status, aft.Status.INVALID_ARGUMENT)
            self.assertIn("n_threads", caught.exception.message)
            # Outside int32: refused, not wrapped (2**32 + 2 would be 2 threads).
            with self.assertRaises(aft.AftError) as caught:
                aft.Session(model, n_threads=2**32 + 2)
            self.assertEqual(caught.exception.status, aft.Status.OUT_OF_RANGE)
            self.assertIn("n_threads 4294967298", caught.exception.message)
            session = aft.Session(model, n_threads=1)
            with self.assertRaises(aft.AftError):
                session.threads = 2**32
            self.assertEqual(session.threads, 1)
            with self.assertRaises(TypeError):
                session.threads = 1.5

    def test_threads(self):
        with aft.Model(SHIPPED_MODEL) as model:
            tokens = model.tokenize("The jury said")
            session = aft.Session(model, n_threads=2)
            self.assertEqual(session.threads, 2)
            two = session.eval(tokens, logits="all")
            session.reset()
            session.threads = 1
            self.assertEqual(session.threads, 1)
            np.testing.assert_array_equal(session.eval(tokens, logits="all"), two)

    def test_abort(self):
        path, _, _ = fixture("simple")
        with aft.Model(path) as model, aft.Session(model) as session:
            tokens = [i % model.info.vocab_size for i in range(1200)]  # 3 chunks of at most 512
            calls = []
            session.set_abort_callback(lambda: calls.append(1) or True)
            with self.assertRaises(aft.AftError) as caught:
                session.eval(tokens, logits="none")
            self.assertEqual(caught.exception.status, aft.Status.ABORTED)
            self.assertGreater(len(calls), 0)
            self.assertEqual(len(calls), 1)  # asked before the second chunk, which it stopped
            self.assertEqual(session.position, 512)
            session.set_abort_callback(None)
            rest = session.eval(tokens[512:], logits="last")
            with aft.Session(model) as whole:
                np.testing.assert_array_equal(rest, whole.eval(tokens, logits="last"))

    def test_an_exception_in_the_abort_callback_stops_and_is_raised(self):
        path, _, _ = fixture("simple")
        with aft.Model(path) as model, aft.Session(model) as session:
            tokens = [i % model.info.vocab_size for i in range(600)]

            def interrupted():
                raise KeyboardInterrupt("stop please")

            session.set_abort_callback(interrupted)
            with self.assertRaises(KeyboardInterrupt) as caught:
                session.eval(tokens, logits="none")
            self.assertEqual(str(caught.exception), "stop please")
            self.assertIsInstance(caught.exception.__cause__, aft.AftError)
            self.assertEqual(caught.exception.__cause__.status, aft.Status.ABORTED)
            self.assertEqual(session.position, 512)
            # Raised once: a later abort without an exception is the library's error.
            session.set_abort_callback(lambda: True)
            with self.assertRaises(aft.AftError):
                session.eval(tokens, logits="none")
            self.assertEqual(session.position, 1024)


class StateTest(unittest.TestCase):
    def test_save_load_and_fork_continue_bit_for_bit(self):
        for name in MODELS:
            with self.subTest(model=name):
                path, tokens, _ = fixture(name)
                prefix, rest = tokens[:23], tokens[23:]
                with aft.Model(path) as model:
                    uninterrupted = aft.Session(model)
                    uninterrupted.eval(prefix, logits="none")
                    state = uninterrupted.state()
                    fork = uninterrupted.fork()
                    expected = token_by_token(uninterrupted, rest)

                    restored = aft.Session(model)
                    restored.eval([1, 2], logits="none")  # replaced wholesale by the load
                    restored.load_state(state)
                    self.assertEqual(restored.position, len(prefix))
                    self.assertEqual(fork.position, len(prefix))
                    np.testing.assert_array_equal(token_by_token(restored, rest), expected)
                    np.testing.assert_array_equal(token_by_token(fork, rest), expected)
                    self.assertEqual(restored.state(), uninterrupted.state())

    def test_bad_state_bytes(self):
        with aft.Model(SHIPPED_MODEL) as model, aft.Session(model) as session:
            session.eval(model.tokenize("The jury"), logits="none")
            state = session.state()
            other_path, _, _ = fixture("local")
            with aft.Model(other_path) as other_model, aft.Session(other_model) as other:
                other.eval([1, 2], logits="none")
                other_state = other.state()
            flipped = bytearray(state)
            flipped[len(state) // 2] ^= 0x10
            target = aft.Session(model)
            target.eval([7], logits="none")
            before = target.state()
            for bad in (state[:-1], bytes(flipped), other_state, b""):
                with self.assertRaises(aft.AftError) as caught:
                    target.load_state(bad)
                self.assertEqual(caught.exception.status, aft.Status.FORMAT)
                self.assertTrue(caught.exception.message)
                self.assertEqual(target.state(), before)


class BatchDecodeTest(unittest.TestCase):
    def test_equals_separate_decodes(self):
        with aft.Model(SHIPPED_MODEL) as model:
            prompts = ["The jury", "It was a", "Mr. Brown said"]
            batched = [aft.Session(model) for _ in prompts]
            separate = [aft.Session(model) for _ in prompts]
            for session_a, session_b, prompt in zip(batched, separate, prompts):
                session_a.eval(model.tokenize(prompt), logits="none")
                session_b.eval(model.tokenize(prompt), logits="none")
            for step in range(3):
                tokens = [10 + step, 20 + step, 30 + step]
                rows = aft.batch_decode(batched, tokens)
                expected = np.stack([session.eval([token]) for session, token in
                                     zip(separate, tokens)])
                np.testing.assert_array_equal(rows, expected)
            self.assertIsNone(aft.batch_decode(batched, [1, 2, 3], logits=False))
            self.assertEqual([s.position for s in batched], [s.position + 1 for s in separate])

    def test_errors_change_no_session(self):
        with aft.Model(SHIPPED_MODEL) as model:
            sessions = [aft.Session(model), aft.Session(model)]
            with self.assertRaises(aft.AftError) as caught:
                aft.batch_decode(sessions, [1, 85])
            self.assertEqual(caught.exception.status, aft.Status.OUT_OF_RANGE)
            with self.assertRaises(aft.AftError) as caught:
                aft.batch_decode([sessions[0], sessions[0]], [1, 2])
            self.assertEqual(caught.exception.status, aft.Status.INVALID_ARGUMENT)
            self.assertEqual([s.position for s in sessions], [0, 0])


if __name__ == "__main__":
    unittest.main()
