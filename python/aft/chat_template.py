"""Chat templates: how a chat's messages become a prompt, as aft-server renders them
(tools/server/chat_template.cpp; docs/server.md, "Chat completions"). Both render a grid of cases
alike (tests/python/test_chat_template_conformance.py).

A template is a built-in's name ("plain", "rwkv", "chatml") or a dict (or its JSON text):
    {"begin": "", "system": "System: {content}\\n", "user": "User: {content}\\n",
     "assistant": "Assistant: {content}\\n", "generation": "Assistant:", "stop": ["\\nUser:"]}
A model file carries one in its metadata as "chat_template" (tools/aft_export.py --chat-template).

    from aft import chat_template
    t = chat_template.parse("rwkv")
    prompt = chat_template.render(t, [{"role": "user", "content": "Hi"}])
"""

from __future__ import annotations

import json

CONTENT = "{content}"
ROLES = ("system", "user", "assistant")
KEYS = ("begin", "system", "user", "assistant", "generation", "stop")


def _builtin(system: str, user: str, assistant: str, generation: str, stop: str) -> dict:
    return {"system": system, "user": user, "assistant": assistant, "generation": generation,
            "stop": [stop]}


BUILTINS = {
    "plain": _builtin("System: {content}\n", "User: {content}\n", "Assistant: {content}\n",
                      "Assistant:", "\nUser:"),
    "rwkv": _builtin("System: {content}\n\n", "User: {content}\n\n", "Assistant: {content}\n\n",
                     "Assistant:", "\n\nUser:"),
    "chatml": _builtin("<|im_start|>system\n{content}<|im_end|>\n",
                       "<|im_start|>user\n{content}<|im_end|>\n",
                       "<|im_start|>assistant\n{content}<|im_end|>\n", "<|im_start|>assistant\n",
                       "<|im_end|>"),
}


def _string(template: dict, key: str, required: bool) -> str:
    if key not in template:
        if required:
            raise ValueError(f'"{key}" is missing')
        return ""
    if not isinstance(template[key], str):
        raise ValueError(f'"{key}": expected a string')
    return template[key]


def parse(template: str | dict) -> dict:
    """The template as a dict with every key ("name" added); ValueError says what is wrong."""
    if isinstance(template, str):
        try:
            parsed = json.loads(template)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            if template not in BUILTINS:
                raise ValueError(f'unknown chat template "{template}" (built-ins: '
                                 f'{", ".join(BUILTINS)}, or a JSON object)')
            return {"name": template, "begin": "", **BUILTINS[template]}
        template = parsed
    if not isinstance(template, dict):
        raise ValueError("expected a built-in's name or a JSON object")
    for key in template:
        if key not in KEYS:
            raise ValueError(f'unknown key "{key}" ({", ".join(KEYS)})')
    result = {"name": "custom", "begin": _string(template, "begin", False)}
    for role in ROLES:
        if role == "system" and role not in template:
            continue
        text = _string(template, role, role != "system")
        if text.count(CONTENT) != 1:
            raise ValueError(f'"{role}": expected "{CONTENT}" once')
        result[role] = text
    result["generation"] = _string(template, "generation", True)
    stop = template.get("stop", [])
    if not isinstance(stop, list):
        raise ValueError('"stop": expected a list of strings')
    if not all(isinstance(s, str) and s for s in stop):
        raise ValueError('"stop": expected non-empty strings')
    result["stop"] = list(stop)
    return result


def render(template: str | dict, messages: list[dict]) -> str:
    """The prompt of messages ({"role", "content"} dicts), the assistant's turn open."""
    t = parse(template) if isinstance(template, str) or "name" not in template else template
    prompt = t["begin"]
    for message in messages:
        role = message["role"]
        if role not in ROLES or role not in t:
            raise ValueError(f'the chat template ({t["name"]}) has no role "{role}"')
        before, after = t[role].split(CONTENT)
        prompt += before + message["content"] + after
    return prompt + t["generation"]


def metadata_value(text: str) -> str | dict:
    """What a model file's metadata keeps for a --chat-template argument (a built-in's name, or the
    JSON object); ValueError if it is not a template."""
    parse(text)
    return text if text in BUILTINS else json.loads(text)
