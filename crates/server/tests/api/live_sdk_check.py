"""Checks Switchboard's GPT-Live traffic against the official `openai` SDK's own `live` types.

Reads a JSON list of frames ({"kind": "accept"|"reject"|"refer"|"hangup"|"client_event",
"body": ...}) from the file named on the command line. Each is validated with pydantic against
the SDK's type (`SessionAcceptParams`, `SessionRejectParams`, `SessionReferParams`,
`ConnectClientEvent`), and every object in it must use only fields the SDK declares (OpenAI
refuses unknown ones). Prints one line per problem and exits 1 if there is any.
"""

import json
import sys
import types
import typing

from pydantic import BaseModel, ConfigDict, TypeAdapter
from typing_extensions import NotRequired, Required, is_typeddict

from openai.types.live import ConnectClientEvent, SessionAcceptParams
from openai.types.live.session_refer_params import SessionReferParams
from openai.types.live.session_reject_params import SessionRejectParams


def strict(value, tp) -> list:
    """Fields of `value` the type `tp` does not declare, as dotted paths (empty: none)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Required, NotRequired, typing.Annotated):
        return strict(value, args[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if tagged(a, value)] or list(args)
        options = [strict(value, a) for a in members]
        return min(options, key=len) if options else []
    if is_typeddict(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp, include_extras=True)
        problems = [k for k in value if k not in hints]
        for k, v in value.items():
            if k in hints:
                problems += [f"{k}.{p}" for p in strict(v, hints[k])]
        return problems
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(value, dict):
        fields = {f.alias or name: f for name, f in tp.model_fields.items()}
        problems = [k for k in value if k not in fields]
        for k, v in value.items():
            if k in fields:
                problems += [f"{k}.{p}" for p in strict(v, fields[k].annotation)]
        return problems
    if origin in (list, typing.List, typing.Iterable, typing.Sequence) or (
        origin is not None and getattr(origin, "__name__", "") in ("Iterable", "Sequence")
    ):
        if isinstance(value, list) and args:
            out = []
            for i, item in enumerate(value):
                out += [f"[{i}].{p}" for p in strict(item, args[0])]
            return out
    return []


def tagged(tp, value) -> bool:
    """Whether `tp` is an object type whose `type` literal is `value["type"]`."""
    if not isinstance(value, dict) or "type" not in value:
        return False
    if is_typeddict(tp):
        hint = typing.get_type_hints(tp, include_extras=True).get("type")
    elif isinstance(tp, type) and issubclass(tp, BaseModel) and "type" in tp.model_fields:
        hint = tp.model_fields["type"].annotation
    else:
        return False
    while typing.get_origin(hint) in (Required, NotRequired, typing.Annotated):
        hint = typing.get_args(hint)[0]
    return typing.get_origin(hint) is typing.Literal and value["type"] in typing.get_args(hint)


class _Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")


def checker(tp):
    wrapper = type("Body", (_Forbid,), {"__annotations__": {"body": tp}})
    return lambda body: wrapper(body=body)


CHECKS = {
    "accept": (checker(SessionAcceptParams), SessionAcceptParams),
    "reject": (checker(SessionRejectParams), SessionRejectParams),
    "refer": (checker(SessionReferParams), SessionReferParams),
    "client_event": (TypeAdapter(ConnectClientEvent).validate_python, ConnectClientEvent),
}


def main() -> int:
    frames = json.load(open(sys.argv[1]))
    problems = []
    seen = {}
    for frame in frames:
        kind, body = frame["kind"], frame["body"]
        seen[kind] = seen.get(kind, 0) + 1
        if kind == "hangup":
            if body is not None:
                problems.append(f"hangup: takes no body, got {body!r}")
            continue
        validate, tp = CHECKS[kind]
        try:
            validate(body)
        except Exception as e:  # pydantic's ValidationError, or a type it cannot build
            problems.append(f"{kind}: {json.dumps(body)[:300]}: {e}")
            continue
        unknown = strict(body, tp)
        if unknown:
            problems.append(f"{kind}: unknown fields {unknown} in {json.dumps(body)[:300]}")
    for p in problems:
        print(p)
    print(f"checked {sum(seen.values())} frames {sorted(seen.items())}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
