"""Generated calls for the fuzz suite (`sounding_bench.fuzz`): hypothesis strategies that draw every
RPC's requests from its protobuf descriptor, seeded from valid requests or from nothing, and
mutate some on the wire."""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import descriptor as d
from google.protobuf import message_factory
from hypothesis import strategies as st
from sounding.api.sounding.models.v1 import models_pb2
from sounding_api.sounding.v1 import corpus_pb2, sounding_pb2, tools_pb2

SERVICES = (
    sounding_pb2.DESCRIPTOR.services_by_name["SoundingService"],
    corpus_pb2.DESCRIPTOR.services_by_name["CorpusService"],
    tools_pb2.DESCRIPTOR.services_by_name["ToolService"],
    models_pb2.DESCRIPTOR.services_by_name["ModelService"],
)
MAX_DEPTH = 4
SCRATCH_COLLECTION = "fuzz-scratch"
FUZZ_TOOLSET = "fuzz-tools"
# Text that becomes invalid UTF-8 on the wire (same length, so every length prefix still holds).
MARKER = "\x01\x7f\x01"
INVALID_UTF8 = b"\xff\xfe\xff"
# A repeated field filled by repeating its drawn values stops at about this many bytes, so a
# request reaches past the servers' 16 MiB message limit but not to gigabytes.
REPEAT_BYTES = 20 * 1024 * 1024


PARAMETER_KEYS = [
    "task", "regime", "samples", "noise", "unknown_prior", "diversity", "signals",
    "answer_tokens", "question_tokens", "run_to_max_turns",
]  # fmt: skip

_INT_BOUNDS = {
    d.FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    d.FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    d.FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    d.FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOATS = (d.FieldDescriptor.TYPE_DOUBLE, d.FieldDescriptor.TYPE_FLOAT)


def _texts(pool: list[str] | None) -> st.SearchStrategy[str]:
    branches = [
        st.just(""),
        st.text(max_size=12),
        st.text(st.characters(codec="utf-8"), max_size=80),
        st.integers(1_000, 2_000_000).map(lambda n: "x" * n),
        st.integers(1, 3).map(lambda n: MARKER * n),
        st.sampled_from(["\n" * 64, " " * 10_000, "{" * 5_000, "1" * 5_000, "a" + "!" * 20_000 + "a"]),
    ]
    if pool:
        branches += [st.sampled_from(pool)] * 3
    return st.one_of(branches)


def _integers(kind: int) -> st.SearchStrategy[int]:
    low, high = _INT_BOUNDS[kind]
    edges = [
        v for v in (0, 1, -1, 2, 5, 50, 1001, 4097, 10**6, 2**31 - 1, -(2**31), low, high) if low <= v <= high
    ]
    return st.one_of(
        st.sampled_from(edges), st.integers(max(low, -100), min(high, 100)), st.integers(low, high)
    )


def _floats() -> st.SearchStrategy[float]:
    return st.one_of(
        st.sampled_from([0.0, 0.5, 1.0, -1.0, 1e-300, 1e308, float("nan"), float("inf"), -float("inf")]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(0, 1),
    )


def _scalar(f: d.FieldDescriptor, pools: dict[str, list[str]]) -> st.SearchStrategy:
    if f.type == f.TYPE_STRING:
        return _texts(pools.get(f.name))
    if f.type == f.TYPE_BYTES:
        return st.binary(max_size=64)
    if f.type == f.TYPE_BOOL:
        return st.booleans()
    if f.enum_type is not None:
        return st.integers(-3, len(f.enum_type.values) + 3)
    if f.type in _FLOATS:
        return _floats()
    return _integers(f.type)


def _count() -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(0, 4), st.integers(0, 4), st.integers(5, 40), st.sampled_from([65, 1001, 2001, 4097])
    )


@st.composite
def message(draw, descriptor: d.Descriptor, pools: dict[str, list[str]], depth: int = 0):
    """A message of `descriptor`'s type: each field present or not (at most one member of a
    oneof), within MAX_DEPTH levels of nesting."""
    instance = message_factory.GetMessageClass(descriptor)()
    if depth >= MAX_DEPTH:
        return instance
    chosen = {o.name: draw(st.sampled_from([None, *o.fields])) for o in descriptor.oneofs}
    for f in descriptor.fields:
        if f.containing_oneof is not None:
            if chosen[f.containing_oneof.name] is not f:
                continue
        elif not draw(st.booleans()):
            continue
        target = getattr(instance, f.name)
        sub = f.message_type  # None unless the field is a message
        if sub is not None and sub.GetOptions().map_entry:
            key_field, value_field = sub.fields_by_name["key"], sub.fields_by_name["value"]
            keys = (
                _texts(PARAMETER_KEYS)
                if key_field.type == key_field.TYPE_STRING
                else _scalar(key_field, pools)
            )
            count = draw(_count())
            for _ in range(min(count, 40)):
                value = draw(_scalar(value_field, pools) if value_field.type != f.TYPE_MESSAGE else st.none())
                if value is not None:
                    target[draw(keys)] = value
            continue
        if f.is_repeated:
            count = draw(_count())
            element = message(sub, pools, depth + 1) if sub is not None else _scalar(f, pools)
            values = [draw(element) for _ in range(min(count, 6))]
            if values and count > len(values):
                size = max(sum(_size(v) for v in values) // len(values), 1)
                count = min(count, max(REPEAT_BYTES // size, len(values)))
                values = (values * (count // len(values) + 1))[:count]
            if sub is not None:
                for value in values:
                    target.add().CopyFrom(value)
            else:
                target.extend(values)
            continue
        if sub is not None:
            target.CopyFrom(draw(message(sub, pools, depth + 1)))
        else:
            setattr(instance, f.name, draw(_scalar(f, pools)))
    return instance


def _size(value) -> int:
    if isinstance(value, str | bytes):
        return len(value) + 2
    return value.ByteSize() + 2 if hasattr(value, "ByteSize") else 8


def wire(instance) -> bytes:
    return instance.SerializeToString().replace(MARKER.encode(), INVALID_UTF8)


@st.composite
def mutated(draw, payload: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "append", "garbage"]))
    if kind == "truncate" and payload:
        return payload[: draw(st.integers(0, len(payload) - 1))]
    if kind == "flip" and payload:
        data = bytearray(payload)
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
        return bytes(data)
    if kind == "append":
        return payload + draw(st.binary(min_size=1, max_size=16))
    return draw(st.binary(max_size=64))


@dataclass(frozen=True)
class Call:
    service: str
    method: str
    client_streaming: bool
    server_streaming: bool
    payloads: tuple[bytes, ...]
    # Client streams: cancel after sending the payloads, instead of half-closing.
    cut_off: bool
    mutated: bool

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.method}"


def seeds(pools: dict[str, list[str]]) -> dict[str, list[list]]:
    """Per method, valid request streams (one message for a unary request), built from the
    pools: seeded calls start from one and replace a few of its fields."""
    from sounding_api.sounding.v1 import common_pb2

    s, c, m, tl = sounding_pb2, corpus_pb2, models_pb2, tools_pb2
    collection, session, retrieval = pools["collection"][0], pools["session_id"][0], pools["retrieval_id"][0]
    document = pools["document_id"][0]
    hypotheses = [s.Hypothesis(id=f"h{i}", description=f"hypothesis {i}") for i in range(4)]
    questions = [
        s.CandidateQuestion(
            id=f"q{j}", text=f"bit {j}?", cost=1.0, outcomes={f"h{i}": str((i >> j) & 1) for i in range(4)}
        )
        for j in range(2)
    ]
    return {
        "Retrieve": [[s.RetrieveRequest(collection=collection, query=q, top_k=5)] for q in pools["query"]]
        + [
            [
                s.RetrieveRequest(
                    collection=collection, query="depth", top_k=3, arms=["dense", "lexical", "hyde"]
                )
            ]
        ],
        "Inquire": [
            [
                s.InquireRequest(start=s.InquiryStart(domain="bulls_and_cows")),
                s.InquireRequest(observation=s.InquiryObservation(question_id="guess-1", answer="1 2")),
            ],
            [
                s.InquireRequest(
                    start=s.InquiryStart(domain="hypotheses", hypotheses=hypotheses, questions=questions)
                )
            ],
            [s.InquireRequest(resume=s.InquiryResume(session_id=session))],
        ],
        "Observe": [
            [
                s.ObserveRequest(
                    retrieval_outcome=s.RetrievalOutcome(retrieval_id=retrieval, used_document_ids=[document])
                )
            ],
            [
                s.ObserveRequest(
                    tool_use=s.ToolUseEvent(
                        toolset=FUZZ_TOOLSET, request="depth of the sea", used_tool="shell"
                    )
                )
            ],
        ],
        "Calibrate": [
            [
                s.CalibrateRequest(
                    target=s.CALIBRATION_TARGET_STOP_THRESHOLD,
                    task="dc",
                    regime="normal",
                    states=[s.CalibrationState(score=i / 20, error=i % 3 == 0) for i in range(20)],
                )
            ],
            [s.CalibrateRequest(target=s.CALIBRATION_TARGET_MISS_RATE)],
        ],
        "GetStrategyMetrics": [[s.GetStrategyMetricsRequest()]],
        "CreateCollection": [[c.CreateCollectionRequest(name=SCRATCH_COLLECTION)]],
        "GetCollection": [[c.GetCollectionRequest(name=collection)]],
        "ListCollections": [[c.ListCollectionsRequest(page_size=2)]],
        "DeleteCollection": [[c.DeleteCollectionRequest(name=SCRATCH_COLLECTION)]],
        "IngestDocuments": [
            [
                c.IngestDocumentsRequest(
                    collection=SCRATCH_COLLECTION, documents=[common_pb2.Document(id="s1", text="a note")]
                )
            ]
        ],
        "PutTools": [
            [
                tl.PutToolsRequest(
                    toolset=FUZZ_TOOLSET,
                    tools=[tl.Tool(name="sound_depth", description="Measure depth by echo sounding.")],
                )
            ]
        ],
        "DeleteTools": [[tl.DeleteToolsRequest(toolset=FUZZ_TOOLSET, names=["scratch_tool"])]],
        "ListTools": [[tl.ListToolsRequest(toolset=FUZZ_TOOLSET, page_size=2)]],
        "RouteTool": [[tl.RouteToolRequest(toolset=FUZZ_TOOLSET, request="how deep is it", top_k=3)]],
        "GetToolMetrics": [[tl.GetToolMetricsRequest(toolset=FUZZ_TOOLSET)]],
        "Embed": [[m.EmbedRequest(texts=["a query"])]],
        "Entail": [[m.EntailRequest(pairs=[m.TextPair(premise="It rains.", hypothesis="It is wet.")])]],
        "Cluster": [[m.ClusterRequest(texts=["yes", "no", "yes"], method=m.CLUSTER_METHOD_EMBEDDING)]],
        "Generate": [
            [m.GenerateRequest(messages=[m.ChatMessage(role="user", content="Say hi.")], max_new_tokens=8)]
        ],
    }


@st.composite
def seeded(draw, seed: list, descriptor: d.Descriptor, pools: dict[str, list[str]]) -> list:
    """The seed's messages, each with up to three top-level fields replaced by generated ones
    (a field the generated message leaves unset is cleared)."""
    out = []
    for original in seed:
        copy = type(original)()
        copy.CopyFrom(original)
        generated = draw(message(descriptor, pools))
        fields = list(descriptor.fields)
        for f in draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)) if fields else []:
            copy.ClearField(f.name)
            if f.is_repeated:
                getattr(copy, f.name).MergeFrom(getattr(generated, f.name))
            elif f.type == f.TYPE_MESSAGE:
                if generated.HasField(f.name):
                    getattr(copy, f.name).CopyFrom(getattr(generated, f.name))
            elif f.containing_oneof is None or generated.WhichOneof(f.containing_oneof.name) == f.name:
                setattr(copy, f.name, getattr(generated, f.name))
        out.append(copy)
    return out


@st.composite
def calls(draw, pools: dict[str, list[str]], weights: dict[str, int]) -> Call:
    """A call of some method: half of them start from a valid request of it (`seeds`), the
    others are generated from nothing."""
    methods = [(s, m) for s in SERVICES for m in s.methods for _ in range(weights.get(m.name, 1))]
    service, method = draw(st.sampled_from(methods))
    starts = seeds(pools).get(method.name)
    if starts and draw(st.booleans()):
        payloads = [wire(x) for x in draw(seeded(draw(st.sampled_from(starts)), method.input_type, pools))]
    else:
        count = draw(st.integers(1, 5)) if method.client_streaming else 1
        payloads = [wire(draw(message(method.input_type, pools))) for _ in range(count)]
    count = len(payloads)
    changed = draw(st.integers(0, 7)) == 0
    if changed:
        index = draw(st.integers(0, count - 1))
        payloads[index] = draw(mutated(payloads[index]))
    cut_off = method.client_streaming and draw(st.integers(0, 3)) == 0
    return Call(
        service.full_name,
        method.name,
        method.client_streaming,
        method.server_streaming,
        tuple(payloads),
        cut_off,
        changed,
    )
