"""A cheap pre-filter in code: is an exchange worth an extraction call at all?

Most chat turns (thanks, a fact, a recipe, code) leave nothing open. A
follow-up needs something to follow: a time, an event, how the user is, or
a promise. An exchange with none of these cues, in any of the languages
kept is measured in, is not sent to the extraction model. The lists are
stems matched inside the folded text (so "tomorrow's", "interviews",
"yarınki" match), deliberately generous: a cue that fires on small talk
costs one call, a missing cue loses a follow-up. `kept eval extraction`
reports the recall this filter loses on the labelled set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.commitments.exchange import Exchange
from core.commitments.text import fold

# Stems, written as fold() leaves them: lower case, accents and apostrophes
# gone (é → e, ş → s, but Turkish ı stays ı), Arabic script with Persian
# yeh/kaf (see _script_fold).
CUE_STEMS: dict[str, tuple[str, ...]] = {
    "time": (
        # English
        "tomorrow", "tmrw", "tonight", "today", "this evening", "this afternoon",
        "this morning", "next week", "next month", "weekend", "monday", "tuesday",
        "wednesday", "thursday", "friday", "saturday", "sunday", "later", "soon", "upcoming",
        "in a few", "in two", "in three", "o clock", "deadline", "due ", "by the end", "until",
        "before the", "january", "february", "march", "april", "may ", "june", "july",
        "august", "september", "october", "november", "december", "ddl",
        # French
        "demain", "ce soir", "cet apres midi", "ce matin", "aujourd", "semaine prochaine",
        "mois prochain", "week end", "lundi", "mardi", "mercredi", "jeudi", "vendredi",
        "samedi", "dimanche", "bientot", "plus tard", "dans quelques", "echeance",
        "date limite", "avant la fin", "avant le", "jusqu", "janvier", "fevrier", "mars",
        "avril", "mai ", "juin", "juillet", "aout", "septembre", "octobre", "novembre",
        "decembre",
        # Spanish
        "manana", "esta noche", "esta tarde", "hoy", "semana que viene", "proxima semana",
        "mes que viene", "proximo mes", "fin de semana", "lunes", "martes", "miercoles",
        "jueves", "viernes", "sabado", "domingo", "pronto", "luego", "fecha limite", "plazo",
        "dentro de", "antes del", "antes de que", "hasta el", "enero", "febrero", "marzo",
        "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre", "noviembre",
        "diciembre",
        # German
        "morgen", "heute", "nachste woche", "nachsten woche", "kommende woche",
        "nachsten monat", "wochenende", "montag", "dienstag", "mittwoch", "donnerstag",
        "freitag", "samstag", "sonntag", "bald", "spater", "frist", "abgabe", " uhr", "bis zum",
        "januar", "februar", "marz", "april", "mai ", "juni", "juli", "august", "september",
        "oktober", "november", "dezember",
        # Turkish
        "yarın", "yarin", "bugun", "bu aksam", "bu gece", "haftaya", "gelecek hafta",
        "onumuzdeki", "hafta sonu", "haftasonu", "pazartesi", "salı", "sali", "carsamba",
        "persembe", "cuma", "pazar", "yakında", "yakinda", "sonra", "saat", "teslim",
        "son gun", "kadar", "ocak", "subat", "mart", "nisan", "mayıs", "mayis", "haziran",
        "temmuz", "agustos", "eylul", "ekim", "kasım", "kasim", "aralık", "aralik",
        # Persian
        "فردا", "امشب", "امروز", "هفته بعد", "هفته دیگه", "هفته اینده", "ماه بعد",
        "اخر هفته", "شنبه", "جمعه", "ساعت", "مهلت", "بعدا", "زود", "ددلاین", "تا اخر",
        "ژانویه", "فوریه", "مارس", "اوریل", "مه ", "ژوئن", "ژوئیه", "اوت", "سپتامبر", "اکتبر",
        "نوامبر", "دسامبر", "فروردین", "اردیبهشت", "خرداد", "تیر", "مرداد", "شهریور", "مهر",
        "ابان", "اذر", "دی ", "بهمن", "اسفند",
        # Arabic
        "غدا", "بکره", "بكرا", "الیله", "هذا المساء", "الیوم", "الاسبوع القادم",
        "الاسبوع الجای", "الاسبوع المقبل", "الشهر القادم", "نهایه الاسبوع", "السبت", "الاحد",
        "الاثنین", "الثلاثاء", "الاربعاء", "الخمیس", "الجمعه", "الساعه", "موعد", "قریبا",
        "بعد یومین", "بعدین", "قبل", "حتی", "لغایه", "ینایر", "فبرایر", "مارس", "ابریل",
        "مایو", "یونیو", "یولیو", "اغسطس", "سبتمبر", "اکتوبر", "نوفمبر", "دیسمبر", "کانون",
        "شباط", "اذار", "نیسان", "ایار", "حزیران", "تموز", "ایلول", "تشرین",
        # Thai
        "พรุ่งนี้", "คืนนี้", "วันนี้", "เย็นนี้", "บ่ายนี้", "เช้านี้", "สัปดาห์หน้า", "อาทิตย์หน้า",
        "เดือนหน้า", "สุดสัปดาห์", "เสาร์", "อาทิตย์", "จันทร์", "อังคาร", "พุธ", "พฤหัส", "ศุกร์",
        "โมง", "ทุ่ม", "นาฬิกา", "กำหนดส่ง", "เส้นตาย", "เดดไลน์", "เร็วๆนี้", "ทีหลัง", "ภายใน",
        "ก่อนวันที่", "มกรา", "กุมภา", "มีนา", "เมษา", "พฤษภา", "มิถุนา", "กรกฎา", "สิงหา",
        "กันยา", "ตุลา", "พฤศจิกา", "ธันวา",
        # Japanese
        "明日", "あした", "あす", "明後日", "あさって", "今夜", "今晩", "今日", "きょう", "来週",
        "来月", "週末", "曜", "時", "締め切り", "締切", "〆切", "期限", "今度", "後で", "あとで",
        "近いうち", "までに", "月末",
        # Chinese
        "明天", "后天", "今晚", "今天", "下周", "下星期", "下个月", "周末", "星期", "礼拜",
        "周一", "周二", "周三", "周四", "周五", "周六", "周日", "点", "截止", "到时候",
        "以后", "之后", "之前", "月底", "ddl",
    ),
    "event": (
        # English
        "interview", "exam", "test", "appointment", "doctor", "dentist", "surgery",
        "operation", "hospital", "flight", "trip", "travel", "match", "game", "meeting",
        "presentation", "present ", "date", "wedding", "concert", "report", "application",
        "apply", "submit", "results", "audition", "hearing", "court", "moving", "birthday",
        "party", "conference", "defense", "thesis", "recital", "race", "marathon", "tournament",
        "review", "pitch", "launch", "demo", "visa", "biopsy", "scan", "check up", "checkup",
        "tax", "filing", "renew",
        # French
        "entretien", "examen", "partiel", "rendez vous", "rdv", "medecin", "dentiste",
        "operation", "hopital", "vol ", "voyage", "reunion", "soutenance", "mariage",
        "rapport", "dossier", "candidature", "resultat", "anniversaire", "demenag", "spectacle",
        "concours", "permis", "impot", "declaration",
        # Spanish
        "entrevista", "examen", "cita", "medico", "dentista", "cirugia", "operacion", "vuelo",
        "viaje", "partido", "reunion", "presentacion", "boda", "informe", "solicitud",
        "resultados", "cumpleanos", "mudanza", "concierto", "oposicion", "tesis", "entrega",
        "renta", "impuesto", "hacienda", "declaracion", "presentar",
        # German
        "vorstellungsgesprach", "bewerbung", "prufung", "klausur", "termin", "arzt",
        "zahnarzt", "operation", "krankenhaus", "flug", "reise", "spiel", "besprechung",
        "meeting", "prasentation", "vortrag", "hochzeit", "bericht", "antrag", "ergebnis",
        "geburtstag", "umzug", "konzert", "abschlussarbeit", "verhandlung", "steuer",
        # Turkish
        "mulakat", "mülakat", "gorusme", "sınav", "sinav", "randevu", "doktor", "dis hekim",
        "ameliyat", "hastane", "ucus", "ucak", "seyahat", "yolculuk", "tatil", "mac",
        "toplantı", "toplanti", "sunum", "dugun", "nisan", "rapor", "basvuru", "sonuc",
        "dogum gunu", "tasın", "tasin", "konser", "tez", "odev", "vergi", "beyanname",
        # Persian
        "مصاحبه", "امتحان", "ازمون", "کنکور", "نوبت", "دکتر", "دندانپزشک", "دندون", "جراحی",
        "عمل", "بیمارستان", "پرواز", "سفر", "مسابقه", "بازی", "جلسه", "ارائه", "عروسی",
        "گزارش", "درخواست", "پروژه", "نتیجه", "تولد", "اسباب کشی", "کنسرت", "پایان نامه",
        "دفاع", "ویزا", "سفارت", "مالیات", "اپلای",
        # Arabic
        "مقابله", "امتحان", "اختبار", "موعد", "طبیب", "دکتور", "اسنان", "عملیه", "مستشفی",
        "رحله", "سفر", "طیاره", "مباراه", "ماتش", "اجتماع", "عرض", "زفاف", "عرس", "تقریر",
        "طلب", "نتیجه", "عید میلاد", "انتقال", "حفله", "رساله", "مناقشه", "تاشیره",
        "فیزا", "ضریبه", "ضرایب",
        # Thai
        "สัมภาษณ์", "สอบ", "นัด", "หมอ", "ทันตแพทย์", "ทำฟัน", "ผ่าตัด", "โรงพยาบาล", "บิน",
        "เที่ยวบิน", "เดินทาง", "ทริป", "แข่ง", "ประชุม", "พรีเซน", "นำเสนอ", "งานแต่ง",
        "รายงาน", "สมัคร", "ผลสอบ", "ผลตรวจ", "วันเกิด", "ย้ายบ้าน", "คอนเสิร์ต", "วิทยานิพนธ์",
        "ธีสิส", "วีซ่า", "เดต", "ภาษี", "ยื่น",
        # Japanese
        "面接", "試験", "テスト", "予約", "病院", "医者", "歯医者", "手術", "検査", "フライト",
        "飛行機", "旅行", "出張", "試合", "会議", "ミーティング", "プレゼン", "発表", "結婚式",
        "レポート", "報告書", "申請", "提出", "結果", "誕生日", "引っ越し", "ライブ",
        "コンサート", "論文", "デート", "打ち合わせ", "審査", "本番", "税", "確定申告",
        # Chinese
        "面试", "考试", "测试", "预约", "医院", "看病", "医生", "牙医", "手术", "检查", "航班",
        "飞机", "旅行", "出差", "比赛", "会议", "开会", "汇报", "演讲", "答辩", "婚礼", "报告",
        "申请", "提交", "交", "结果", "生日", "搬家", "演唱会", "音乐会", "论文", "约会",
        "签证", "复查", "税", "报税",
    ),
    "wellbeing": (
        # English
        "tired", "exhausted", "sick", " ill", "fever", "flu", "cold", "headache", "migraine",
        "pain", "hurt", "stress", "anxious", "anxiety", "nervous", "worried", "worry",
        "scared", "afraid", "terrified", "dread", "sad", "depress", "lonely", "sleep",
        "insomnia", "burn", "grief", "griev", "passed away", "died", "funeral", "break up",
        "broke up", "breakup", "cry", "overwhelm", "panic", "awful", "rough", "wish me luck",
        # French
        "fatigue", "creve", "epuise", "malade", "fievre", "grippe", "rhume", "mal a",
        "mal au", "douleur", "stresse", "angoiss", "anxi", "inquiet", "peur", "trac",
        "triste", "deprim", "seul", "dormir", "insomnie", "dors pas", "deuil", "decede",
        "mort", "enterrement", "rupture", "pleur", "craque", "nul",
        # Spanish
        "cansad", "agotad", "enferm", "fiebre", "gripe", "resfriad", "dolor", "duele",
        "estres", "estresad", "ansied", "ansios", "nervios", "preocupad", "miedo", "triste",
        "deprimid", "sol", "dormir", "insomnio", "duelo", "fallecio", "murio", "funeral",
        "entierro", "ruptura", "cortamos", "llor", "agobiad",
        # German
        "mude", "erschopft", "kaputt", "krank", "fieber", "grippe", "erkalt", "kopfschmerz",
        "schmerz", "weh", "stress", "angst", "nervos", "aufgeregt", "sorge", "traurig",
        "depress", "einsam", "schlaf", "trauer", "gestorben", "beerdigung", "trennung",
        "getrennt", "wein", "uberfordert", "panik", "daumen",
        # Turkish
        "yorgun", "bitkin", "hasta", "ates", "grip", "nezle", "bas agr", "agrı", "agri",
        "stres", "endise", "kaygı", "kaygi", "gergin", "heyecan", "korku", "korkuyor",
        "uzgun", "mutsuz", "depres", "yalnız", "yalniz", "uyku", "uyuya", "yas", "vefat",
        "oldu", "cenaze", "ayrıl", "ayril", "aglı", "agli", "bunal", "panik",
        # Persian
        "خسته", "مریض", "بیمار", "تب", "سرماخوردگی", "سرما خورد", "سردرد", "درد", "استرس",
        "اضطراب", "نگران", "میترسم", "ترس", "غمگین", "ناراحت", "افسرده", "تنها", "خواب",
        "بیخوابی", "عزا", "فوت", "مرد", "ختم", "جدا شد", "کات کرد", "گریه", "دلشوره", "حالم",
        # Arabic
        "تعبان", "متعب", "مرهق", "مریض", "حمی", "سخونه", "انفلونزا", "زکام", "صداع", "الم",
        "وجع", "ضغط", "توتر", "قلق", "خایف", "خائف", "خوف", "حزین", "زعلان", "مکتئب",
        "اکتئاب", "وحید", "نوم", "ارق", "عزاء", "توفی", "مات", "جنازه", "انفصل", "طلاق",
        "بکیت", "ابکی", "مخنوق",
        # Thai
        "เหนื่อย", "เพลีย", "ป่วย", "ไม่สบาย", "ไข้", "หวัด", "ปวด", "เจ็บ", "เครียด", "กังวล",
        "ตื่นเต้น", "กลัว", "เศร้า", "เสียใจ", "ซึมเศร้า", "เหงา", "นอนไม่หลับ", "นอน", "หลับ",
        "เสียชีวิต", "ตาย", "งานศพ", "เลิกกัน", "ร้องไห้", "ท้อ", "หมดไฟ",
        # Japanese
        "疲れ", "つかれ", "しんどい", "だるい", "体調", "風邪", "かぜ", "熱", "インフル",
        "頭痛", "痛", "ストレス", "不安", "緊張", "心配", "怖", "こわ", "悲し", "落ち込",
        "うつ", "寂し", "さみし", "眠れ", "寝れ", "眠", "寝", "亡くな", "葬式", "別れ", "泣",
        "つらい", "辛い", "きつい", "限界",
        # Chinese
        "累", "疲惫", "生病", "病了", "不舒服", "发烧", "感冒", "头疼", "头痛", "疼", "痛",
        "压力", "焦虑", "紧张", "担心", "害怕", "难过", "伤心", "抑郁", "孤独", "睡不着",
        "失眠", "睡", "去世", "走了", "葬礼", "分手", "哭", "崩溃", "撑不住",
    ),
    "promise": (
        # English (mostly the assistant's side)
        "good luck", "fingers crossed", "let me know", "tell me how", "keep me posted",
        "get back to", "check back", "check in", "follow up", "i ll look", "i will look",
        "hope it goes", "feel better", "get well", "take care",
        # French
        "bonne chance", "courage", "tiens moi", "dis moi comment", "raconte moi",
        "je reviens", "je te redis", "prends soin", "bon retablissement", "j espere que",
        # Spanish
        "suerte", "mucho animo", "cuentame", "avisame como", "me cuentas", "te escribo",
        "cuidate", "que te mejores", "ojala",
        # German
        "viel gluck", "viel erfolg", "erzahl mir", "sag mir wie", "halt mich", "melde mich",
        "komme darauf zuruck", "gute besserung", "pass auf dich", "hoffentlich",
        # Turkish
        "bol sans", "basarılar", "basarilar", "kolay gelsin", "haber ver", "anlat",
        "gecmis olsun", "kendine iyi bak", "umarım", "umarim", "insallah",
        # Persian
        "موفق باشی", "موفق باشید", "خبرم کن", "بهم بگو", "تعریف کن", "بهتر شی", "خوب شی",
        "مراقب خودت", "امیدوارم", "انشالله",
        # Arabic
        "بالتوفیق", "حظ", "طمنی", "طمئنی", "اخبرنی", "قول لی", "سلامتک", "الف سلامه",
        "شفاک", "اعتن بنفسک", "ان شاء الله", "انشالله", "اتمنی",
        # Thai
        "โชคดี", "สู้ๆ", "เล่าให้ฟัง", "บอกด้วย", "หายไวๆ", "ดูแลตัวเอง", "หวังว่า",
        # Japanese
        "頑張", "がんば", "ファイト", "教えて", "聞かせて", "お大事に", "無理しない", "祈って",
        "うまくいく",
        # Chinese
        "加油", "祝你", "好运", "顺利", "告诉我", "跟我说", "早日康复", "保重", "照顾好",
        "希望",
    ),
}  # fmt: skip

# Times and dates written with digits: 14:30, 9h, 3pm, 10 Uhr, 12/5, 3時, 8点.
_DIGIT_TIME = re.compile(
    r"\d{1,2}[:h.]\d{2}\b|\b\d{1,2} ?(?:am|pm|h|uhr)\b|\b\d{1,2}[/.-]\d{1,2}\b"
    r"|\d{1,2} ?(?:時|点|号|日|月|โมง)|[一二三四五六七八九十两]+点"
)

_SCRIPT = str.maketrans({"ي": "ی", "ى": "ی", "ك": "ک", "ة": "ه", "ـ": None, "\u200c": " "})


def _script_fold(text: str) -> str:
    """fold(), then one spelling for letters Arabic and Persian write differently."""
    return fold(text).translate(_SCRIPT)


def _fold_stem(stem: str) -> str:
    # A space at either end marks a word boundary ("due ", " ill"); fold() trims it.
    head = " " if stem.startswith(" ") else ""
    tail = " " if stem.endswith(" ") else ""
    return head + _script_fold(stem) + tail


# The table is written readably; each stem is folded the same way as the text.
_ALL = tuple(dict.fromkeys(_fold_stem(s) for stems in CUE_STEMS.values() for s in stems))


def has_cue(text: str) -> bool:
    """True when `text` has a time, event, wellbeing or promise cue."""
    folded = f" {_script_fold(text)} "
    return any(stem in folded for stem in _ALL) or _DIGIT_TIME.search(folded) is not None


def worth_extracting(exchanges: Sequence[Exchange], *, pending: bool) -> bool:
    """Whether the extraction model should see these exchanges at all."""
    return bool(worth_sending(exchanges, pending=pending))


def worth_sending(exchanges: Sequence[Exchange], *, pending: bool) -> list[Exchange]:
    """The exchanges the extraction model should see, in order.

    With follow-ups pending in the scope, all of them: "it went fine"
    closes one without any cue. Otherwise those with a cue: a "thanks" or
    a recipe between two messages about an exam adds tokens, not meaning."""
    if pending:
        return list(exchanges)
    return [e for e in exchanges if has_cue(f"{e.user_text}\n{e.assistant_text}")]
