"""AR-Bench's episodes as `sounding eval arbench` plays them, and the environment's side of them:
the NPC's replies (the protocol: `arbench`)."""

from __future__ import annotations

import json
from pathlib import Path

from sounding.inquiry.domains import bulls_and_cows
from sounding.inquiry.llm import tasks

NPC_TOKENS = 64
GN_RULES = (
    "Guess a secret number of 4 distinct digits (0-9, a leading zero allowed). After each guess "
    "you are told how many digits are right and in the right position, and how many are right "
    "but in a different position."
)


def load_episodes(task: str, data: Path, limit: int | None) -> list[dict]:
    """The episodes of an AR-Bench file, each {id, context, choices, truth, npc}."""
    records = json.loads(data.read_text())
    episodes = []
    for index, record in enumerate(records[:limit] if limit else records):
        episode_id = str(record.get("index", index)) if isinstance(record, dict) else str(index)
        if task == "gn":
            episodes.append(make_episode(episode_id, GN_RULES, [], str(record), str(record)))
        elif task == "sp":
            episodes.append(
                make_episode(episode_id, record["surface"], [], record["bottom"], record["bottom"])
            )
        else:
            shown = record["initial_information"]
            victim = shown["victim"]
            context = (
                f"Time: {shown['time']}. Location: {shown['location']}.\n"
                f"Victim: {victim['name']}. {victim['introduction']}\n"
                f"Cause of death: {victim['cause_of_death']}. Murder weapon: {victim['murder_weapon']}.\n"
                "Suspects:\n" + "\n".join(f"- {s['name']}: {s['introduction']}" for s in shown["suspect"])
            )
            names = [s["name"] for s in shown["suspect"]]
            profiles = {s["name"]: s for s in record["suspects"]}
            episodes.append(make_episode(episode_id, context, names, names[record["label"]], profiles))
    return episodes


def make_episode(episode_id: str, context: str, choices: list[str], truth: str, npc) -> dict:
    """`npc` is what the environment's side knows: the secret, the hidden story, or the
    suspects' profiles by name."""
    return {"id": episode_id, "context": context, "choices": choices, "truth": truth, "npc": npc}


def gn_feedback(secret: str, guess: str) -> str:
    """AR-Bench's GN feedback sentence."""
    return bulls_and_cows.feedback_sentence(*bulls_and_cows.score(guess, secret))


def _profile(profile: dict) -> str:
    keys = ("introduction", "relationship", "story", "testimony", "timeline", "reason_at_scene", "evidence")
    parts = []
    for key in keys:
        value = profile.get(key)
        if isinstance(value, list):
            value = " ".join(
                f"{v.get('time', '')} {v.get('activity', '')}".strip() if isinstance(v, dict) else str(v)
                for v in value
            )
        if value:
            parts.append(f"{key.replace('_', ' ').capitalize()}: {value}")
    return "\n".join(parts)


async def npc_reply(models, task: str, episode: dict, question: str) -> str:
    if task == "gn":
        guess = question.strip()
        if len(guess) != 4 or not guess.isdigit() or len(set(guess)) != 4:
            return "That is not a valid guess: use 4 distinct digits."
        return gn_feedback(episode["npc"], guess)
    if task == "sp":
        referee = (
            f"You are the referee of a situation puzzle. The hidden story is:\n{episode['npc']}\n"
            "Answer the player's question about it with exactly one word: Yes, No or Unknown."
        )
        messages = [{"role": "system", "content": referee}, {"role": "user", "content": question}]
    else:
        suspect = tasks.addressed_suspect(question, episode["choices"])
        profile = episode["npc"].get(suspect, {})
        asked = question.split(":", 1)[1].strip() if ":" in question else question
        role = (
            f"You are {suspect}, a suspect questioned by a detective. {profile.get('task', '')}\n"
            f"{_profile(profile)}\nAnswer in one or two sentences, in character."
        )
        messages = [{"role": "system", "content": role}, {"role": "user", "content": asked}]
    pieces = [p.text async for p in models.generate(messages, max_new_tokens=NPC_TOKENS, timeout=600)]
    text = "".join(pieces).strip()
    if task == "sp":
        return tasks.yes_no_unknown(text)
    return text or "I have nothing to say."
