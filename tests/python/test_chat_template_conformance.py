"""The Python package's chat templates (aft.chat_template) against the server's
(tools/server/chat_template.cpp) over a grid of templates and conversations: the same prompts and
stop strings, and the same refusals with the same messages. The server's side is the program
chat_template_probe (its path in AFT_CHAT_TEMPLATE_PROBE; CTest sets it).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import tempfile
import unittest

from aft import chat_template

CUSTOM = {"begin": "<s>", "system": "[S] {content}\n", "user": "Q: {content}\n",
          "assistant": "A: {content}\n", "generation": "A:", "stop": ["\nQ:", "</s>"]}

TEMPLATES = [
    "plain", "rwkv", "chatml", "llama9", "", "Plain", '"plain"', "[]", "5", "{",
    json.dumps(CUSTOM),
    json.dumps({k: v for k, v in CUSTOM.items() if k not in ("system", "begin", "stop")}),
]
# Each key left out, and each given a wrong value.
for key in CUSTOM:
    TEMPLATES.append(json.dumps({k: v for k, v in CUSTOM.items() if k != key}))
for key, bad in [("user", "Q: no placeholder"), ("assistant", "{content}{content}"),
                 ("system", 3), ("begin", None), ("generation", ["A:"]), ("stop", "\nQ:"),
                 ("stop", [""]), ("stop", [1]), ("extra", "x"), ("user", "{Content}")]:
    TEMPLATES.append(json.dumps({**CUSTOM, key: bad}))

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Who?"}],
    [{"role": "user", "content": ""}],
    [{"role": "user", "content": "a {content} b"}],  # a placeholder in a message stays as it is
    [{"role": "user", "content": "naïve — 日本語\n\n"}],
    [{"role": "tool", "content": "x"}],
]


def python_verdict(template: str, messages: list) -> dict:
    try:
        t = chat_template.parse(template)
        return {"name": t["name"], "prompt": chat_template.render(t, messages), "stop": t["stop"]}
    except ValueError as error:
        return {"error": str(error)}


class ChatTemplateConformance(unittest.TestCase):
    def test_same_prompts_and_refusals(self):
        probe = os.environ.get("AFT_CHAT_TEMPLATE_PROBE")
        if not probe:
            self.skipTest("AFT_CHAT_TEMPLATE_PROBE is not set (CTest sets it)")
        cases = [(t, m) for t in TEMPLATES for m in CONVERSATIONS]
        lines = "".join(json.dumps({"template": t, "messages": m}) + "\n" for t, m in cases)
        out = subprocess.run([probe], input=lines, capture_output=True, text=True, check=True)
        verdicts = [json.loads(line) for line in out.stdout.splitlines()]
        self.assertEqual(len(verdicts), len(cases))
        accepted = refused = 0
        for (template, messages), engine in zip(cases, verdicts):
            with self.subTest(template=template, messages=messages):
                self.assertEqual(python_verdict(template, messages), engine)
                accepted += "prompt" in engine
                refused += "error" in engine
        # The grid has both kinds in numbers: a probe refusing (or accepting) everything fails.
        self.assertGreater(accepted, 20)
        self.assertGreater(refused, 60)

    def test_builtins_render_as_documented(self):
        messages = CONVERSATIONS[1]
        self.assertEqual(chat_template.render("plain", messages),
                         "System: Be brief.\nUser: Hi\nAssistant: Hello.\nUser: Who?\nAssistant:")
        self.assertEqual(chat_template.render("rwkv", messages[1:2]), "User: Hi\n\nAssistant:")
        self.assertEqual(chat_template.render("chatml", messages[1:2]),
                         "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        self.assertEqual(chat_template.metadata_value("rwkv"), "rwkv")
        self.assertEqual(chat_template.metadata_value(json.dumps(CUSTOM)), CUSTOM)
        with self.assertRaisesRegex(ValueError, 'unknown chat template "x"'):
            chat_template.metadata_value("x")


class ExportKeepsTheTemplate(unittest.TestCase):
    def test_in_the_metadata(self):
        from aft import export, modelfile
        with tempfile.TemporaryDirectory() as directory:
            for given, kept in [("rwkv", "rwkv"), (json.dumps(CUSTOM), CUSTOM)]:
                path = os.path.join(directory, "model.aft")
                with contextlib.redirect_stderr(io.StringIO()):
                    code = export.main(["--random", "--preset", "tiny", "--chat-template", given,
                                        "--out", path])
                self.assertEqual(code, 0)
                self.assertEqual(modelfile.read_file(path).metadata["chat_template"], kept)
            errors = io.StringIO()
            with contextlib.redirect_stderr(errors), self.assertRaises(SystemExit):
                export.main(["--random", "--preset", "tiny", "--chat-template", "llama9",
                             "--out", path])
            self.assertIn('--chat-template: unknown chat template "llama9"', errors.getvalue())


if __name__ == "__main__":
    unittest.main()
