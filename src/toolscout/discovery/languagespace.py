"""The language a request is written in, taken out of its vector.

A multilingual encoder (multilingual-e5-small) places a request and its translation near
each other, but not at the same point: every vector of a French request is moved by about
the same offset from its English counterpart, a direction that says "French" and nothing
about the task. Against an English catalog that offset is noise the cards do not share,
and it costs the translation's dense reading the right tool (docs/history/other-languages.md, "This
round (h/lang5, round twelve)").

The offsets are measured once per model on :data:`PARALLEL`: a few generic requests to
tools, written by hand in English and in each language here (not drawn from any
evaluation set). Each language's offset is the mean of its requests' vectors less the
mean of the English ones; the offsets span the *language space* (:func:`language_space`,
an orthonormal basis of them). A request the catalog's words barely cover (the coverage
rule of discovery/coverage.py: what discovery reads as another language) has its vector's
component in that space taken out, :data:`REMOVE` of it (:func:`without_language`), before
the dense search. No language is identified: the component along every offset is removed,
whichever language the request is in (an English request has next to none of it).

Cards are not changed: the dot product of a vector with that component removed and a
card's vector equals the dot product of the two with the component removed from both.

With an encoder that does not read other languages (the English default) nothing here
runs.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from toolscout.embed.base import Embedder, Vectors, normalise

#: the share of a request's component in the language space taken out of its vector (0:
#: nothing, as before; 1: all of it). 0.75: chosen leave-one-language-out with
#: :data:`crosslingual.MERGE_AGREE` (every one of the six folds chose it among 0, 0.5,
#: 0.75, 1 and 1.25; docs/history/other-languages.md, "This round (h/lang5, round twelve)")
REMOVE = 0.75

#: generic requests to tools, the same in each language (hand-written; no evaluation
#: set's request is among them), English first
PARALLEL: Mapping[str, tuple[str, ...]] = {
    "en": (
        "What will the weather be like tomorrow in the mountains?",
        "Send an email to my manager saying I will be late.",
        "Add a meeting with the design team to my calendar on Friday at three.",
        "Find cheap flights from my city to the coast next month.",
        "Translate this paragraph into Italian, please.",
        "How much is one hundred dollars in euros today?",
        "Show me the latest news about electric cars.",
        "Remind me to call the dentist on Monday morning.",
        "Play some relaxing music for studying.",
        "Look up a recipe for a vegetarian soup with lentils.",
        "Which restaurants near the station are open now?",
        "Create a new folder for the project files and share it with the team.",
        "What is the current price of the company's shares?",
        "Book a table for four people for tomorrow evening.",
        "Check whether my package has been delivered.",
        "Give me directions by bicycle to the nearest library.",
        "Summarise the last report and list its main risks.",
        "Find photos of old lighthouses that I can use freely.",
        "Convert this spreadsheet into a chart of monthly sales.",
        "Tell me a fun fact about the ocean.",
        "Search for a used car under ten thousand euros.",
        "Pay the electricity bill from my checking account.",
        "Which movies are showing at the cinema tonight?",
        "Set an alarm for half past six tomorrow.",
    ),
    "fr": (
        "Quel temps fera-t-il demain à la montagne ?",
        "Envoie un courriel à mon responsable pour dire que je serai en retard.",
        "Ajoute une réunion avec l'équipe de conception à mon agenda vendredi à quinze heures.",
        "Trouve des vols pas chers depuis ma ville vers la côte le mois prochain.",
        "Traduis ce paragraphe en italien, s'il te plaît.",
        "Combien valent cent dollars en euros aujourd'hui ?",
        "Montre-moi les dernières nouvelles sur les voitures électriques.",
        "Rappelle-moi d'appeler le dentiste lundi matin.",
        "Mets de la musique relaxante pour réviser.",
        "Cherche une recette de soupe végétarienne aux lentilles.",
        "Quels restaurants près de la gare sont ouverts en ce moment ?",
        "Crée un nouveau dossier pour les fichiers du projet et partage-le avec l'équipe.",
        "Quel est le cours actuel de l'action de l'entreprise ?",
        "Réserve une table pour quatre personnes demain soir.",
        "Vérifie si mon colis a été livré.",
        "Indique-moi l'itinéraire à vélo jusqu'à la bibliothèque la plus proche.",
        "Résume le dernier rapport et liste ses principaux risques.",
        "Trouve des photos de vieux phares que je peux utiliser librement.",
        "Transforme ce tableur en graphique des ventes mensuelles.",
        "Raconte-moi une anecdote amusante sur l'océan.",
        "Cherche une voiture d'occasion à moins de dix mille euros.",
        "Paie la facture d'électricité depuis mon compte courant.",
        "Quels films passent au cinéma ce soir ?",
        "Mets un réveil à six heures et demie demain.",
    ),
    "de": (
        "Wie wird das Wetter morgen in den Bergen?",
        "Schick meiner Vorgesetzten eine E-Mail, dass ich mich verspäte.",
        "Trag am Freitag um drei ein Treffen mit dem Designteam in meinen Kalender ein.",
        "Finde günstige Flüge von meiner Stadt an die Küste im nächsten Monat.",
        "Übersetze bitte diesen Absatz ins Italienische.",
        "Wie viel sind heute hundert Dollar in Euro?",
        "Zeig mir die neuesten Nachrichten über Elektroautos.",
        "Erinnere mich daran, am Montagmorgen den Zahnarzt anzurufen.",
        "Spiel entspannende Musik zum Lernen.",
        "Such ein Rezept für eine vegetarische Linsensuppe.",
        "Welche Restaurants in der Nähe des Bahnhofs haben gerade geöffnet?",
        "Leg einen neuen Ordner für die Projektdateien an und teile ihn mit dem Team.",
        "Wie steht die Aktie des Unternehmens gerade?",
        "Reserviere für morgen Abend einen Tisch für vier Personen.",
        "Prüf, ob mein Paket zugestellt wurde.",
        "Zeig mir den Weg mit dem Fahrrad zur nächsten Bibliothek.",
        "Fass den letzten Bericht zusammen und nenne seine wichtigsten Risiken.",
        "Finde Fotos von alten Leuchttürmen, die ich frei verwenden darf.",
        "Mach aus dieser Tabelle ein Diagramm der monatlichen Umsätze.",
        "Erzähl mir etwas Lustiges über das Meer.",
        "Such einen Gebrauchtwagen unter zehntausend Euro.",
        "Bezahl die Stromrechnung von meinem Girokonto.",
        "Welche Filme laufen heute Abend im Kino?",
        "Stell einen Wecker für morgen um halb sieben.",
    ),
    "es": (
        "¿Qué tiempo hará mañana en la montaña?",
        "Envía un correo a mi jefe diciendo que llegaré tarde.",
        "Añade una reunión con el equipo de diseño a mi calendario el viernes a las tres.",
        "Busca vuelos baratos desde mi ciudad a la costa el mes que viene.",
        "Traduce este párrafo al italiano, por favor.",
        "¿Cuánto son cien dólares en euros hoy?",
        "Muéstrame las últimas noticias sobre coches eléctricos.",
        "Recuérdame llamar al dentista el lunes por la mañana.",
        "Pon música relajante para estudiar.",
        "Busca una receta de sopa vegetariana con lentejas.",
        "¿Qué restaurantes cerca de la estación están abiertos ahora?",
        "Crea una carpeta nueva para los archivos del proyecto y compártela con el equipo.",
        "¿Cuál es el precio actual de las acciones de la empresa?",
        "Reserva una mesa para cuatro personas para mañana por la noche.",
        "Comprueba si mi paquete ya ha sido entregado.",
        "Dame indicaciones en bicicleta hasta la biblioteca más cercana.",
        "Resume el último informe y enumera sus principales riesgos.",
        "Encuentra fotos de faros antiguos que pueda usar libremente.",
        "Convierte esta hoja de cálculo en un gráfico de ventas mensuales.",
        "Cuéntame un dato curioso sobre el océano.",
        "Busca un coche de segunda mano por menos de diez mil euros.",
        "Paga la factura de la luz desde mi cuenta corriente.",
        "¿Qué películas ponen en el cine esta noche?",
        "Pon una alarma para mañana a las seis y media.",
    ),
    "pt": (
        "Como vai estar o tempo amanhã nas montanhas?",
        "Envie um e-mail ao meu gerente dizendo que vou me atrasar.",
        "Adicione uma reunião com a equipe de design à minha agenda na sexta às três.",
        "Encontre voos baratos da minha cidade para o litoral no mês que vem.",
        "Traduza este parágrafo para o italiano, por favor.",
        "Quanto valem cem dólares em euros hoje?",
        "Mostre as últimas notícias sobre carros elétricos.",
        "Lembre-me de ligar para o dentista na segunda de manhã.",
        "Toque uma música relaxante para estudar.",
        "Procure uma receita de sopa vegetariana com lentilhas.",
        "Quais restaurantes perto da estação estão abertos agora?",
        "Crie uma pasta nova para os arquivos do projeto e compartilhe com a equipe.",
        "Qual é o preço atual das ações da empresa?",
        "Reserve uma mesa para quatro pessoas amanhã à noite.",
        "Verifique se a minha encomenda já foi entregue.",
        "Mostre o caminho de bicicleta até a biblioteca mais próxima.",
        "Resuma o último relatório e liste os seus principais riscos.",
        "Encontre fotos de faróis antigos que eu possa usar livremente.",
        "Transforme esta planilha em um gráfico das vendas mensais.",
        "Conte-me uma curiosidade sobre o oceano.",
        "Procure um carro usado por menos de dez mil euros.",
        "Pague a conta de luz com a minha conta corrente.",
        "Quais filmes estão passando no cinema hoje à noite?",
        "Coloque um alarme para amanhã às seis e meia.",
    ),
    "ja": (
        "明日の山の天気はどうなりますか？",
        "遅れると上司にメールを送ってください。",
        "金曜日の三時にデザインチームとの会議をカレンダーに追加して。",
        "来月、私の街から海岸までの安い航空券を探して。",
        "この段落をイタリア語に翻訳してください。",
        "今日、百ドルは何ユーロですか？",
        "電気自動車についての最新ニュースを見せて。",
        "月曜日の朝に歯医者に電話するようリマインドして。",
        "勉強用にリラックスできる音楽をかけて。",
        "レンズ豆のベジタリアンスープのレシピを調べて。",
        "駅の近くで今開いているレストランはどこですか？",
        "プロジェクトのファイル用に新しいフォルダを作って、チームと共有して。",
        "その会社の現在の株価はいくらですか？",
        "明日の夜、四人で席を予約して。",
        "荷物が配達されたか確認して。",
        "一番近い図書館まで自転車での行き方を教えて。",
        "最新の報告書を要約して、主なリスクを挙げて。",
        "自由に使える古い灯台の写真を探して。",
        "このスプレッドシートを月別売上のグラフにして。",
        "海についての面白い豆知識を教えて。",
        "一万ユーロ以下の中古車を探して。",
        "普通預金口座から電気代を支払って。",
        "今夜、映画館で上映している映画は何ですか？",
        "明日の六時半にアラームをセットして。",
    ),
    "zh": (
        "明天山里的天气怎么样？",
        "给我的经理发一封邮件，说我会迟到。",
        "在我的日历上添加周五下午三点和设计团队的会议。",
        "帮我找下个月从我所在城市到海边的便宜机票。",
        "请把这段话翻译成意大利语。",
        "今天一百美元能换多少欧元？",
        "给我看看关于电动汽车的最新新闻。",
        "提醒我周一早上给牙医打电话。",
        "放一些适合学习的轻松音乐。",
        "查一下扁豆素食汤的做法。",
        "车站附近现在有哪些餐厅在营业？",
        "为项目文件新建一个文件夹，并和团队共享。",
        "这家公司现在的股价是多少？",
        "帮我订一张明天晚上四个人的桌子。",
        "查一下我的包裹有没有送到。",
        "告诉我骑自行车去最近图书馆的路线。",
        "总结一下最新的报告，并列出主要风险。",
        "找一些可以免费使用的老灯塔照片。",
        "把这个表格做成每月销售额的图表。",
        "告诉我一个关于海洋的有趣知识。",
        "帮我找一辆一万欧元以下的二手车。",
        "从我的活期账户支付电费。",
        "今晚电影院在放哪些电影？",
        "帮我定一个明天六点半的闹钟。",
    ),
}

_SPACES: dict[str, Vectors] = {}
_LOCK = threading.Lock()


def kept_key(model_id: str) -> str:
    """The key a store keeps ``model_id``'s language space under: the model and a digest
    of this module (its :data:`PARALLEL` and how the space is measured)."""
    from toolscout.discovery.kept import code_digest

    return f"language-space:{model_id}:{code_digest(sys.modules[__name__])}"


def language_space(embedder: Embedder, store: Any = None) -> Vectors:
    """An orthonormal basis (rows) of ``embedder``'s language offsets measured on
    :data:`PARALLEL` (one per language but English): once per model and process, read from
    ``store`` when it keeps one (a store that keeps derived state: SQLite) and kept there
    when measured (a new process then does not encode :data:`PARALLEL` again, about 5 s at
    one thread)."""
    model = embedder.model_id
    with _LOCK:
        found = _SPACES.get(model)
    if found is not None:
        return found
    space = _kept(store, model, embedder.dim)
    if space is None:
        space = _measured(embedder)
        write = getattr(store, "set_derived", None)
        if callable(write):  # a cache: a failed write only means measuring it again
            blob = np.ascontiguousarray(space, dtype="<f4").tobytes()
            write(kept_key(model), store.generation(), blob)
    with _LOCK:
        return _SPACES.setdefault(model, space)


def _kept(store: Any, model: str, dim: int) -> Vectors | None:
    read = getattr(store, "derived", None)
    kept = read(kept_key(model)) if callable(read) else None
    rows = len(PARALLEL) - 1
    if kept is None or len(kept[1]) != rows * dim * 4:  # any other shape: measured again
        return None
    return np.frombuffer(kept[1], dtype="<f4").reshape(rows, dim).astype(np.float32)


def _measured(embedder: Embedder) -> Vectors:
    langs = list(PARALLEL)
    texts = [t for lang in langs for t in PARALLEL[lang]]
    vectors = np.asarray(embedder.embed(texts), np.float64)
    means, at = {}, 0
    for lang in langs:
        n = len(PARALLEL[lang])
        means[lang] = vectors[at : at + n].mean(axis=0)
        at += n
    offsets = np.stack([means[lang] - means["en"] for lang in langs[1:]])
    basis, _ = np.linalg.qr(offsets.T)
    return np.ascontiguousarray(basis.T, dtype=np.float32)


def without_language(
    embedder: Embedder, vectors: Vectors, remove: float | None = None, store: Any = None
) -> Vectors:
    """``vectors`` (rows, unit length) with ``remove`` (default :data:`REMOVE`) of their
    component in ``embedder``'s language space (:func:`language_space`, kept in ``store``)
    taken out, normalised again."""
    share = REMOVE if remove is None else remove
    if not share or not len(vectors):
        return vectors
    space = language_space(embedder, store)
    rows = np.asarray(vectors, np.float32)
    return normalise(rows - share * (rows @ space.T) @ space)
