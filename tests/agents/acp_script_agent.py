"""A minimal ACP agent over stdio, in plain Python (no SDK), for tests and the benchmark.

``python acp_script_agent.py BEHAVIOUR [N [RATE]]`` answers ``initialize`` and ``session/new`` like
any agent, and on ``session/prompt``:

- ``echo``: sends N ``session/update`` agent message chunks (each carries ``sent_ns``, the
  sender's ``time.monotonic_ns()``; RATE per second when given, else as fast as it can), then
  ends the turn with ``end_turn``;
- ``garbage``: prints a line that is not JSON, a truncated object and a JSON array on stdout,
  one line on stderr, then answers ``end_turn``;
- ``exit``: writes two lines on stderr and exits with status 3 in the middle of the turn;
- ``fs``: asks the client to read and write files (paths from the prompt text, one per line:
  ``read PATH`` / ``write PATH``) and reports each answer back as a message chunk;
- ``silent``: never answers anything (not even ``initialize``);
- ``env``: says (one message chunk) the JSON object of the environment variables the prompt
  names (space-separated; a variable it does not have is ``null``), then answers ``end_turn``;
- ``ask``: announces a command (``touch asked.txt``, kind ``execute``) and asks permission for it
  (options ``yes``/``no`` of kinds ``allow_once``/``reject_once``); runs it when allowed, and
  writes ``unasked.txt`` first without asking anyone (what an agent that is trusted may do);
- ``load``: an agent that offers ``session/load`` and not ``session/resume``. Each prompt (turn
  N of the session) runs ``echo N`` (a ``tool_call`` of kind ``execute`` and its completion),
  says ``turn N: PROMPT``, reports a ``usage_update`` whose USD cost is N cents, and answers
  ``end_turn`` with usage; every update is kept in ``$HOME/.acp-script-agent/SESSION.jsonl``.
  ``session/load`` of a session kept there replays its updates (the prompts as
  ``user_message_chunk``) before it answers; an unknown session is error -32002.
- ``features``: an agent of the newer protocol, its sessions in memory. It offers
  ``session/list`` (newest first, two a page, ``nextCursor`` the next offset, filtered by
  ``cwd``), ``session/close``, ``session/resume`` (no replay), ``session/load`` (replays the
  session's updates) and two config options, ``model`` (select: ``small``/``large``) and
  ``brave`` (boolean), set with ``session/set_config_option`` (each change also announced as a
  ``config_option_update``). Each prompt (turn N) sends ``session_info_update`` (the title is the
  first prompt), ``available_commands_update`` (``/turns``), ``config_option_update`` (as they
  are), ``usage_update`` (used 100·N of 1000, cost N cents) and ``turn N: PROMPT``, answers
  ``end_turn`` with token usage — and *then*, after its turn ended, sends ``late N`` and a
  ``usage_update`` costing N.5 cents. A prompt ``withdraw`` asks permission for ``touch
  withdrawn.txt`` and at once withdraws the request (``$/cancel_request``), then says what the
  request was answered (``answered: …``); a prompt ``withdraw one`` asks for ``touch
  withdrawn.txt`` and ``touch kept.txt`` at once and withdraws only the first, says what each was
  answered, runs ``touch kept.txt`` if it was allowed, and ends the turn when both are answered; a
  prompt ``two at once`` asks for ``touch one.txt`` and ``touch two.txt`` at once (both
  commands), makes each file that was allowed, and ends the turn when both are answered; a
  prompt ``hang`` says ``hanging`` and answers only
  ``session/cancel`` (``cancelled``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def chunk(session: str, text: str, sent_ns: int | None = None) -> dict[str, object]:
    update: dict[str, object] = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    if sent_ns is not None:
        update["_meta"] = {"sent_ns": sent_ns}
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}


def _update(session: str, update: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}


def load_agent() -> int:
    """The ``load`` behaviour (see the module's docstring)."""
    state = Path(os.environ.get("HOME", ".")) / ".acp-script-agent"
    state.mkdir(parents=True, exist_ok=True)
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}, "authMethods": []}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "session/new":
            session = "load-" + uuid.uuid4().hex[:12]
            (state / f"{session}.jsonl").touch()
            send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": session}})
        elif method == "session/load":
            history = state / f"{params.get('sessionId')}.jsonl"
            if not history.is_file():
                send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32002, "message": "no such session"}})
                continue
            for kept in history.read_text().splitlines():
                send(_update(params["sessionId"], json.loads(kept)))
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        elif method == "session/prompt":
            session = params["sessionId"]
            history = state / f"{session}.jsonl"
            kept = history.read_text().splitlines()
            turn = 1 + sum(1 for line in kept if '"user_message_chunk"' in line)
            text = params["prompt"][0]["text"]
            call = {"toolCallId": f"call-{turn}", "title": f"echo {turn}", "kind": "execute"}
            updates: list[dict[str, object]] = [
                {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}},
                {"sessionUpdate": "tool_call", "status": "pending", "rawInput": {"command": f"echo {turn}"}, **call},
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call["toolCallId"],
                    "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text", "text": f"{turn}\n"}}],
                },
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"turn {turn}: {text}"}},
                {
                    "sessionUpdate": "usage_update",
                    "used": 100 * turn,
                    "size": 1000,
                    "cost": {"amount": turn / 100, "currency": "USD"},
                },
            ]
            with history.open("a") as out:
                for update in updates:
                    out.write(json.dumps(update) + "\n")
            for update in updates[1:]:
                send(_update(session, update))
            usage = {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}
            send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn", "usage": usage}})
        elif request_id is not None and method is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no {method}"}})
    return 0


def _config_options(state: dict[str, object]) -> list[dict[str, object]]:
    choices = [{"value": "small", "name": "Small"}, {"value": "large", "name": "Large"}]
    return [
        {"id": "model", "name": "Model", "type": "select", "currentValue": state["model"], "options": choices},
        {"id": "brave", "name": "Brave", "type": "boolean", "currentValue": state["brave"]},
    ]


def _error(request_id: object, code: int, message: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


_YES_NO: list[dict[str, object]] = [
    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]


def features_agent() -> int:
    """The ``features`` behaviour (see the module's docstring)."""
    sessions: dict[str, dict[str, object]] = {}  # in creation order
    options: dict[str, object] = {"model": "small", "brave": False}
    asked: dict[object, tuple[object, str]] = {}  # our permission request id -> (its prompt request, session)
    next_id = 1000
    kept_request: object = None  # the request ``withdraw one`` does not withdraw
    touches: dict[object, str] = {}  # ``two at once``: our permission request id -> the file it makes
    hanging: dict[str, object] = {}  # session -> its prompt waiting for session/cancel
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method is None:  # the answer to a permission we asked for (and withdrew)
            found = asked.pop(request_id, None)
            if found is not None:
                prompt_id, session = found
                answer = message.get("error") or message.get("result")
                send(chunk(session, f"answered: {json.dumps(answer, sort_keys=True)}"))
                approved = (answer or {}).get("outcome", {}).get("optionId") == "yes"
                if approved and request_id == kept_request:
                    open("kept.txt", "w").close()
                if approved and request_id in touches:
                    open(touches.pop(request_id), "w").close()
                if prompt_id not in [prompt for prompt, _ in asked.values()]:
                    send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
            continue
        if method == "initialize":
            capabilities = {"loadSession": True, "sessionCapabilities": {"list": {}, "close": {}, "resume": {}}}
            result = {"protocolVersion": 1, "agentCapabilities": capabilities, "authMethods": []}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "session/new":
            session = f"feat-{len(sessions) + 1}"
            sessions[session] = {"cwd": params.get("cwd"), "updates": [], "title": None, "turns": 0}
            result = {"sessionId": session, "configOptions": _config_options(options)}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "session/list":
            listed = [
                {"sessionId": sid, "cwd": kept["cwd"], "title": kept["title"]}
                for sid, kept in reversed(sessions.items())
                if params.get("cwd") in (None, kept["cwd"])
            ]
            start = int(params.get("cursor") or 0)
            page: dict[str, object] = {"sessions": listed[start : start + 2]}
            if start + 2 < len(listed):
                page["nextCursor"] = str(start + 2)
            send({"jsonrpc": "2.0", "id": request_id, "result": page})
        elif method in ("session/close", "session/resume", "session/load"):
            session = str(params.get("sessionId"))
            if session not in sessions:
                send(_error(request_id, -32002, f"no session {session}"))
                continue
            if method == "session/close":
                del sessions[session]
                send({"jsonrpc": "2.0", "id": request_id, "result": {}})
                continue
            if method == "session/load":
                for kept_update in sessions[session]["updates"]:  # type: ignore[attr-defined]
                    send(_update(session, kept_update))
            send({"jsonrpc": "2.0", "id": request_id, "result": {"configOptions": _config_options(options)}})
        elif method == "session/set_config_option":
            option, value = params.get("configId"), params.get("value")
            valid = (option == "brave" and isinstance(value, bool)) or (
                option == "model" and value in ("small", "large")
            )
            if not valid:
                send(_error(request_id, -32602, f"bad value {value!r} for {option}"))
                continue
            options[str(option)] = value
            update = {"sessionUpdate": "config_option_update", "configOptions": _config_options(options)}
            send(_update(params["sessionId"], update))
            send({"jsonrpc": "2.0", "id": request_id, "result": {"configOptions": _config_options(options)}})
        elif method == "session/prompt":
            session = params["sessionId"]
            kept = sessions[session]
            text = params["prompt"][0]["text"]
            if text in ("withdraw", "withdraw one"):
                choices = _YES_NO
                names = ["withdrawn"] + (["kept"] if text == "withdraw one" else [])
                for name in names:
                    call = {"toolCallId": f"{name}-1", "title": f"touch {name}.txt", "kind": "execute"}
                    call["rawInput"] = {"command": f"touch {name}.txt"}
                    if name == "kept":  # a plan's review: another kind of gate than the command's
                        plan = [{"content": "touch kept.txt", "priority": "high", "status": "pending"}]
                        send(_update(session, {"sessionUpdate": "plan", "entries": plan}))
                        call.update(kind="switch_mode", rawInput={"mode": "code"})
                    send(_update(session, {"sessionUpdate": "tool_call", "status": "pending", **call}))
                    next_id += 1
                    asked[next_id] = (request_id, session)
                    ask = {"sessionId": session, "toolCall": call, "options": choices}
                    send({"jsonrpc": "2.0", "id": next_id, "method": "session/request_permission", "params": ask})
                    if name == "kept":
                        kept_request = next_id
                withdrawn = next_id - len(names) + 1
                send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": withdrawn}})
                continue
            if text == "two at once":  # two commands asked about at once, neither withdrawn
                for name in ("one", "two"):
                    call = {"toolCallId": f"{name}-1", "title": f"touch {name}.txt", "kind": "execute"}
                    call["rawInput"] = {"command": f"touch {name}.txt"}
                    send(_update(session, {"sessionUpdate": "tool_call", "status": "pending", **call}))
                    next_id += 1
                    asked[next_id] = (request_id, session)
                    touches[next_id] = f"{name}.txt"
                    ask = {"sessionId": session, "toolCall": call, "options": _YES_NO}
                    send({"jsonrpc": "2.0", "id": next_id, "method": "session/request_permission", "params": ask})
                continue
            if text == "hang":
                hanging[session] = request_id
                send(chunk(session, "hanging"))
                continue
            turn = int(kept["turns"]) + 1  # type: ignore[call-overload]
            kept["turns"] = turn
            if kept["title"] is None:
                kept["title"] = text
            updates: list[dict[str, object]] = [
                {
                    "sessionUpdate": "session_info_update",
                    "title": kept["title"],
                    "updatedAt": f"2026-12-02T10:0{turn}:00Z",
                },
                {
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": [{"name": "turns", "description": "how many turns so far"}],
                },
                {"sessionUpdate": "config_option_update", "configOptions": _config_options(options)},
                {
                    "sessionUpdate": "usage_update",
                    "used": 100 * turn,
                    "size": 1000,
                    "cost": {"amount": turn / 100, "currency": "USD"},
                },
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"turn {turn}: {text}"}},
            ]
            late: list[dict[str, object]] = [
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"late {turn}"}},
                {
                    "sessionUpdate": "usage_update",
                    "used": 100 * turn + 50,
                    "size": 1000,
                    "cost": {"amount": (turn + 0.5) / 100, "currency": "USD"},
                },
            ]
            kept["updates"].extend(updates + late)  # type: ignore[attr-defined]
            for update in updates:
                send(_update(session, update))
            usage = {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}
            send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn", "usage": usage}})
            for update in late:
                send(_update(session, update))
        elif method == "session/cancel":
            waiting = hanging.pop(str(params.get("sessionId")), None)
            if waiting is not None:
                send({"jsonrpc": "2.0", "id": waiting, "result": {"stopReason": "cancelled"}})
        elif request_id is not None:
            send(_error(request_id, -32601, f"no {method}"))
    return 0


def main() -> int:
    behaviour = sys.argv[1]
    if behaviour == "load":
        return load_agent()
    if behaviour == "features":
        return features_agent()
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    if behaviour == "silent":
        for _ in sys.stdin:
            pass
        time.sleep(3600)
        return 0
    session = "script-session"
    next_id = 100
    pending_fs: dict[object, tuple[str, str]] = {}
    prompt_id: object = None
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method is None:  # an answer to one of our requests
            if pending_fs.get(message.get("id"), ("",))[0] == "permission":
                pending_fs.pop(message.get("id"))
                outcome = (message.get("result") or {}).get("outcome") or {}
                allowed = outcome.get("optionId") == "yes"
                if allowed:
                    open("asked.txt", "w").close()
                update = {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "call-1",
                    "status": "completed" if allowed else "failed",
                    "content": [
                        {"type": "content", "content": {"type": "text", "text": "ok" if allowed else "denied"}}
                    ],
                }
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})
                send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
                continue
            if message.get("id") in pending_fs:
                kind, path = pending_fs.pop(message.get("id"))
                result = message.get("error") or message.get("result")
                send(chunk(session, f"{kind} {path}: {json.dumps(result)}"))
            if not pending_fs and behaviour == "fs":
                send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
            continue
        request_id = message.get("id")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {"loadSession": False}, "authMethods": []}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": session}})
        elif method == "session/prompt":
            prompt_id = request_id
            if behaviour == "echo":
                started = time.monotonic()
                for index in range(count):
                    if rate:
                        delay = started + index / rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                    send(chunk(session, f"chunk {index}", time.monotonic_ns()))
            elif behaviour == "env":
                names = message["params"]["prompt"][0]["text"].split()
                send(chunk(session, json.dumps({name: os.environ.get(name) for name in names})))
            elif behaviour == "garbage":
                sys.stdout.write("this line is not JSON\n")
                sys.stdout.write('{"jsonrpc": "2.0", "method": "session/upd\n')
                sys.stdout.write("[1, 2, 3]\n")
                sys.stdout.flush()
                sys.stderr.write("a line on stderr\n")
                sys.stderr.flush()
                send(chunk(session, "still here"))
            elif behaviour == "exit":
                send(chunk(session, "about to fail"))
                sys.stderr.write("fatal: the agent lost its mind\nsecond line of the report\n")
                sys.stderr.flush()
                return 3
            elif behaviour == "ask":
                with open("unasked.txt", "w") as unasked:
                    unasked.write("written without asking\n")
                call = {
                    "toolCallId": "call-1",
                    "title": "touch asked.txt",
                    "kind": "execute",
                    "rawInput": {"command": "touch asked.txt"},
                }
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {
                            "sessionId": session,
                            "update": {"sessionUpdate": "tool_call", "status": "pending", **call},
                        },
                    }
                )
                options = [
                    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                    {"optionId": "no", "name": "No", "kind": "reject_once"},
                ]
                next_id += 1
                pending_fs[next_id] = ("permission", "touch asked.txt")
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": next_id,
                        "method": "session/request_permission",
                        "params": {"sessionId": session, "toolCall": call, "options": options},
                    }
                )
                continue
            elif behaviour == "fs":
                text = message["params"]["prompt"][0]["text"]
                for order in text.splitlines():
                    kind, path = order.split(" ", 1)
                    next_id += 1
                    params: dict[str, object] = {"sessionId": session, "path": path}
                    if kind == "write":
                        params["content"] = "written by the agent\n"
                    pending_fs[next_id] = (kind, path)
                    method_name = "fs/write_text_file" if kind == "write" else "fs/read_text_file"
                    send({"jsonrpc": "2.0", "id": next_id, "method": method_name, "params": params})
                continue
            send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})
        elif method == "session/cancel":
            continue
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no {method}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
