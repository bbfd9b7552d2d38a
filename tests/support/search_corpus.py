"""A small multilingual corpus for search tests: messages, and queries that
must find one particular message as their top hit.

Each language has distractors that share characters or words with the
target (京都 inside 東京都, ภาษา without ไทย, 北 and 京 apart), so a query
only passes if the index really matches words and n-grams, not characters.
"""

from __future__ import annotations

ZWNJ = "\u200c"

MESSAGES: dict[str, str] = {
    # French, with accents; queried without them.
    "fr_school": "Les enfants sont rentrés de l'école très fatigués.",
    "fr_meet": "On se retrouve au café près de la gare à midi ?",
    "fr_xmas": "Joyeux Noël ! On fête ça chez mes grands-parents à Besançon.",
    "fr_noise": "Le café était froid mais la gare était belle.",
    # Persian: a word written with ZWNJ, another without it.
    "fa_zwnj": f"من می{ZWNJ}خواهم فردا به کتابخانه بروم",
    "fa_plain": "آنها میروند به بازار بزرگ شهر",
    "fa_noise": "کتاب خوبی بود و بازار شلوغ بود",
    # Thai, no spaces between words.
    "th_food": "วันนี้ฉันอยากกินข้าวผัดกุ้งที่ร้านใกล้บ้าน",
    "th_lang": "ฉันชอบเรียนภาษาไทยมากเพราะสนุก",
    "th_noise": "ภาษาอังกฤษยากกว่าที่คิด",
    # Turkish with dotted and dotless i.
    "tr_trip": "İstanbul'a gelecek hafta gidiyorum, Izmir'e değil.",
    "tr_noise": "Ankara'da toplantı var, ısınma sistemi bozuk.",
    # Japanese: kanji, hiragana and katakana together.
    "ja_tokyo": "来月、東京都庁に行く予定です。",
    "ja_kana": "新しいカタカナのメッセージをテストします",
    "ja_noise": "京都の寺はとてもきれいでした。",
    # Chinese.
    "zh_trip": "我下周要去北京出差，顺便看看天安门。",
    "zh_weather": "上海的天气今天很好",
    "zh_noise": "北方的冬天很冷，京剧很好听。",
    # Arabic with full diacritics; queried bare.
    "ar_lesson": "كَتَبَ الطَّالِبُ الدَّرْسَ فِي الْمَكْتَبَةِ",
    "ar_noise": "المكتب مغلق اليوم",
    # English: the phrase must beat the bag of the same words.
    "en_phrase": "The quarterly budget review is on Thursday.",
    "en_bag": "Review the budget before the quarterly meeting on Thursday.",
    "en_rare": "My grandmother's sourdough starter is named Gerald.",
}

# (query, key of the message that must be the top hit)
TOP_HITS: list[tuple[str, str]] = [
    ("ecole", "fr_school"),
    ("ÉCOLE fatigues", "fr_school"),
    ("noel besancon", "fr_xmas"),
    ("retrouve cafe", "fr_meet"),
    ("میخواهم", "fa_zwnj"),
    (f"می{ZWNJ}خواهم", "fa_zwnj"),
    (f"می{ZWNJ}روند", "fa_plain"),
    ("بازار بزرگ", "fa_plain"),
    ("ภาษาไทย", "th_lang"),
    ("ข้าวผัด", "th_food"),
    ("กุ้ง", "th_food"),
    ("istanbul", "tr_trip"),
    ("İSTANBUL", "tr_trip"),
    ("ısınma", "tr_noise"),
    ("izmir", "tr_trip"),
    ("東京都", "ja_tokyo"),
    ("東京", "ja_tokyo"),
    ("カタカナ", "ja_kana"),
    ("寺", "ja_noise"),
    ("北京", "zh_trip"),
    ("天安门", "zh_trip"),
    ("天气", "zh_weather"),
    ("冬", "zh_noise"),
    ("门", "zh_trip"),  # one character, at the end of its run
    ("كتب الطالب", "ar_lesson"),
    ("المكتبة", "ar_lesson"),
    ("المَكْتَب", "ar_noise"),
    ("budget review", "en_phrase"),
    ('"quarterly meeting"', "en_bag"),
    ("sourdough", "en_rare"),
    ("sourd*", "en_rare"),
    ("GERALD", "en_rare"),
]

# Queries that must find nothing: a word split differently, or characters
# that only occur apart.
NO_HITS: list[str] = [
    "北冬",  # 北 and 冬 are both in zh_noise, never next to each other
    "京剧院",
    "ภาษาจีน",
    "ecoles",
]
