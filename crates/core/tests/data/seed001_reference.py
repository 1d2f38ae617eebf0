"""Seed 001's `_build_refer_tool`, verbatim except for logging, run over the cases in
`seed001_refer_cases.json` to regenerate their `expected` members:

    python3 tests/data/seed001_reference.py

The Rust port must produce the same function for every case (tests/transfer.rs).
"""
import json
import pathlib
from types import SimpleNamespace as NS


def _build_refer_tool(refer):
    if not refer.enabled:
        return None
    destinations = [d for d in refer.destinations if d.enabled]
    if not destinations:
        return None
    destinations.sort(key=lambda d: d.priority, reverse=True)
    enum_destination_ids = []
    destination_hints = []
    for d in destinations:
        label = (d.label or d.destination_id).strip()
        opt_desc = (d.description_for_model or "").strip()
        description = f"{label} — {opt_desc}".strip(" —")
        enum_destination_ids.append(d.destination_id)
        destination_hints.append(f"{d.destination_id}: {description}")
    description_parts = []
    if refer.require_confirmation:
        description_parts.append(
            "Utiliser uniquement APRÈS confirmation explicite de l'appelant."
        )
    else:
        description_parts.append(
            "Utiliser lorsque l'appelant demande explicitement un transfert."
        )
    if refer.handoff_phrase:
        description_parts.append(
            f"Avant d'appeler l'outil, annoncer: {refer.handoff_phrase} "
            "(remplacer {{label}} par le libellé du service choisi)."
        )
    tool_description = " ".join(
        p.strip() for p in description_parts if p.strip()
    ).strip()
    params = {
        "type": "object",
        "properties": {
            "destination_id": {
                "type": "string",
                "enum": enum_destination_ids,
                "description": (
                    "Identifiant du service vers lequel transférer. "
                    f"Valeurs autorisées: {', '.join(enum_destination_ids)}. "
                    f"Détails: {' | '.join(destination_hints)}"
                ),
            },
            "reason": {
                "type": "string",
                "description": "Raison courte du transfert (optionnel).",
            },
        },
        "required": ["destination_id"],
        "additionalProperties": False,
    }
    return {"name": "request_transfer", "description": tool_description, "parameters": params}


def _refer(cfg):
    # The defaults of the Rust port: require_confirmation true, destination enabled true, priority 0.
    dests = [
        NS(
            destination_id=d["destination_id"],
            label=d.get("label"),
            description_for_model=d.get("description_for_model"),
            target_uri=d["target_uri"],
            enabled=d.get("enabled", True),
            priority=d.get("priority", 0),
        )
        for d in cfg.get("destinations", [])
    ]
    return NS(
        enabled=cfg["enabled"],
        require_confirmation=cfg.get("require_confirmation", True),
        handoff_phrase=cfg.get("handoff_phrase"),
        destinations=dests,
    )


if __name__ == "__main__":
    path = pathlib.Path(__file__).with_name("seed001_refer_cases.json")
    cases = json.loads(path.read_text(encoding="utf-8"))
    for case in cases:
        case["expected"] = _build_refer_tool(_refer(case["config"]))
    path.write_text(json.dumps(cases, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
