"""LoCoMo's native ``locomo10.json`` → one memory per dialog turn (dated by its session), one
query per question with evidence, grouped by conversation.

Evidence ids are repaired where the intent is plain (``"D8:6; D9:17"``, ``"D:11:26"``,
``"D30:05"``), ids that match no turn of the conversation are skipped, and a question left
without evidence is skipped — matching the converted LoCoMo files (each skip counted)."""

from __future__ import annotations

import calendar
import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

from eval.importers._base import ImportResult, Importer, copy_licences, dump
from eval.importers._files import write_atomically
from eval.progress import iterate as _progress
from retrieval.dataset import loads_strict

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_LOCOMO_TIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*", re.IGNORECASE)
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


def parse_locomo_time(value: str) -> datetime:
    """LoCoMo's session time ("1:56 pm on 8 May, 2023") → a naive datetime (local time, no zone)."""
    match = _LOCOMO_TIME.fullmatch(value) if isinstance(value, str) else None
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if not match or month is None:
        raise ValueError(f"not a LoCoMo date like '1:56 pm on 8 May, 2023': {value!r}")
    hour, minute = int(match.group(1)), int(match.group(2))
    if not 1 <= hour <= 12:
        raise ValueError(f"hour {hour} is not a 12-hour clock hour: {value!r}")
    hour = hour % 12 + (12 if match.group(3).lower() == "p" else 0)
    try:
        return datetime(int(match.group(6)), month, int(match.group(4)), hour, minute)
    except ValueError as error:
        raise ValueError(f"{error}: {value!r}") from None


def _normalize_evidence(raw: object, known: set[str], skipped: Counter, repaired: Counter) -> list[str]:
    """LoCoMo evidence list → valid, distinct turn ids (``D3:7``); odd ids are repaired or counted."""
    items = raw if isinstance(raw, list) else [raw] if raw not in (None, "") else []
    evidence: list[str] = []
    for item in items:
        tokens = [t for t in re.split(r"[;,\s]+", item) if t] if isinstance(item, str) else [item]
        for token in tokens:
            match = _EVIDENCE.fullmatch(token) if isinstance(token, str) else None
            if not match:
                skipped["malformed evidence ids"] += 1
                continue
            turn = f"D{int(match.group(1))}:{int(match.group(2))}"
            if turn != token or len(tokens) > 1:
                repaired["evidence ids"] += 1
            if turn in evidence:
                skipped["duplicate evidence ids"] += 1
            elif turn not in known:
                skipped["evidence ids not in their conversation"] += 1
            else:
                evidence.append(turn)
    return evidence


def _locomo_sessions(sample: dict, where: str) -> list[tuple[int, list, str | None]]:
    conversation = sample.get("conversation")
    if not isinstance(conversation, dict):
        raise ValueError(f"{where}: 'conversation' missing or not an object")
    sessions = []
    for key, turns in conversation.items():
        match = _SESSION.fullmatch(key)
        if not match:
            continue
        if not isinstance(turns, list):
            raise ValueError(f"{where}.conversation.{key}: expected a list of turns")
        sessions.append((int(match.group(1)), turns, conversation.get(f"{key}_date_time")))
    return sorted(sessions, key=lambda s: s[0])


def import_locomo(src: str | Path, dest: str | Path, *, force: bool = False, name: str | None = None) -> ImportResult:
    """LoCoMo's ``locomo10.json`` → one memory per dialog turn, one query per question with evidence."""
    src = Path(src)
    if not src.is_file():
        raise ValueError(f"{src}: not a file (expected LoCoMo's locomo10.json)")
    try:
        text = src.read_bytes().decode("utf-8-sig")
        samples = json.loads(text)
    except UnicodeDecodeError as error:
        raise ValueError(f"{src}: not valid UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{src}:{error.lineno}: json: malformed JSON ({error.msg} at column {error.colno})") from None
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{src}: json: {'nested too deeply' if isinstance(error, RecursionError) else error}") from None
    try:
        loads_strict(text)  # refuse duplicate keys (json.loads keeps the last silently)
    except ValueError as error:
        raise ValueError(f"{src}: {getattr(error, 'field', 'json')}: {getattr(error, 'message', error)}") from None
    if not isinstance(samples, list) or not samples:
        raise ValueError(f"{src}: expected a non-empty JSON list of conversations (LoCoMo's locomo10.json)")

    def build(tmp: Path, result: ImportResult) -> None:
        docs, queries, qrels = [], [], []
        latest: datetime | None = None
        groups: set[str] = set()
        for index, sample in enumerate(_progress(samples, "conversations", unit="conv")):
            where = f"{src.name}[{index}]"
            if not isinstance(sample, dict) or not isinstance(sample.get("sample_id"), str) or not sample["sample_id"]:
                raise ValueError(f"{where}: expected an object with a 'sample_id' string")
            group = sample["sample_id"]
            if group in groups:
                raise ValueError(f"{where}: duplicate sample_id {group!r}")
            groups.add(group)
            where = f"{src.name}[{index}] ({group})"
            known: set[str] = set()
            for number, turns, when_text in _locomo_sessions(sample, where):
                if not turns:
                    continue
                if when_text is None:
                    when = None
                    result.skipped["sessions without a date (turns left undated)"] += 1
                else:
                    try:
                        when = parse_locomo_time(when_text)
                    except ValueError as error:
                        raise ValueError(f"{where}.conversation.session_{number}_date_time: {error}") from None
                    latest = when if latest is None or when > latest else latest
                for position, turn in enumerate(turns):
                    at = f"{where}.conversation.session_{number}[{position}]"
                    if not isinstance(turn, dict):
                        raise ValueError(f"{at}: expected a turn object")
                    dia_id, speaker, text = turn.get("dia_id"), turn.get("speaker"), turn.get("text")
                    if not isinstance(dia_id, str) or not dia_id.strip():
                        raise ValueError(f"{at}: 'dia_id' missing or empty")
                    if dia_id in known:
                        raise ValueError(f"{at}: duplicate dia_id {dia_id!r}")
                    if not isinstance(speaker, str) or not isinstance(text, str):
                        raise ValueError(f"{at}: 'speaker' and 'text' must be strings")
                    known.add(dia_id)
                    caption = turn.get("blip_caption")
                    body = f"{speaker}: {text}" + (f" [shares {caption}]" if isinstance(caption, str) and caption else "")
                    doc = {"_id": f"{group}:{dia_id}", "title": "", "text": body, "group": group}
                    if when is not None:
                        doc["created_at"] = when.isoformat()
                    doc.update({"sample_id": group, "dia_id": dia_id, "session": number, "speaker": speaker})
                    if when_text is not None:
                        doc["timestamp"] = when_text
                    for key in ("blip_caption", "img_url"):
                        if turn.get(key):
                            doc[key] = turn[key]
                    docs.append(doc)
            qa = sample.get("qa", [])
            if not isinstance(qa, list):
                raise ValueError(f"{where}.qa: expected a list of questions")
            for position, item in enumerate(qa):
                at = f"{where}.qa[{position}]"
                if not isinstance(item, dict) or not isinstance(item.get("question"), str) or not item["question"].strip():
                    raise ValueError(f"{at}: expected an object with a non-empty 'question'")
                evidence = _normalize_evidence(item.get("evidence"), known, result.skipped, result.repaired)
                if not evidence:
                    result.skipped["questions without usable evidence"] += 1
                    continue
                category = item.get("category")
                query = {"_id": f"{group}:q{position}", "text": item["question"], "group": group}
                category_name = LOCOMO_CATEGORIES.get(category, f"category-{category}")
                query.update({"intent": category_name, "sample_id": group, "category": category,
                              "category_name": category_name, "evidence": evidence})
                for key in ("answer", "adversarial_answer"):
                    if key in item:
                        query[key] = item[key]
                queries.append(query)
                qrels.extend((query["_id"], f"{group}:{turn}") for turn in evidence)
        if not docs:
            raise ValueError(f"{src}: no dialog turns found")
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as out:
            out.writelines(dump(d) for d in docs)
        if queries:
            with open(tmp / "queries.jsonl", "w", encoding="utf-8") as out:
                out.writelines(dump(q) for q in queries)
            (tmp / "qrels").mkdir()
            with open(tmp / "qrels" / "test.tsv", "w", encoding="utf-8") as out:
                out.write("query-id\tcorpus-id\tscore\n")
                out.writelines(f"{q}\t{d}\t1\n" for q, d in qrels)
        copy_licences(src.parent, tmp)
        if latest is not None:
            card["reference_time"] = latest.isoformat()

    card = {
        "description": f"LoCoMo conversations imported from {src.name}: one memory per dialog turn "
                       "(dated by its session), one query per question with evidence; search within "
                       "the query's group (its conversation).",
        "languages": ["en"],
    }
    return write_atomically("locomo", dest, build, force=force, sources=[src], name=name, card=card)


IMPORTER = Importer("locomo", "LoCoMo's native locomo10.json",
                    lambda src, dest, **options: import_locomo(src, dest, **options),
                    source="LoCoMo's locomo10.json")
