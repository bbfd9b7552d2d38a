"""Explicit reminders, detected in code, in the languages kept is measured in.

A user asking for an exact reminder, alarm or timer wants a scheduled task
(core/reminders), never an inferred follow-up; an assistant reply saying it
scheduled one marks the same. An exchange may ask for one and tell of
something else: only the reminder's part is kept from becoming a follow-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.commitments.candidates import Candidate
from core.commitments.exchange import Exchange
from core.commitments.prefilter import CUE_STEMS, has_cue
from core.commitments.text import fold


def _any(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# A user asking for an exact reminder, alarm or timer (these belong to
# scheduled tasks). Patterns run on fold()ed text.
_REMINDER_REQUEST = _any(
    [
        # English
        r"\bremind (?:me|us)\b",
        r"\b(?:set|add|create|schedule|make|need|want)\b.{0,20}\b(?:reminders?|alarm|timer)\b",
        r"\b(?:ping|notify|alert|wake|nudge|text|message) me (?:up )?(?:at|in|on|tomorrow|"
        r"tonight|every|when)\b",
        r"\b(?:let me know|tell me) (?:at|in) \d",
        r"\bdon t let me forget\b",
        # French
        r"\brappel(?:le|ez) moi\b",
        r"\b(?:peux|pourrais|pouvez|pourriez) (?:tu |vous )?me (?:le |la |les )?rappeler\b",
        r"\bfai(?:s|tes) moi penser\b",
        r"\b(?:mets|mettez|programme|programmez|cree|creez|ajoute|ajoutez)\b.{0,15}"
        r"\b(?:rappel|reveil|minuteur|alarme)\b",
        r"\bpre(?:viens|venez) moi\b",
        r"\bfai(?:s|tes) moi signe\b",
        r"\b(?:peux|pourrais|pouvez|pourriez) (?:tu |vous )?me faire signe\b",
        r"\breveille(?:z)? moi\b",
        # German
        # "ich erinnere mich" means "I remember"; only the imperative asks.
        r"(?<!ich )\berinnere? mich\b",
        r"\b(?:kannst du|konntest du|konnen sie|konnten sie)\b.{0,30}\berinnern\b",
        r"\berinnern sie mich\b",
        r"\b(?:stell|stelle|setz|setze|erstell|erstelle|mach|mache)\b.{0,20}"
        r"\b(?:erinnerung|wecker|timer)\b",
        r"\bweck(?:e|en sie)? mich\b",
        # Spanish
        r"\brecuerd(?:a|e)me\b",
        r"\brecordarme\b",
        r"\bavis(?:a|e)me\b",
        r"\bdespiert(?:a|e)me\b",
        r"\b(?:pon|ponme|crea|creame|programa|anade|agrega)\b.{0,20}"
        r"\b(?:recordatorio|alarma|temporizador)\b",
        # Turkish: hatırlat, hatırlatır mısın, bana hatırlat, hatırlatma kur
        r"\bhat[ıi]rlat",
        r"\buyand[ıi]r",
        r"\b(?:alarm|sayac|zamanlay[ıi]c[ıi])\b.{0,25}\bkur",
        # A few more languages people write in
        r"\bricord(?:ami|armi)\b",  # Italian
        r"\b(?:lembre me|me lembre|me lembra|lembrete)\b",  # Portuguese
        r"\bherinner (?:me|mij)\b",  # Dutch
        r"\bprzypomnij mi\b",  # Polish
        r"напомни",  # Russian, Ukrainian
        # Persian and Arabic (Arabic and Persian yeh / kaf both)
        r"[یي]اد[مم]? ?(?:بنداز|بیار|بياز|بنداز[یي]د)",
        r"[یي]اداور[یي] (?:کن|ک[نن]ید|بذار|تنظ[یي]م)",
        r"ب[یي]دار[مم] کن",
        r"(?:الارم|تا[یي]مر|هشدار)\b.{0,25}(?:بذار|بگذار|تنظ[یي]م)",
        r"\bت?(?:[ذف]كرن[يی]|[ذف]کرن[يی]|ذكرين[يی]|نبهن[يی]|صح[يی]?ن[يی])\b",
        r"(?:اضبط|اظبط|ظبط|حط|ضع|شغل)\S{0,4}\s.{0,12}(?:منبه|تذك[يی]ر|مؤقت|موقت|تا[يی]مر)",
        # Thai: remind, wake, alarm, timer
        r"เตือน(?:ฉัน|ผม|หนู|เรา|ด้วย|หน่อย|ให้)|ช่วยเตือน|ปลุก|ตั้งนาฬิกา|จับเวลา|ตั้งเวลา",
        # Chinese
        r"提醒我|叫醒|叫我起床|闹钟|定时|计时器|倒计时|到时候叫我",
        # Japanese
        r"リマインド|思い出させて|アラーム|タイマー|起こして|通知して|知らせて",
    ]
)

# An assistant reply saying it scheduled something: the exchange is a
# scheduled task, not an inferred follow-up.
_REMINDER_SCHEDULED = _any(
    [
        r"\bi(?: ll| will) remind you\b",
        r"\bje te fais signe\b",
        r"\balarm\S* (?:\S+ )?kur(?:dum|uldu)|sayac (?:basladı|baslad[ıi]|kuruldu)",
        r"ب[ذف]كرك|بصح[يی]ك|(?:التا[يی]مر|المنبه) (?:اشتغل|اتضبط)",
        r"تا[یي]مر.{0,20}شروع شد",
        r"闹钟已经设|计时开始",
        r"\b(?:i ve|i have) (?:set|scheduled|created|added) (?:up )?(?:a |an |the |your )?"
        r"(?:reminder|alarm|timer)\b",
        r"\b(?:reminder|alarm|timer) (?:is |has been )?(?:set|scheduled|created|added)\b",
        r"\bje (?:te|vous) (?:le |la |les )?rappellerai\b",
        r"\brappel (?:programme|cree|ajoute|enregistre)\b",
        r"\bich erinnere (?:dich|sie)\b",
        r"\berinnerung (?:ist |wurde )?(?:gesetzt|erstellt|eingerichtet|gespeichert)\b",
        r"\bte (?:lo |la |los |las )?recordare\b",
        r"\brecordatorio (?:creado|programado|configurado|establecido)\b",
        r"hat[ıi]rlatacag[ıi]m",
        r"hat[ıi]rlatma (?:kurdum|ayarlad[ıi]m|olusturdum|kuruldu|ayarland[ıi]|olusturuldu)",
        r"[یي]ادت (?:م[یي]ندازم|م[یي]ارم)|[یي]اداور[یي] (?:تنظ[یي]م شد|گذاشتم)",
        r"(?:سا|ه|ح)[ذف]كرك|(?:سا|ه|ح)[ذف]کرک|(?:ضبطت|ظبطت) (?:منبه|تذك[يی]ر)",
        r"จะเตือน|ตั้งเตือน|ตั้งปลุก|ตั้งนาฬิกาปลุก",
        r"我会提醒你|会提醒你|已(?:经)?(?:设置|设好)|闹钟已",
        r"リマインドします|お知らせします|アラームを(?:セット|設定)|起こします",
    ]
)

# A candidate whose own words say it is a reminder (the model ignored the prompt).
_REMINDER_CANDIDATE = _any([r"\bremind(?:er|ers|ed|ing)?\b", r"\bscheduled task\b"])


# Every pattern above needs one of these substrings of the folded text; the
# big alternations are slow on a long message, the stems are not,
# and almost no message contains any of them. Keep in step with the patterns.
_STEMS = (
    "remind", "alarm", "timer", "ping me", "notify me", "alert me", "wake me", "nudge me",
    "text me", "message me", "let me know", "tell me", "forget", "scheduled task",
    "rappel", "penser", "reveil", "minuteur", "previen", "prevenez",
    "erinner", "weck", "recuerd", "record", "avis", "despiert", "temporizador",
    "hatırlat", "hatirlat", "ricord", "lembr", "herinner", "przypomnij",
    "напомни", "提醒", "リマインド", "思い出させて",
    "یاد", "ياد", "بیدار", "الارم", "تایمر", "هشدار", "كرن", "کرن", "نبهن", "صح", "منبه",
    "تذك", "مؤقت", "موقت", "كرك", "کرک", "เตือน", "ปลุก", "ตั้งนาฬิกา", "จับเวลา", "ตั้งเวลา",
    "叫醒我", "闹钟", "定时", "计时器", "叫我", "设置", "设好", "アラーム", "タイマー",
    "起こ", "通知して", "知らせ", "signe", "reveille", "uyand", "sayac", "zamanlay", "alarm",
    "صحن", "صحي", "اظبط", "شغل", "تایمر", "تايمر", "叫醒", "起床", "倒计时", "计时", "كر", "کر",
)  # fmt: skip


def _search(pattern: re.Pattern[str], folded: str) -> bool:
    return any(stem in folded for stem in _STEMS) and pattern.search(folded) is not None


def is_reminder_request(user_text: str) -> bool:
    """True when the user asks for an exact reminder, alarm or timer."""
    return _search(_REMINDER_REQUEST, fold(user_text))


def says_reminder_scheduled(assistant_text: str) -> bool:
    return _search(_REMINDER_SCHEDULED, fold(assistant_text))


def is_reminder_candidate(candidate: Candidate) -> bool:
    text = fold(f"{candidate.reason} {candidate.suggested_text} {candidate.dedupe_key}")
    return _search(_REMINDER_REQUEST, text) or _search(_REMINDER_CANDIDATE, text)


# --- an exchange that asks for a reminder and says more ----------------------

# Where one request ends and the next thing said begins: sentence marks,
# dashes, commas, and "and" / "but" in the set's languages. Thai writes a
# space between phrases, so a space ends a Thai clause.
_CLAUSE_BREAK = re.compile(
    r"[.!?;:,\n\u2014\u2013\u060c\u061b\u061f\u3001\u3002\uff01\uff0c\uff1b\uff1f]+"
    r"|\s+-\s+"
    r"|\s(?:and|but|also|et|mais|aussi|y|pero|und|aber|ve|ama|ayrica|ayrıca|اما|ولی|لكن|ولكن|لکن)\s"
    r"|\sو(?=\S)|(?<=[\u0e00-\u0e7f])\s+(?=[\u0e00-\u0e7f])"
)
_WORD = re.compile(r"\w+")
_CJK_THAI = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff]")


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_BREAK.split(fold(text)) if c.strip()]


# Words of when ("tomorrow", "friday", "明天"): a reminder and the matter told
# beside it often share them, so they tell neither apart.
# Short stems ("mai", "sali") name a word only whole; longer ones also its
# forms ("tomorrow's", "fridays").
_WHEN = frozenset(fold(stem) for stem in CUE_STEMS["time"] if " " not in fold(stem))
_WHEN_FORMS = tuple(stem for stem in _WHEN if len(stem) >= 5)


def _tokens(text: str) -> set[str]:
    """Words of three letters or more; in scripts without spaces, letter
    pairs; neither words of when nor numbers."""
    out: set[str] = set()
    for word in _WORD.findall(fold(text)):
        if _CJK_THAI.search(word):
            out.update(word[i : i + 2] for i in range(len(word) - 1))
        elif len(word) >= 3:
            out.add(word)
    return {t for t in out if not (t.isdigit() or t in _WHEN or t.startswith(_WHEN_FORMS))}


@dataclass(frozen=True, slots=True)
class ReminderSplit:
    """The words of an exchange that ask for (or confirm) a reminder, and the rest."""

    reminder: str
    rest: str
    rest_has_cue: bool

    def claims(self, candidate: Candidate) -> str | None:
        """Why the candidate belongs to the reminder, or None when it is the rest's.

        With nothing else said that could be followed up, every candidate is
        the reminder's; otherwise the one whose words are closer to the
        reminder's than to the rest's."""
        if not self.rest_has_cue:
            return "exchange is an explicit reminder"
        words = _tokens(f"{candidate.reason} {candidate.suggested_text} {candidate.dedupe_key}")
        if len(words & _tokens(self.reminder)) > len(words & _tokens(self.rest)):
            return "candidate is about the explicit reminder of its exchange"
        return None


def split_reminders(exchanges: Sequence[Exchange]) -> ReminderSplit | None:
    """None when no exchange asks for or confirms a reminder; else the split.

    "Remind me at 3 to call the bank, and I have an interview tomorrow"
    asks for a scheduled task (handled by the reminder tool) and tells of
    an interview (a follow-up): only the first must not become one."""
    reminder: list[str] = []
    rest: list[str] = []
    user_rest: list[str] = []
    found = False
    for e in exchanges:
        for text, test, side in (
            (e.user_text, is_reminder_request, user_rest),
            (e.assistant_text, says_reminder_scheduled, None),
        ):
            for clause in _clauses(text):
                if test(clause):
                    found = True
                    reminder.append(clause)
                else:
                    rest.append(clause)
                    if side is not None:
                        side.append(clause)
    if not found:
        return None
    # What the user said decides whether anything besides the reminder is
    # there; the assistant's "good luck!" is not a second matter.
    return ReminderSplit(" ".join(reminder), " ".join(rest), has_cue(" ".join(user_rest)))
