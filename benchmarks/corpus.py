"""Deterministic synthetic agent-memory corpora and query sets for the benchmarks.

Everything is generated from a seed with :class:`random.Random`: no network, no
data files, the same output on every machine and Python version that keeps
``random``'s documented reproducibility (3.2+ for ``seed``, ``choices``,
``shuffle``, ``randrange``).

A corpus is a list of :class:`Note` (short agent-memory notes: a 3-8 word
title, a 10-40 word body, a subject and a kind). Words are drawn with Zipf
weights from a vocabulary of a few thousand realistic English and technical
words, plus numbers, version tags (``v2``), quarter tags (``q3``), CamelCase
identifiers (``RetryPolicy``), hyphenated names (``payment-api``) and ticket
ids (``INC-48213``). Corpora are *prefix-stable*: the first 1,000 notes of the
10,000-note corpus are the 1,000-note corpus.

:func:`make_queries` builds a fixed, shuffled mix of query categories:

* ``exact``: the two or three most distinctive words lifted from one note;
* ``typo``: the same, with one edit (substitution, deletion, insertion or
  transposition) applied to one word;
* ``miss``: made-up words that appear nowhere in the vocabulary;
* ``multi``: two to five words, about half of them natural questions such as
  "what is the payment api timeout?";
* ``common``: one to three words sampled from a note's own words (each
  occurrence equally likely, function words left out), so frequent words are
  frequent in queries too, as in what people type;
* ``question``: a whole natural question around one or two words sampled the
  same way from a note ("what did we decide about the rollout and the queue?").

``exact``, ``typo``, ``common`` and ``question`` queries remember the note they
came from, so a result list can be checked for it (hit@10).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "KINDS",
    "QUERY_MIX",
    "Note",
    "Query",
    "Vocabulary",
    "atoms",
    "build_vocabulary",
    "generate_corpus",
    "make_queries",
]

KINDS: Final[tuple[tuple[str, float], ...]] = (
    ("stable_fact", 0.25),
    ("operational_pattern", 0.25),
    ("watch_item", 0.15),
    ("event", 0.25),
    ("hypothesis", 0.10),
)
"""Note kinds and how often each is drawn."""

QUERY_MIX: Final[tuple[tuple[str, float], ...]] = (
    ("exact", 0.20),
    ("typo", 0.15),
    ("miss", 0.10),
    ("multi", 0.15),
    ("common", 0.20),
    ("question", 0.20),
)
"""Query categories and their share of a query set."""


def _ws(text: str) -> list[str]:
    """The whitespace-separated words of ``text`` (keeps word lists compact)."""
    return text.split()


# Function words: the most frequent ranks of the Zipf distribution, as in English.
_FUNCTION_WORDS = _ws(
    """
the to of and a in on for is was after with when from at by it not but be are has
had this that into during before all only then so we our they which until per about
over under still again now also
"""
)

# General English, skewed towards the things operators and agents write down.
_NOUNS = """
ability absence access accident account accuracy action activity actual addition address
adjustment advance advice affected agency agent agreement alarm alert allocation allowance
amount analysis anchor angle announcement answer anomaly approach approval area argument
arrival article aspect assessment assignment assumption attempt attention audience audit
author authority average awareness background balance band barrier base basis batch
behavior belief benefit bill block board body bonus border bottom boundary branch breach
break bridge brief budget buffer bug builder bundle burden burst business buyer cadence
calendar call campaign candidate capacity card care career carrier case category cause
ceiling center certificate chain challenge chance change channel chapter charge chart
check choice circle claim class cleanup client climate clock cluster coach code
collection column comment commitment committee community company comparison complaint
component concept concern condition conference confidence conflict connection consensus
consequence constraint consumer contact content context contract contribution control
conversation copy core corner correction cost count counter country coupon course
coverage crash credit crew crisis criteria critic cross culture cursor curve customer
cycle damage danger data date day deadline deal debt decision default defect deficit
degree delay delivery demand density department dependency deposit depth design desk
detail detection developer device diagram difference direction director discount
discovery discussion disk display dispute distance distribution document domain draft
drift driver drop duration duty edge edition effect effort element email emergency
employee end energy engine engineer entry environment episode error escalation estimate
evening event evidence example exception exchange execution exercise expense experience
experiment expert expiry export exposure extension factor failure fallback family
feature fee feedback field figure file filter finding fix flag fleet flow focus folder
forecast form format forum foundation frame framework freeze frequency friction front
function fund gap gate goal grade grant graph group growth guard guest guide habit half
handler handoff hardware head health heap height help history hold holiday host hour
house idea impact import incident income increase index indicator industry influence
input insight instance instruction insurance intake integration intent interest
interface interval inventory invoice issue item job journal judgment key kind label
lane language launch layer lead leader lease ledger length lesson letter level license
limit line link list load loan location lock log logic loop loss lot machine
maintenance manager map margin market match matter meaning measure meeting member memory
message method metric midnight migration mile milestone mind minute mirror mistake mode
model moment money month morning motion move name need network night node noise note
notice number object offer office offset operation operator opinion option order origin
outage outcome output owner package page pain pair panel paper parameter parent part
partner party pass patch path pattern pause payload payment peak penalty people period
permission person phase phone picture piece pilot pipeline place plan platform player
point policy pool port position post pressure price priority problem procedure process
product profile program progress project promise proof property proposal protocol
provider purchase purpose quality quarter query question queue quota range rate ratio
reader reason receipt record recovery reduction reference refund region release report
request requirement research reserve resource response result retention return review
revenue risk road role rollback rollout room root round route routine rule runbook
safety sale sample schedule schema scope score screen script search season second
section security segment selection sender sequence server service session setting
severity shape share shift signal signature site size skill slot snapshot socket
software solution source space speed spike sprint stack staff stage standard start
state statement station status step stock storage store story strategy stream strength
structure student study style subject success suggestion summary supplier supply
support surface survey switch symptom system table target task team template tenant
term test text theory thread threshold ticket tier time timeline timer title token
tool topic total trace track trade traffic training transaction transfer trend trial
trigger trip trouble trust turn type unit update upgrade usage user value variable
variance vendor version view visit volume vote wait warning waste watch wave week weight
window work worker workflow world year zone
"""
_VERBS = """
accept adjust allow apply approve arrive assign attach avoid block break build
calculate cancel capture catch change charge check choose clean clear close collect
combine commit compare complete confirm connect consider contain continue convert copy
correct create cut debug decide decline decrease define delay delete deliver deploy
describe detect disable discover drop enable ensure escalate estimate evaluate exceed
expand expect expire explain export extend fail fetch fill find finish fix flush follow
force forget freeze grow handle hang help hide hold ignore improve include increase
inspect install investigate join keep kill launch lead leak learn limit list load lock
log lose maintain manage measure merge migrate miss monitor move need notice notify
observe open order own page patch pause pin plan poll prefer prepare prevent print
process promote protect provide publish pull push queue raise reach read reboot receive
recover reduce refresh reject release reload remove rename repair repeat replace reply
report request require reset resolve respond restart restore resume retry return reuse
revert review rotate route run save scale schedule search send serve set ship show
shrink skip slow sort spawn split start stop store submit succeed suggest support
suspend switch sync tag test throttle time trace track transfer trigger trim try tune
unlock update upgrade upload use validate verify wait warn watch write
"""
_VERBS_PAST = """
accepted added allowed applied approved assigned blocked broken built cached cancelled
changed checked cleaned cleared closed committed completed confirmed connected created
deleted delivered deployed detected disabled dropped enabled escalated expired failed
fixed flagged frozen handled ignored improved increased installed killed launched leaked
limited loaded locked logged lost merged migrated missed moved noticed opened paged
patched paused pinned planned promoted pushed queued raised rebooted received recovered
reduced refreshed rejected released removed renamed repaired replaced reported required
reset resolved restarted restored retried reverted reviewed rotated scaled scheduled
sent shipped skipped slowed split started stopped submitted suspended switched synced
tested throttled timed traced tracked triggered tuned updated upgraded validated
verified warned
"""
_VERBS_ING = """
adding applying blocking building caching changing checking closing deploying dropping
failing fixing growing handling hanging leaking loading locking logging merging
migrating missing moving paging patching polling pushing queueing reading rebooting
recovering releasing retrying returning rolling rotating running scaling sending
serving shipping skipping spiking starting stopping syncing testing throttling timing
tracking trying tuning upgrading waiting watching writing
"""
_ADJECTIVES = """
actual annual available average bad basic best big brief broad busy careful certain
cheap clean clear cold common complete complex constant correct costly critical current
daily dead deep default degraded dirty distinct double early easy empty entire exact
excessive expected external extra fair false fast final fine flaky fragile free
frequent fresh full general global good great hard healthy heavy high hot huge idle
important initial internal invalid key large late latest legacy light likely live local
long low main major manual minor missing monthly multiple narrow native near negative
new noisy normal nightly odd offline old online open optional orphaned outdated partial
past pending persistent positive possible previous primary private proper public quick
quiet random rare ready real recent regular related reliable remote repeated required
risky rough safe secondary secure sensitive serious shared short silent similar simple
single slow small soft specific stable stale steady strict strong sudden sufficient
temporary tight total tricky true typical unclear unknown unstable unusual urgent useful
valid warm weekly weird wide wrong
"""
_ADVERBS = """
again almost already always briefly daily early eventually finally frequently hourly
immediately instead later likely manually mostly nearly never often only partly
quickly rarely recently regularly slowly soon sometimes still suddenly temporarily
today tomorrow twice usually weekly yesterday
"""
_UNCOUNTABLE = frozenset(
    _ws(
        """
absence accuracy advice attention awareness behavior business care confidence consensus
content culture data damage debt evidence feedback friction hardware health help history
income insurance intake knowledge logic maintenance money noise pain pressure progress
research revenue safety security software staff storage supply support traffic training
waste work
"""
    )
)
"""Nouns that take no plural."""


# Technical vocabulary that a software agent's notes are full of.
_TECH = """
api auth backend backup bandwidth benchmark binary bitmap boot bucket cache callback
canary cdn checksum checkpoint chunk cli codec commit compaction compiler config
container cookie cpu cron csv daemon dashboard database deadlock debugger dedup
deployment diff dns docker endpoint enum etl failover firewall firmware fork frontend
gateway gc gpu grpc hash header heartbeat hotfix http https ingress iops jar json jvm
kafka kernel kubectl kubernetes lambda latency linter loadbalancer localhost lockfile
manifest memcached microservice middleware mutex mysql namespace nginx oauth orm
p50 p95 p99 packet pagination parser partition postgres prometheus proxy pubsub
rabbitmq ram redis regex registry replica replication repo resolver rest retries
rpc runtime s3 sandbox scheduler sdk semaphore serializer sharding sidecar slo sla
smtp snapshot sql sqlite ssd ssh ssl stderr stdout subnet syscall tcp terraform
thread throughput timeout tls tokenizer transcoder ttl udp uptime url utf8 uuid vm
vpc vpn webhook websocket yaml zookeeper oncall postmortem standup backlog rollout
hotpatch uplink downtime sev1 sev2 sev3 pagerduty grafana jenkins github gitlab
kibana elasticsearch clickhouse snowflake bigquery airflow spark flink celery
nodejs golang rust python java typescript graphql protobuf avro parquet
"""

# Words for generated service, CamelCase and project names.
_NAME_PARTS = _ws(
    """
payment auth billing search ledger order checkout catalog inventory shipping invoice
user account profile session notification email sms push report analytics metrics
logging audit config feature pricing tax fraud risk identity token gateway media image
video upload storage archive export import sync scheduler queue stream event webhook
recommendation ranking cart promo loyalty support ticket chat message geo routing
"""
)
_SERVICE_SUFFIXES = _ws("api service worker gateway db cache queue proxy scheduler store sync web")
_CAMEL_SUFFIXES = _ws(
    """
Manager Handler Client Service Worker Policy Factory Adapter Controller Provider Cache
Queue Store Builder Parser Validator Resolver Scheduler Watcher Router Limiter Monitor
"""
)
_CAMEL_PREFIXES = _ws(
    """
Retry Circuit Rate Token Session Payment Order Event Batch Stream Cache Config Health
Audit Index Shard Lease Backoff Quota Webhook Ledger Invoice Search Metrics Feature
"""
)
_HYPHENATED = _ws(
    """
rate-limit blue-green read-only on-call dead-letter write-ahead follow-up root-cause
end-to-end opt-in opt-out rollback-plan hot-path cold-start back-pressure fan-out
"""
)
_FIRST_NAMES = _ws(
    """
alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert
sybil trent victor walter xena yusuf zoe amir bianca chen dmitri elena farah gustavo
hana ingrid jamal kenji lucia mateo nora omar priya quinn rosa sanjay tariq ursula
"""
)
_LAST_NAMES = _ws(
    """
nguyen smith garcia kim patel okafor muller rossi silva tanaka kowalski dubois novak
haddad larsen moreau cohen fischer ivanova jensen
"""
)
_PROJECT_NAMES = _ws(
    """
atlas falcon orion phoenix nimbus hermes apollo zephyr titan aurora comet nova pegasus
polaris quasar sirius vega hydra kestrel osprey raven sparrow condor lynx otter badger
"""
)
_PROJECT_WORDS = _ws("migration rewrite launch cleanup rollout revamp")

_SYLLABLES = _ws(
    "zor blat quen vix prax thul dre moz kif yun glar snev trop wib fral cuz"
    " plox vren jod bex skir muv tandr oqu"
)

_QUESTION_TEMPLATES: Final[tuple[str, ...]] = (
    "what is the {svc} timeout?",
    "who owns {svc}?",
    "when did {svc} last fail?",
    "why is {svc} {adj}?",
    "how do we rotate {svc} keys?",
    "what changed in {svc} {ver}?",
    "is {svc} still {adj}?",
    "what did {person} say about {word}?",
    "status of {project} {word}",
    "{svc} {word} in {qtr}",
    "how do I {verb} the {word}?",
    "where is the {word} {noun} for {svc}?",
)

# Questions around words of one note ({a}, {b}): the words a person remembers.
_NOTE_QUESTIONS: Final[tuple[str, ...]] = (
    "what did we decide about the {a} and the {b}?",
    "what did they say about {a}?",
    "when did we last talk about {a} {b}?",
    "how does the {a} handle {b}?",
    "why is the {a} {b} failing again?",
    "is there anything about {a} and {b}?",
    "who was working on the {a} {b}?",
    "can you remind me what happened with the {a}?",
    "what do we know about {a} {b} so far?",
    "where did we put the notes on {a}?",
)

_Q_ADJECTIVES = _ws("slow flaky degraded unstable noisy stale down healthy")
_Q_VERBS = _ws("restart rotate deploy rollback throttle migrate debug patch")

_ATOM_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ATOM = re.compile(r"[a-z0-9]+")
_ALPHA = re.compile(r"[a-z]+")


def atoms(text: str) -> list[str]:
    """Split text into lower-case alphanumeric atoms, CamelCase split too.

    The most fragmenting tokenisation any engine here applies, so a word whose
    atoms are all rare is rare for every engine.

    >>> atoms("RetryPolicy on payment-api hit INC-4821.")
    ['retry', 'policy', 'on', 'payment', 'api', 'hit', 'inc', '4821']
    """
    return _ATOM.findall(_ATOM_SPLIT.sub(" ", text).lower())


@dataclass(frozen=True, slots=True)
class Note:
    """One synthetic memory note, engine-neutral."""

    kind: str
    title: str
    content: str
    subject: str
    confidence: str
    event_date: str

    @property
    def text(self) -> str:
        """Title and content as one document, for engines without fields."""
        return f"{self.title}\n{self.content}"


@dataclass(frozen=True, slots=True)
class Query:
    """One benchmark query: its text, category and source note (if it has one)."""

    text: str
    category: str
    source: int | None = None
    """Index of the note the query was lifted from (``exact`` and ``typo``)."""


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The word distributions a corpus is drawn from."""

    words: tuple[str, ...]
    """Every word, most frequent (Zipf rank 1) first."""
    cum_weights: tuple[float, ...]
    """Cumulative Zipf weights of ``words`` (for :meth:`random.Random.choices`)."""
    content_words: tuple[str, ...]
    """``words`` without the function words, most frequent first."""
    content_cum_weights: tuple[float, ...]
    subjects: tuple[str, ...]
    """Subjects (services, people, projects), most frequent first."""
    subject_cum_weights: tuple[float, ...]
    services: tuple[str, ...]
    people: tuple[str, ...]
    projects: tuple[str, ...]


def _zipf_cum_weights(n: int, s: float = 1.0, q: float = 2.7) -> tuple[float, ...]:
    """Cumulative Zipf-Mandelbrot weights ``1 / (rank + q) ** s`` for ranks 1..n."""
    return tuple(itertools.accumulate(1.0 / (r + q) ** s for r in range(1, n + 1)))


def _plural(noun: str) -> str:
    """The regular English plural of ``noun``."""
    if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def _english_words() -> list[str]:
    """The English word list: nouns (and their plurals), verb forms, adjectives, adverbs."""
    nouns = _NOUNS.split()
    plurals = [_plural(n) for n in nouns if n not in _UNCOUNTABLE]
    groups = (_VERBS, _VERBS_PAST, _VERBS_ING, _ADJECTIVES, _ADVERBS, _TECH)
    return nouns + plurals + [w for g in groups for w in g.split()]


def _special_words(rng: random.Random, services: Sequence[str]) -> list[str]:
    """Numbers, version and quarter tags, CamelCase ids and hyphenated names."""
    out: list[str] = [str(n) for n in (1, 2, 3, 5, 10, 15, 30, 60, 90, 100, 200, 500)]
    out += [str(rng.randrange(100, 10_000)) for _ in range(120)]
    out += ["404", "429", "500", "502", "503", "504", "8080", "8443", "5432", "6379"]
    out += [f"{n}{unit}" for n in (5, 10, 30, 50, 100, 250, 500) for unit in ("ms", "s")]
    out += [f"{n}{unit}" for n in (2, 5, 15, 30) for unit in ("m", "h", "gb", "mb")]
    out += [f"v{n}" for n in range(1, 13)] + [f"v{a}.{b}" for a in (1, 2, 3) for b in range(10)]
    out += [f"q{n}" for n in (1, 2, 3, 4)] + ["fy24", "fy25", "h1", "h2"]
    camel = [p + s for p in _CAMEL_PREFIXES for s in _CAMEL_SUFFIXES]
    out += rng.sample(camel, 150)
    out += list(_HYPHENATED)
    # Service names are words too: notes mention services other than their subject.
    out += rng.sample(list(services), 60)
    return out


def _subjects(rng: random.Random) -> tuple[list[str], list[str], list[str]]:
    """A few hundred subjects: services, people and projects."""
    services = [f"{p}-{s}" for p in _NAME_PARTS for s in _SERVICE_SUFFIXES]
    services = rng.sample(services, 180)
    people = [f"{f}.{last}" for f in _FIRST_NAMES for last in _LAST_NAMES]
    people = rng.sample(people, 80)
    projects = [f"{p}-{w}" for p in _PROJECT_NAMES for w in _PROJECT_WORDS]
    projects = rng.sample(projects, 40)
    return services, people, projects


def _ranked_content_words(rng: random.Random, services: Sequence[str]) -> list[str]:
    """Every non-function word, most frequent first.

    English and technical words get shuffled ranks; special words (numbers,
    tags, identifiers) are scattered over the lower 90% of the ranks, since
    notes mention them less often than ordinary words.
    """
    base = [w for w in dict.fromkeys(_english_words()) if w not in _FUNCTION_WORDS]
    rng.shuffle(base)
    specials = [w for w in dict.fromkeys(_special_words(rng, services)) if w not in set(base)]
    keyed = [(float(i), w) for i, w in enumerate(base)]
    keyed += [(rng.uniform(0.1, 1.0) * len(base), w) for w in specials]
    keyed.sort()
    return [w for _, w in keyed]


def build_vocabulary(seed: int) -> Vocabulary:
    """The vocabulary and subject distributions for ``seed`` (Zipf-weighted).

    Function words take the top ranks, as in English.

    >>> v = build_vocabulary(42)
    >>> v.words[:3], 2000 < len(v.words) < 5000, len(v.subjects)
    (('the', 'to', 'of'), True, 300)
    """
    rng = random.Random(seed)
    services, people, projects = _subjects(rng)
    rest = _ranked_content_words(rng, services)
    words = tuple(_FUNCTION_WORDS + rest)
    subjects = services + people + projects
    rng.shuffle(subjects)
    return Vocabulary(
        words=words,
        cum_weights=_zipf_cum_weights(len(words)),
        content_words=tuple(rest),
        content_cum_weights=_zipf_cum_weights(len(rest)),
        subjects=tuple(subjects),
        subject_cum_weights=_zipf_cum_weights(len(subjects), s=0.8),
        services=tuple(services),
        people=tuple(people),
        projects=tuple(projects),
    )


def _ticket(rng: random.Random) -> str:
    """A rare identifier: an incident, a pull request or a short commit hash."""
    r = rng.random()
    if r < 0.4:
        return f"INC-{rng.randrange(1000, 100_000)}"
    if r < 0.7:
        return f"PR-{rng.randrange(100, 20_000)}"
    return f"{rng.getrandbits(28):07x}"


def _title(rng: random.Random, vocab: Vocabulary, subject: str) -> str:
    """A 3-8 word title, usually naming the subject first."""
    n = rng.randint(3, 8)
    lead = [subject] if rng.random() < 0.6 else []
    rest = rng.choices(vocab.content_words, cum_weights=vocab.content_cum_weights, k=n - len(lead))
    return " ".join(lead + rest)


def _content(rng: random.Random, vocab: Vocabulary, subject: str) -> str:
    """A 10-40 word body: Zipf words, sometimes the subject and a ticket id."""
    n = rng.randint(10, 40)
    body = rng.choices(vocab.words, cum_weights=vocab.cum_weights, k=n)
    if rng.random() < 0.5:
        body[rng.randrange(n)] = subject
    if rng.random() < 0.3:
        body[rng.randrange(n)] = _ticket(rng)
    body[0] = body[0][:1].upper() + body[0][1:]
    return " ".join(body) + "."


def _event_date(rng: random.Random) -> str:
    """A day between 2023-01-01 and 2025-12-31 as ``YYYY-MM-DD``."""
    day = _dt.date(2023, 1, 1) + _dt.timedelta(days=rng.randrange(3 * 365))
    return day.isoformat()


def _note(rng: random.Random, vocab: Vocabulary, kinds: Sequence[str]) -> Note:
    """Draw one note."""
    kind = rng.choices(kinds, cum_weights=_KIND_CUM)[0]
    subject = rng.choices(vocab.subjects, cum_weights=vocab.subject_cum_weights)[0]
    title = _title(rng, vocab, subject)
    content = _content(rng, vocab, subject)
    confidence = "high" if kind == "stable_fact" else rng.choice(("high", "medium", "low"))
    event_date = _event_date(rng) if kind == "event" else ""
    return Note(kind, title, content, subject, confidence, event_date)


_KIND_CUM: Final[tuple[float, ...]] = tuple(itertools.accumulate(w for _, w in KINDS))


def generate_corpus(n: int, seed: int = 42) -> list[Note]:
    """``n`` notes drawn deterministically from ``seed`` (prefix-stable in ``n``).

    >>> a, b = generate_corpus(5, seed=7), generate_corpus(50, seed=7)
    >>> a == b[:5]
    True
    >>> all(3 <= len(x.title.split()) <= 8 for x in b)
    True
    """
    vocab = build_vocabulary(seed)
    rng = random.Random(seed + 1)
    kinds = [k for k, _ in KINDS]
    return [_note(rng, vocab, kinds) for _ in range(n)]


def _document_frequencies(corpus: Sequence[Note]) -> Counter[str]:
    """How many notes each atom occurs in."""
    df: Counter[str] = Counter()
    for note in corpus:
        df.update(set(atoms(note.text)))
    return df


def _surface_words(note: Note) -> list[str]:
    """The note's words as written, punctuation stripped, duplicates dropped."""
    seen: dict[str, None] = {}
    for w in note.text.split():
        seen.setdefault(w.strip(".,;:?!"), None)
    return [w for w in seen if w]


def _rarity(word: str, df: Counter[str]) -> int:
    """A word's commonness: the document frequency of its most common atom."""
    return max((df[a] for a in atoms(word)), default=1 << 30)


def _distinctive_words(note: Note, df: Counter[str], k: int) -> list[str]:
    """The ``k`` rarest content words of ``note``, in the order they appear."""
    cands = [w for w in _surface_words(note) if w.lower() not in _FUNCTION_WORDS and len(w) > 1]
    rarest = sorted(cands, key=lambda w: (_rarity(w, df), w))[:k]
    return [w for w in cands if w in rarest]


def _typo(rng: random.Random, word: str) -> str:
    """``word`` with exactly one edit (substitution, deletion, insertion, transposition)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(20):
        i = rng.randrange(len(word))
        op = rng.choice(("sub", "del", "ins", "swap"))
        if op == "sub":
            out = word[:i] + rng.choice(letters) + word[i + 1 :]
        elif op == "del":
            out = word[:i] + word[i + 1 :]
        elif op == "ins":
            out = word[:i] + rng.choice(letters) + word[i:]
        else:
            i = min(i, len(word) - 2)
            out = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if out != word:
            return out
    return word + "x"


def _exact_query(rng: random.Random, corpus: Sequence[Note], df: Counter[str]) -> Query:
    """Two or three distinctive words lifted from a random note."""
    src = rng.randrange(len(corpus))
    picked = _distinctive_words(corpus[src], df, rng.choice((2, 3, 3)))
    return Query(" ".join(picked), "exact", src)


def _typo_query(rng: random.Random, corpus: Sequence[Note], df: Counter[str]) -> Query:
    """An exact-style query of two words with one edit applied to the rarer word.

    Editing the rarer word leaves a query whose intact word alone rarely pins
    the note down, so hit@10 on typos shows whether an engine forgives the edit.
    """
    for _ in range(50):
        src = rng.randrange(len(corpus))
        picked = _distinctive_words(corpus[src], df, 2)
        editable = [i for i, w in enumerate(picked) if _ALPHA.fullmatch(w) and len(w) >= 4]
        if editable:
            i = min(editable, key=lambda j: _rarity(picked[j], df))
            picked[i] = _typo(rng, picked[i])
            return Query(" ".join(picked), "typo", src)
    raise RuntimeError("no note has an editable distinctive word")


def _pseudo_word(rng: random.Random, known: set[str]) -> str:
    """A pronounceable made-up word that is no atom of the vocabulary.

    Tickets are the only corpus words outside the vocabulary, and every
    syllable holds a letter no ticket (digits, hex) has, so a made-up word
    never occurs in any corpus.
    """
    while True:
        w = "".join(rng.sample(_SYLLABLES, rng.randint(2, 3)))
        if w not in known and len(w) >= 6:
            return w


def _miss_query(rng: random.Random, known: set[str]) -> Query:
    """One or two made-up words."""
    n = rng.choice((1, 1, 2))
    return Query(" ".join(_pseudo_word(rng, known) for _ in range(n)), "miss")


def _question(rng: random.Random, vocab: Vocabulary) -> str:
    """A natural question from a template, e.g. "who owns billing-worker?"."""
    svc = rng.choice(vocab.services)
    if rng.random() < 0.5:
        svc = svc.replace("-", " ")
    content = [w for w in vocab.content_words[:500] if _ALPHA.fullmatch(w)]
    fields = {
        "svc": svc,
        "adj": rng.choice(_Q_ADJECTIVES),
        "ver": f"v{rng.randint(1, 12)}",
        "person": rng.choice(vocab.people).split(".")[0],
        "word": rng.choice(content),
        "noun": rng.choice(content),
        "project": rng.choice(vocab.projects).split("-")[0],
        "qtr": f"q{rng.randint(1, 4)}",
        "verb": rng.choice(_Q_VERBS),
    }
    return rng.choice(_QUESTION_TEMPLATES).format(**fields)


def _multi_query(rng: random.Random, vocab: Vocabulary) -> Query:
    """Two to five words: a natural question, or Zipf-drawn content words."""
    if rng.random() < 0.5:
        return Query(_question(rng, vocab), "multi")
    n = rng.randint(2, 5)
    ws = rng.choices(vocab.content_words, cum_weights=vocab.content_cum_weights, k=n)
    return Query(" ".join(ws), "multi")


def _note_words(note: Note) -> list[str]:
    """Every word occurrence of ``note`` (title and body), punctuation stripped.

    Function words are left out; repeats stay, so a word is drawn as often as
    the note uses it.
    """
    out = []
    for w in note.text.split():
        w = w.strip(".,;:?!")
        if len(w) > 1 and w.lower() not in _FUNCTION_WORDS:
            out.append(w)
    return out


def _sample_words(rng: random.Random, note: Note, k: int) -> list[str]:
    """Up to ``k`` distinct words drawn from ``note``'s occurrences."""
    pool = _note_words(note)
    picked: list[str] = []
    for _ in range(4 * k):
        if len(picked) == k or not pool:
            break
        w = rng.choice(pool)
        if w not in picked:
            picked.append(w)
    return picked


def _common_query(rng: random.Random, corpus: Sequence[Note]) -> Query:
    """One to three words sampled from a random note's own words."""
    while True:
        src = rng.randrange(len(corpus))
        picked = _sample_words(rng, corpus[src], rng.choice((1, 2, 2, 3)))
        if picked:
            return Query(" ".join(picked), "common", src)


def _note_question(rng: random.Random, corpus: Sequence[Note]) -> Query:
    """A natural question around one or two words sampled from a random note."""
    while True:
        src = rng.randrange(len(corpus))
        picked = _sample_words(rng, corpus[src], 2)
        if picked:
            a, b = (picked * 2)[:2]
            template = rng.choice(_NOTE_QUESTIONS)
            if len(picked) == 1:
                template = template.replace(" and the {b}", "").replace(" {b}", "")
            return Query(template.format(a=a, b=b), "question", src)


def _category_counts(n: int) -> dict[str, int]:
    """How many queries of each category a set of ``n`` holds (largest remainder)."""
    raw = {cat: n * share for cat, share in QUERY_MIX}
    counts = {cat: int(v) for cat, v in raw.items()}
    by_remainder = sorted(raw, key=lambda c: raw[c] - counts[c], reverse=True)
    for cat in by_remainder[: n - sum(counts.values())]:
        counts[cat] += 1
    return counts


def make_queries(corpus: Sequence[Note], n: int = 200, seed: int = 42) -> list[Query]:
    """A shuffled, deterministic mix of ``n`` queries (see :data:`QUERY_MIX`).

    ``miss`` and ``multi`` queries depend on the seed only, so they are the same
    for every corpus size; ``exact`` and ``typo`` queries are lifted from
    ``corpus`` itself (the rarest words of a note, judged on this corpus), and
    ``common`` and ``question`` queries sample a note's words.

    >>> qs = make_queries(generate_corpus(300, seed=3), n=20, seed=3)
    >>> len(qs), sorted({q.category for q in qs})
    (20, ['common', 'exact', 'miss', 'multi', 'question', 'typo'])
    """
    vocab = build_vocabulary(seed)
    counts = _category_counts(n)
    df = _document_frequencies(corpus)
    known = {a for w in vocab.words + vocab.subjects for a in atoms(w)}
    lifted_rng = random.Random(seed + 2)
    fixed_rng = random.Random(seed + 3)
    queries = [_exact_query(lifted_rng, corpus, df) for _ in range(counts["exact"])]
    queries += [_typo_query(lifted_rng, corpus, df) for _ in range(counts["typo"])]
    queries += [_miss_query(fixed_rng, known) for _ in range(counts["miss"])]
    queries += [_multi_query(fixed_rng, vocab) for _ in range(counts["multi"])]
    sampled_rng = random.Random(seed + 5)
    queries += [_common_query(sampled_rng, corpus) for _ in range(counts["common"])]
    queries += [_note_question(sampled_rng, corpus) for _ in range(counts["question"])]
    random.Random(seed + 4).shuffle(queries)
    return queries
