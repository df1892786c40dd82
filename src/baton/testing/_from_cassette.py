"""A scenario written from a cassette: a run seen once becomes a scripted test (``baton record-scenario``).

Each answered request that offers tools becomes one step, in position order: the model's text
blocks and tool calls as it answered them, and a failure (``error``) for an HTTP error status
(``once: true`` when the same request was answered later: a retry). Requests offering no tools
(titles, summaries, ``count_tokens``) are left out: the scripted server answers those itself.

How the steps are chosen again is the server's usual rule (docs/scenarios.md "Which step
answers a request"): the steps of the first prompt are counted by tool results; the first step
after each later prompt gets ``when: {prompt_contains: <that prompt's first line>}``. A request
seen twice (the same prompt and number of results) keeps its first answer.

The recorded run's workspace becomes ``{cwd}`` in every text and tool input. Tool calls keep
their recorded names and inputs (Anthropic ``tool_use``, Gemini ``functionCall``), except on the
OpenAI Responses API, where Codex's ``exec_command {cmd}`` becomes ``Bash {command}`` and an
``apply_patch`` that adds one file or replaces whole lines of one becomes ``Write`` / ``Edit``:
the server turns those back into the same calls (``_responses``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import yaml

from baton.cassettes import Cassette, CassetteExchange
from baton.cassettes.matching import offers_tools
from baton.testing import _anthropic, _gemini, _responses
from baton.testing._scenario import Scenario
from baton.testing._selection import Conversation

__all__ = ["scenario_from_cassette"]

_PROMPT_NEEDLE = 120  # characters of a later prompt's first line a step waits for
_ADD_FILE = re.compile(
    r"\A\*\*\* Begin Patch\n\*\*\* Add File: (?P<path>[^\n]+)\n(?P<body>(?:\+[^\n]*\n)*)\*\*\* End Patch\n?\Z"
)
_UPDATE_FILE = re.compile(
    r"\A\*\*\* Begin Patch\n\*\*\* Update File: (?P<path>[^\n]+)\n@@\n(?P<body>(?:[-+][^\n]*\n)*)\*\*\* End Patch\n?\Z"
)

Step = dict[str, Any]


def scenario_from_cassette(cassette: Cassette, *, comment: str, description: str) -> tuple[str, int]:
    """The YAML text of a scenario replaying ``cassette``'s model answers, and its number of steps.

    ``comment`` heads the file (``#`` lines); the text loads with :meth:`Scenario.from_yaml`.
    """
    workspace = cassette.paths.workspace
    main = [e for e in cassette.exchanges if _answers_the_task(e)]
    steps: list[Step] = []
    seen: set[tuple[str, int]] = set()
    prompt: str | None = None
    for index, exchange in enumerate(main):
        reader = _reader(exchange.path)
        if reader is None:
            continue
        conversation = reader(exchange.body)
        key = (conversation.prompt, conversation.result_count)
        if exchange.status >= 400:
            step: Step = {"error": {"status": _status(exchange.status), "message": _error_message(exchange)}}
            if any(_key(later) == key for later in main[index + 1 :]):
                step["once"] = True
        elif key in seen:
            continue  # the same request again (a retry): the scenario answers it the same way
        else:
            seen.add(key)
            step = _step(exchange)
        if prompt is not None and conversation.prompt != prompt:
            step["when"] = {"prompt_contains": _needle(conversation.prompt)}
        prompt = conversation.prompt
        steps.append(_placed(step, workspace))
    data: dict[str, Any] = {"description": description, "steps": steps}
    last = steps[-1] if steps else None
    if last is not None and "tools" not in last and isinstance(last.get("text"), str | list):
        texts = last["text"] if isinstance(last["text"], list) else [last["text"]]
        data["final_text"] = "\n".join(texts)
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 16)
    head = "".join(f"# {line}\n".replace("# \n", "#\n") for line in comment.splitlines())
    text = head + body
    Scenario.from_yaml(text, name="written")  # what is written loads: config_invalid otherwise
    return text, len(steps)


def _answers_the_task(exchange: CassetteExchange) -> bool:
    return (
        exchange.method == "POST"
        and offers_tools(exchange.body)
        and not exchange.path.split("?", 1)[0].endswith("/count_tokens")
    )


def _key(exchange: CassetteExchange) -> tuple[str, int]:
    reader = _reader(exchange.path)
    conversation = reader(exchange.body) if reader else Conversation(offers_tools=True)
    return conversation.prompt, conversation.result_count


def _reader(path: str) -> Callable[[dict[str, Any]], Conversation] | None:
    bare = path.split("?", 1)[0]
    if bare.startswith(_anthropic.MESSAGES_PATH):
        return _anthropic.read_conversation
    if bare.endswith(_responses.RESPONSES_PATH):
        return _responses.read_conversation
    if _gemini.is_gemini_path(bare):
        return _gemini.read_conversation
    return None


def _needle(prompt: str) -> str:
    line = next((line.strip() for line in prompt.splitlines() if line.strip()), prompt.strip())
    return line[:_PROMPT_NEEDLE]


def _status(status: int) -> int:
    return status if status in (400, 401, 403, 404, 413, 429, 500, 529) else 500


def _error_message(exchange: CassetteExchange) -> str:
    try:
        body = json.loads(exchange.response_body)
    except ValueError:
        return exchange.response_body.decode("utf-8", "replace")[:500] or f"HTTP {exchange.status}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return f"HTTP {exchange.status}"


def _step(exchange: CassetteExchange) -> Step:
    """The model's answer: its text blocks, tool calls and (when not the default) stop reason."""
    bare = exchange.path.split("?", 1)[0]
    if bare.startswith(_anthropic.MESSAGES_PATH):
        texts, tools, stop = _anthropic_answer(exchange)
    elif bare.endswith(_responses.RESPONSES_PATH):
        texts, tools, stop = _responses_answer(exchange)
    else:
        texts, tools, stop = _gemini_answer(exchange)
    step: Step = {}
    if texts:
        step["text"] = texts[0] if len(texts) == 1 else texts
    if tools:
        step["tools"] = tools
    if not step:
        step["text"] = ""
    default = "tool_use" if tools else "end_turn"
    if stop is not None and stop != default:
        step["stop_reason"] = stop
    return step


def _sse_data(exchange: CassetteExchange) -> list[dict[str, Any]]:
    """The JSON ``data:`` of each server-sent event, or the one JSON body of an answer not streamed."""
    raw = exchange.response_body.decode("utf-8", "replace")
    if "text/event-stream" not in exchange.response_headers.get("content-type", ""):
        try:
            value = json.loads(raw)
        except ValueError:
            return []
        return [value] if isinstance(value, dict) else []
    found: list[dict[str, Any]] = []
    for event in raw.split("\n\n"):
        data = "\n".join(line[5:].strip() for line in event.splitlines() if line.startswith("data:"))
        try:
            value = json.loads(data) if data else None
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _anthropic_answer(exchange: CassetteExchange) -> tuple[list[str], list[Step], str | None]:
    blocks: dict[int, dict[str, Any]] = {}
    stop: str | None = None
    for data in _sse_data(exchange):
        kind = data.get("type")
        if kind == "message":  # not streamed
            for index, block in enumerate(data.get("content") or ()):
                blocks[index] = {**block, "partial": json.dumps(block.get("input") or {})}
            stop = data.get("stop_reason")
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            blocks[int(data.get("index", len(blocks)))] = {**data["content_block"], "partial": ""}
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            block = blocks.get(int(data.get("index", -1)))
            delta = data["delta"]
            if block is None:
                continue
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                block["partial"] += str(delta.get("partial_json") or "")
        elif kind == "message_delta" and isinstance(data.get("delta"), dict):
            stop = data["delta"].get("stop_reason") or stop
    texts: list[str] = []
    tools: list[Step] = []
    for _, block in sorted(blocks.items()):
        if block.get("type") == "text" and block.get("text"):
            texts.append(str(block["text"]))
        elif block.get("type") == "tool_use":
            tools.append({"name": str(block.get("name")), "input": _json_object(block["partial"])})
    return texts, tools, stop


def _responses_answer(exchange: CassetteExchange) -> tuple[list[str], list[Step], str | None]:
    items: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    for data in _sse_data(exchange):
        if data.get("type") == "response.completed" and isinstance(data.get("response"), dict):
            items = [item for item in data["response"].get("output") or () if isinstance(item, dict)]
        elif data.get("type") == "response.output_item.done" and isinstance(data.get("item"), dict):
            done.append(data["item"])
        elif data.get("object") == "response":  # not streamed
            items = [item for item in data.get("output") or () if isinstance(item, dict)]
    texts: list[str] = []
    tools: list[Step] = []
    for item in items or done:
        if item.get("type") == "message":
            text = "".join(str(part.get("text") or "") for part in item.get("content") or () if isinstance(part, dict))
            if text:
                texts.append(text)
        elif item.get("type") == "function_call":
            tools.append(_codex_call(str(item.get("name")), _json_object(str(item.get("arguments") or "{}"))))
        elif item.get("type") == "custom_tool_call":
            tools.append(_codex_call(str(item.get("name")), {"input": str(item.get("input") or "")}))
    return texts, tools, None


def _codex_call(name: str, arguments: dict[str, Any]) -> Step:
    """A scenario tool the server turns back into the same Codex call."""
    if name == "exec_command" and set(arguments) == {"cmd"} and isinstance(arguments["cmd"], str):
        return {"name": "Bash", "input": {"command": arguments["cmd"]}}
    if name == "apply_patch" and set(arguments) == {"input"}:
        patch = str(arguments["input"])
        if (added := _ADD_FILE.match(patch)) is not None:
            lines = [line[1:] for line in added["body"].splitlines()]
            content = "\n".join(lines) + "\n" if lines else ""
            return {"name": "Write", "input": {"file_path": _absolute(added["path"]), "content": content}}
        if (updated := _UPDATE_FILE.match(patch)) is not None:
            lines = updated["body"].splitlines()
            old = [line[1:] for line in lines if line.startswith("-")]
            new = [line[1:] for line in lines if line.startswith("+")]
            if lines == [f"-{line}" for line in old] + [f"+{line}" for line in new]:
                path = _absolute(updated["path"])
                edit = {"file_path": path, "old_string": "\n".join(old), "new_string": "\n".join(new)}
                return {"name": "Edit", "input": edit}
    return {"name": name, "input": arguments}


def _absolute(path: str) -> str:
    return path if path.startswith("/") else "{cwd}/" + path


def _gemini_answer(exchange: CassetteExchange) -> tuple[list[str], list[Step], str | None]:
    texts: list[str] = []
    tools: list[Step] = []
    text_open = False
    for data in _sse_data(exchange):
        for candidate in (data.get("candidates") or [])[:1]:
            content = candidate.get("content") if isinstance(candidate, dict) else None
            for part in (content or {}).get("parts") or ():
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str) and not part.get("thought"):
                    if text_open:
                        texts[-1] += part["text"]
                    else:
                        texts.append(part["text"])
                    text_open = True
                elif isinstance(part.get("functionCall"), dict):
                    call = part["functionCall"]
                    tools.append({"name": str(call.get("name")), "input": dict(call.get("args") or {})})
                    text_open = False
    return [text for text in texts if text], tools, None


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def _placed(step: Step, workspace: str | None) -> Step:
    """``step`` with the recorded workspace written as ``{cwd}``."""
    if not workspace:
        return step
    prefix = workspace.rstrip("/")

    def place(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(prefix, "{cwd}")
        if isinstance(value, dict):
            return {key: place(item) for key, item in value.items()}
        if isinstance(value, list):
            return [place(item) for item in value]
        return value

    return {key: (place(value) if key in ("text", "tools") else value) for key, value in step.items()}
