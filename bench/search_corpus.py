"""Generated multilingual chat text for bench/search.py.

Eight languages, each with a hand-written head of real words (roughly in
frequency order) and a long synthetic tail built from the language's own
syllables, drawn with a Zipf law, so every language has very common words,
mid-frequency words and a tail of rare ones. A shared vocabulary ("ok",
"zoom", "2025"…) is sprinkled over every language, so a "common word" query
matches a large fraction of all messages, as it would in a real bot.

Scripts written without spaces (Thai, Japanese, Chinese) are emitted as
unspaced runs; Persian uses ZWNJ inside words (می‌خواهم), Turkish capitalises
with İ, French carries accents, a little Arabic carries harakat.

Needles are messages planted once, with words the generator never produces
(checked after the build by counting raw matches).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

ZWNJ = "\u200c"


def _words(text: str) -> list[str]:
    return text.split()


# (token, probability that a message contains it), for every language.
SHARED: tuple[tuple[str, float], ...] = (
    ("ok", 0.22),
    ("2025", 0.06),
    ("link", 0.05),
    ("app", 0.05),
    ("zoom", 0.04),
    ("pdf", 0.03),
    ("wifi", 0.02),
    ("bot", 0.04),
    ("email", 0.04),
    ("😂", 0.05),
)

EN = _words("""the to and a i you it is of in that for on my this we with be have can do at
not are just so but will me what your if about all get was there like time up out
meeting tomorrow today know think need send call please thanks yes no one how when
going good now new make work would could back week want see also next let from check
go day file project update team morning tonight later plan list remind note idea
draft report budget review price order ticket flight hotel dinner lunch coffee doctor
appointment school kids birthday weekend monday tuesday wednesday thursday friday
saturday sunday invoice payment account password server deploy bug release issue docs
slides client contract deadline summary question answer problem fixed happy sorry
great sure maybe really still already after before again around because something
anything someone people house car train station weather rain garden book movie music
recipe grocery milk bread apples gym walk quarterly agenda calendar reminder receipt
dentist pharmacy parcel delivery shipping refund warranty landlord rent mortgage
insurance vacation holiday passport visa luggage airport taxi subway bicycle violet
harbour lantern museum concert library picnic sandwich salad soup pizza pasta
chocolate tea water juice wine beer kitchen bathroom bedroom window door laptop phone
charger keyboard monitor printer router backup database migration test staging
production rollback hotfix""")

FR = _words("""de la le les et à des un une je est pas que en du tu il on qui pour dans ce
ça mais très bien oui non merci demain aujourd'hui réunion école café gare été déjà
après télé fenêtre château hôpital forêt français garçon reçu leçon noël où là être
avoir faire aller voir savoir pouvoir vouloir venir prendre semaine soir matin
médecin rendez-vous anniversaire vacances travail projet dossier équipe problème
réponse question idée prêt fête frère sœur mère père enfant élève théâtre musée
marché boulangerie pâtes crème gâteau déjeuner dîner bientôt peut-être toujours
jamais encore rapport facture paiement courriel message téléphone appel envoyer
vérifier réserver billet train voiture maison météo pluie soleil neige hiver
printemps automne chaussures manteau pharmacie ordonnance banque compte retard
grève métro vélo quartier voisin propriétaire loyer déménagement cuisine salon
chambre jardin fromage baguette croissant confiture épicerie supermarché colis
livraison remboursement garantie bibliothèque concert cinéma spectacle""")

TR = _words("""bir ve bu da de ne için çok ben sen o biz siz var yok evet hayır tamam
teşekkürler yarın bugün dün toplantı iş okul ev araba şimdi sonra önce gibi ile ama
daha en her şey nasıl neden zaman gün hafta akşam sabah öğle yemek kahve çay doktor
randevu doğum günü İstanbul Ankara İzmir ışık kız kızım oğlum anne baba arkadaş
gönderdim kontrol proje rapor fatura ödeme bilet uçak otel hava yağmur güneş kış yaz
bahar sonbahar iyi güzel kötü büyük küçük yeni eski lütfen görüşürüz müsait misin
mısın değil geliyorum gidiyorum istiyorum biliyorum düşünüyorum İngilizce Türkçe
işte ilk ıslak içinde ısınma ilaç eczane banka hesap şifre sunucu hata sürüm müşteri
sözleşme özet soru cevap sorun kitap film müzik tarif market süt ekmek elma spor
yürüyüş mutfak pencere kapı bilgisayar telefon şarj klavye yazıcı""")

FA = _words(f"""و در به از که این را با است برای آن یک خود تا کرد بر هم نیز من تو ما شما او
آنها می{ZWNJ}خواهم می{ZWNJ}روم می{ZWNJ}کنم نمی{ZWNJ}دانم فردا امروز دیروز جلسه کار خانه
مدرسه کتاب کتابخانه دانشگاه دکتر نوبت تولد هفته شب صبح ظهر غذا چای قهوه بازار خرید پول
حساب پرداخت بلیط هواپیما هتل هوا باران برف آفتاب خوب بد بزرگ کوچک جدید قدیمی لطفا ممنون
مرسی سلام خداحافظ بله نه چرا چطور کی کجا همه خیلی بیشتر کمتر گزارش پروژه پیام تلفن زنگ
بفرستید بررسی رزرو قطار ماشین خیابان شهر تهران اصفهان شیراز می{ZWNJ}شود نمی{ZWNJ}شود
بچه{ZWNJ}ها کتاب{ZWNJ}ها خانه{ZWNJ}ها درس امتحان دوست همکار مادر پدر برادر خواهر
داروخانه بانک رمز سرور مشتری قرارداد خلاصه سوال جواب مشکل فیلم موسیقی آشپزخانه پنجره
در{ZWNJ}حال می{ZWNJ}آیم می{ZWNJ}گویم""")

AR = _words("""و في من على إلى أن هذا هذه التي الذي ما لا مع عن كان كل هو هي أنا أنت نحن غدا
اليوم أمس اجتماع عمل بيت مدرسة كتاب مكتبة جامعة طبيب موعد عيد ميلاد أسبوع مساء صباح
طعام شاي قهوة سوق مال حساب دفع تذكرة طائرة فندق طقس مطر شمس جيد كبير صغير جديد قديم
شكرا مرحبا نعم لماذا كيف متى أين تقرير مشروع بريد رسالة هاتف أرسل راجع حجز قطار سيارة
شارع مدينة القاهرة دبي الرياض السلام عليكم إن شاء الله صديق زميل أم أب أخ أخت صيدلية
بنك كلمة مرور خادم عميل عقد ملخص سؤال جواب مشكلة فيلم موسيقى مطبخ نافذة باب حاسوب""")

TH = _words("""ฉัน คุณ เรา เขา และ ที่ ของ ใน มี เป็น ไม่ ได้ จะ ไป มา กิน ข้าว น้ำ วันนี้ พรุ่งนี้
เมื่อวาน ประชุม งาน บ้าน โรงเรียน หนังสือ ห้องสมุด หมอ นัด วันเกิด สัปดาห์ เย็น เช้า อาหาร
ชา กาแฟ ตลาด ซื้อ เงิน บัญชี จ่าย ตั๋ว เครื่องบิน โรงแรม อากาศ ฝน แดด ดี ใหญ่ เล็ก ใหม่
เก่า ขอบคุณ สวัสดี ครับ ค่ะ นะ ทำไม อย่างไร เมื่อไร ที่ไหน รายงาน โครงการ อีเมล ข้อความ
โทรศัพท์ ส่ง ตรวจสอบ จอง รถไฟ รถ ถนน เมือง กรุงเทพ เชียงใหม่ ภาษา ไทย อังกฤษ เรียน
ทำงาน อร่อย มาก นิดหน่อย ร้าน ใกล้ ไกล เพื่อน แม่ พ่อ พี่ น้อง ร้านขายยา ธนาคาร รหัสผ่าน
ลูกค้า สัญญา คำถาม คำตอบ ปัญหา หนัง เพลง ครัว หน้าต่าง ประตู คอมพิวเตอร์ ก๋วยเตี๋ยว
ส้มตำ ต้มยำ ผัดไทย ทะเล ภูเขา วันหยุด""")

JA = _words("""の は に を が と で も て た です ます した から まで ね よ か 明日 今日 昨日 会議
仕事 家 学校 本 図書館 病院 予約 誕生日 週末 夜 朝 昼 ご飯 お茶 コーヒー 市場 買い物
お金 口座 支払い 切符 飛行機 ホテル 天気 雨 晴れ 大きい 小さい 新しい 古い ありがとう
こんにちは はい いいえ どうして いつ どこ 報告書 プロジェクト メール メッセージ 電話
送ります 確認 電車 車 道 東京 大阪 京都 日本語 英語 勉強 美味しい とても 少し 店 近い
遠い ラーメン 寿司 カレー テスト ミーティング スケジュール 資料 締め切り 打ち合わせ
友達 母 父 兄 妹 薬局 銀行 パスワード サーバー お客様 契約 質問 答え 問題 映画 音楽
台所 窓 ドア パソコン 駅 公園 旅行 荷物 空港 新幹線 温泉 お土産 請求書 見積もり""")

ZH = _words("""的 了 是 我 你 他 她 我们 你们 在 有 不 这 那 和 也 就 都 要 会 吗 吧 呢 明天
今天 昨天 会议 工作 家里 学校 书 图书馆 医院 预约 生日 周末 晚上 早上 中午 吃饭 喝茶
咖啡 市场 购物 钱 账户 付款 机票 飞机 酒店 天气 下雨 晴天 很大 很小 新的 旧的 谢谢
你好 是的 不是 为什么 怎么 什么时候 哪里 报告 项目 邮件 消息 电话 发送 检查 火车
汽车 马路 北京 上海 广州 中文 英文 学习 好吃 非常 一点 商店 附近 很远 朋友 孩子
老师 同事 问题 时间 办法 电脑 手机 文件 药店 银行 密码 服务器 客户 合同 总结 答案
电影 音乐 厨房 窗户 门口 车站 公园 旅行 行李 机场 高铁 发票 报价 快递 退款""")

# Characters for the synthetic Chinese/Japanese tails. Needle characters
# (麒 麟 糖) are left out, so those needles can only match once.
HANZI = """一是不人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自
着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方
又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明
其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政
海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住
员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受
光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请
交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领
传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满
式李息写识极令黄德收脸钱党倒未持音送坐医切片容热参试类广"""

KATAKANA = (
    "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン"
)
KATAKANA += "ガギグゲゴザジズゼゾダデドバビブベボパピプペポ"
HIRAGANA_TAIL = ["する", "した", "です", "ます", "ない", "たい", "って", "ている"]

TH_CONSONANTS = "กขคงจฉชซญดตถทธนบปผพฟภมยรลวศสหอฮ"
TH_PRE = ["", "", "", "เ", "แ", "โ", "ใ", "ไ"]
TH_POST = ["", "า", "ิ", "ี", "ึ", "ื", "ุ", "ู", "ะ", "ำ"]
# No mai tri (U+0E4A): the Thai needle is the only word that holds one.
TH_TONES = ["", "", "่", "้", "๋"]
TH_FINALS = ["", "", "น", "ง", "ม", "ก", "ด", "บ", "ย", "ว"]

LATIN_SYLLABLES = {
    "en": (
        _words("b br c ch cl d dr f fl g gr h j k l m n p pl pr r s sh sl st t th tr v w"),
        _words("a e i o u ai ea ee oo ou"),
        ["", "", "n", "r", "s", "t", "nd", "st", "ck", "ll", "m", "ng"],
    ),
    "fr": (
        _words("b c ch d f g j l m n p pr r s t tr v gr bl"),
        _words("a e i o u é è ê ou au eau oi an on"),
        ["", "", "", "n", "r", "s", "t", "l"],
    ),
    "tr": (
        _words("b c ç d f g h k l m n p r s ş t v y z"),
        _words("a e ı i o ö u ü"),
        ["", "", "n", "r", "l", "k", "m", "z", "ş"],
    ),
}
LATIN_SUFFIXES = {
    "en": ["", "", "", "ing", "er", "ly", "tion", "ment", "ness", "ed", "s"],
    "fr": ["", "", "", "ment", "tion", "eur", "ette", "ique", "age", "ée", "ons", "ez"],
    "tr": ["", "", "lar", "ler", "da", "de", "dan", "den", "ım", "im", "lık", "lik", "çı"],
}

FA_LETTERS = "بپتجچحخدرزژسشصطعغفقکگلمنهی"
FA_VOWELS = "اوی"
AR_LETTERS = "بتثجحخدذرزسشصضطظعغفقكلمنهي"
AR_VOWELS = "اوي"
HARAKAT = ["\u064e", "\u064f", "\u0650", "\u0652", ""]

LANGUAGES = ("en", "fr", "tr", "fa", "ar", "th", "ja", "zh")
# Share of sessions per language.
LANGUAGE_SHARE = (0.36, 0.14, 0.10, 0.09, 0.08, 0.08, 0.08, 0.07)
UNSPACED = frozenset({"th", "ja", "zh"})
TAIL_SIZE = {"en": 40000, "fr": 20000, "tr": 20000, "fa": 15000, "ar": 15000}
TAIL_SIZE |= {"th": 15000, "ja": 15000, "zh": 15000}
ZIPF_S = 1.0


def _latin_word(rng: random.Random, lang: str) -> str:
    onsets, nuclei, codas = LATIN_SYLLABLES[lang]
    syllables = rng.choice((1, 2, 2, 3))
    word = "".join(rng.choice(onsets) + rng.choice(nuclei) for _ in range(syllables))
    return word + rng.choice(codas) + rng.choice(LATIN_SUFFIXES[lang])


def _arabic_script_word(rng: random.Random, letters: str, vowels: str) -> str:
    length = rng.randint(3, 7)
    chars = [
        rng.choice(letters if i % 2 == 0 or rng.random() < 0.5 else vowels) for i in range(length)
    ]
    return "".join(chars)


def _thai_word(rng: random.Random) -> str:
    return "".join(
        rng.choice(TH_PRE)
        + rng.choice(TH_CONSONANTS)
        + rng.choice(TH_POST)
        + rng.choice(TH_TONES)
        + rng.choice(TH_FINALS)
        for _ in range(rng.choice((1, 2, 2, 3)))
    )


def _tail_word(rng: random.Random, lang: str) -> str:
    if lang in LATIN_SYLLABLES:
        return _latin_word(rng, lang)
    if lang == "fa":
        word = _arabic_script_word(rng, FA_LETTERS, FA_VOWELS)
        roll = rng.random()
        if roll < 0.15:
            return f"می{ZWNJ}{word}"
        if roll < 0.25:
            return f"{word}{ZWNJ}ها"
        return word
    if lang == "ar":
        word = _arabic_script_word(rng, AR_LETTERS, AR_VOWELS)
        return "ال" + word if rng.random() < 0.4 else word
    if lang == "th":
        return _thai_word(rng)
    if lang == "ja":
        if rng.random() < 0.5:
            word = "".join(rng.choice(KATAKANA) for _ in range(rng.randint(3, 5)))
            return word + ("ー" if rng.random() < 0.3 else "")
        kanji = "".join(rng.choice(HANZI_POOL) for _ in range(rng.choice((2, 2, 3))))
        return kanji + (rng.choice(HIRAGANA_TAIL) if rng.random() < 0.3 else "")
    if lang == "zh":
        return "".join(rng.choice(HANZI_POOL) for _ in range(rng.choice((2, 2, 2, 3))))
    raise ValueError(lang)


HANZI_POOL = "".join(dict.fromkeys(ch for ch in HANZI if not ch.isspace()))

HEADS = {"en": EN, "fr": FR, "tr": TR, "fa": FA, "ar": AR, "th": TH, "ja": JA, "zh": ZH}


@dataclass
class Vocabulary:
    lang: str
    words: list[str]
    cum_weights: list[float]
    rank: dict[str, int] = field(default_factory=dict)


def build_vocabulary(lang: str, seed: int) -> Vocabulary:
    rng = random.Random(f"{seed}-vocab-{lang}")
    words = list(dict.fromkeys(HEADS[lang]))
    seen = set(words)
    target = len(words) + TAIL_SIZE[lang]
    while len(words) < target:
        word = _tail_word(rng, lang)
        if word not in seen:
            seen.add(word)
            words.append(word)
    weights = [1.0 / (rank + 1) ** ZIPF_S for rank in range(len(words))]
    cum = list(itertools.accumulate(weights))
    return Vocabulary(lang, words, cum, {w: r for r, w in enumerate(words)})


def _turkish_capitalize(text: str) -> str:
    first = {"i": "İ", "ı": "I"}.get(text[0], text[0].upper())
    return first + text[1:]


@dataclass(frozen=True)
class Needle:
    name: str  # the benchmark class, e.g. "needle_rare"
    lang: str
    text: str
    query: str
    # Messages holding the same words in another order (same agent): the
    # needle must still rank first.
    decoys: tuple[str, ...] = ()
    # Copies planted in another agent's sessions: never visible to the caller.
    other_agent_copies: int = 0


NEEDLES: tuple[Needle, ...] = (
    Needle(
        "needle_rare",
        "en",
        "Remind me that the quizzaciously named cat sleeps on the piano.",
        "quizzaciously",
        other_agent_copies=2,
    ),
    Needle(
        "needle_phrase",
        "en",
        "We walked past the violet harbour lantern at dusk and took photos.",
        '"violet harbour lantern"',
        decoys=tuple(
            text
            for _ in range(10)
            for text in (
                "The lantern by the harbour was painted violet last spring.",
                "Violet said the harbour has a new lantern shop.",
            )
        ),
    ),
    Needle(
        "needle_phrase_unquoted",
        "en",
        "Grab the amber harbour lantern from the attic, please.",
        "amber harbour lantern",
        decoys=tuple("The harbour lantern glowed amber over the water." for _ in range(20)),
    ),
    Needle(
        "needle_french_accent",
        "fr",
        "Ils réhabilitèrent la vieille gare de Besançon l'année dernière.",
        "rehabiliterent",
    ),
    Needle(
        "needle_turkish_I",
        "tr",
        "Sen de İZMİRLİLEŞTİREMEDİKLERİMİZDEN misin, yoksa İstanbullu musun?",
        "izmirlileştiremediklerimizden",
    ),
    Needle(
        "needle_persian_zwnj",
        "fa",
        f"دیروز به کتابخانه{ZWNJ}هایشان سر زدیم و کتاب خریدیم",
        "کتابخانههایشان",
    ),
    Needle(
        "needle_thai_in_run",
        "th",
        "เมื่อวานแม่ซื้อน้ำกระเจี๊ยบเย็นที่ตลาดนัดใกล้บ้าน",
        "กระเจี๊ยบ",
    ),
    Needle("needle_japanese_3", "ja", "お土産に金平糖を買いました。", "金平糖"),
    Needle(
        "needle_chinese_2",
        "zh",
        "我在博物馆看到了一只麒麟的雕像。",
        "麒麟",
        other_agent_copies=2,
    ),
    Needle(
        "needle_arabic_harakat",
        "ar",
        "زرنا المتحف الكَهْرَمَانِيَّ أمس مع الأولاد",
        "الكهرماني",
    ),
)


class TextGenerator:
    """Deterministic message text for a language and role."""

    def __init__(self, seed: int) -> None:
        self.vocab = {lang: build_vocabulary(lang, seed) for lang in LANGUAGES}
        self._rng = random.Random(f"{seed}-text")

    def text(self, lang: str, role: str) -> str:
        rng = self._rng
        vocab = self.vocab[lang]
        count = rng.randint(2, 14) if role == "user" else rng.randint(8, 40)
        words = rng.choices(vocab.words, cum_weights=vocab.cum_weights, k=count)
        for token, probability in SHARED:
            if rng.random() < probability:
                words.insert(rng.randrange(len(words) + 1), token)
        if lang in UNSPACED:
            return self._unspaced(lang, words, rng)
        if lang == "ar" and rng.random() < 0.05:
            words = [_with_harakat(w, rng) for w in words]
        text = " ".join(words)
        if rng.random() < 0.3 and len(words) > 6:
            cut = text.find(" ", len(text) // 2)
            if cut > 0:
                text = text[:cut] + "," + text[cut:]
        if lang == "tr":
            text = _turkish_capitalize(text)
        elif lang in ("en", "fr"):
            text = text[0].upper() + text[1:]
        end = rng.choice(("؟", ".", "", "") if lang in ("fa", "ar") else (".", "?", "!", ""))
        return text + end

    @staticmethod
    def _unspaced(lang: str, words: list[str], rng: random.Random) -> str:
        pause = {"th": " ", "ja": "、", "zh": "，"}[lang]
        pieces: list[str] = []
        run = 0
        for word in words:
            if word.isascii() or not word[0].isalpha():
                # Latin words and emoji sit between spaces inside the text.
                pieces.append(f" {word} ")
                run = 0
                continue
            if run >= 3 and rng.random() < 0.35:
                pieces.append(pause)
                run = 0
            pieces.append(word)
            run += 1
        text = " ".join("".join(pieces).split())
        if lang == "th":
            return text
        return text + rng.choice(("。", "。", "！", "？"))


def _with_harakat(word: str, rng: random.Random) -> str:
    if not word or word.isascii():
        return word
    return "".join(ch + rng.choice(HARAKAT) for ch in word)
