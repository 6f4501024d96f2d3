"""Payloads (src/json.rs): Python values are stored as the JSON text that
``json.dumps(v, separators=(",", ":"), ensure_ascii=False)`` gives, bytes-like
values as BLOBs; anything json rejects is rejected the same way, and a
rejected batch writes nothing."""

from __future__ import annotations

import enum
import json
from collections import OrderedDict

import honker
import pytest
from conftest import snapshot


class Color(enum.IntEnum):
    RED = 1


class Mood(str, enum.Enum):
    HAPPY = "happy"


def deep(n: int):
    v: object = "bottom"
    for _ in range(n):
        v = [v]
    return v


# Values whose text must equal json.dumps's byte for byte.
EXACT = [
    None,
    True,
    False,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    2**64,  # past i64: json writes it
    -(10**30),
    "",
    "plain",
    'quote " backslash \\ slash /',
    "controls \n \r \t \b \f \x00 \x01 \x1f \x7f",
    "unicode é ñ 中文 🎉 \u2028 \u2029",
    [],
    {},
    [1, "two", None, [3, [4]], {"five": 5}],
    (1, 2, (3,)),
    {"to": "user1@example.com", "template": "order-confirmed"},
    {"nested": {"a": [True, False, None], "b": {"c": {"d": "e"}}}},
    {1: "int key", 2.5: "float key", False: "bool key", None: "none key"},
    OrderedDict([("z", 1), ("a", 2)]),
    {"k": Color.RED, "m": Mood.HAPPY},
    deep(63),
    deep(64),
    deep(65),
    deep(200),
]

# Floats: the same number, though not always the same digits ("1e16" for
# Python's "1e+16").
FLOATS = [0.0, -0.0, 1.5, 0.1, 1e16, 1e-7, 123456789.123456789, 1e308, 5e-324, -2.5e-10]


def stored(db: honker.Database, job_id: int):
    [(text,)] = db.query("SELECT payload FROM _honker_jobs WHERE id = ?", [job_id])
    return text


@pytest.mark.parametrize("value", EXACT, ids=lambda v: repr(v)[:40])
def test_json_values_are_stored_as_json_dumps_writes_them(db, value):
    q = db.queue("p")
    e = q.enqueue(value)
    assert stored(db, e.id) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    [job] = q.claim_batch("w")
    assert job.payload == json.loads(json.dumps(value))


def test_floats_keep_their_value(db):
    q = db.queue("p")
    for f in FLOATS:
        e = q.enqueue({"f": f, "list": [f]})
        assert json.loads(stored(db, e.id)) == {"f": f, "list": [f]}
        text = stored(db, e.id)
        assert str(json.loads(text)["f"]) == str(f)  # same float, sign of zero too


def test_bytes_like_values_are_blobs(db):
    q = db.queue("p")
    for value in (b"\x00\xff", bytearray(b"ab"), memoryview(b"xyz")):
        e = q.enqueue(value)
        assert stored(db, e.id) == bytes(value)
    assert [j.payload for j in q.claim_batch("w", 3)] == [b"\x00\xff", b"ab", b"xyz"]


def test_a_result_is_encoded_the_same_way(db):
    q = db.queue("p")
    q.enqueue(1)
    [job] = q.claim_batch("w")
    job.ack(result={"ok": [1, 2.5, "é"]})
    [(text,)] = db.query("SELECT value FROM _honker_results WHERE job_id = ?", [job.id])
    assert text == '{"ok":[1,2.5,"é"]}'
    assert q.get_result(job.id) == {"ok": [1, 2.5, "é"]}


class Opaque:
    pass


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (float("nan"), honker.InvalidArgument),
        ({"x": [float("inf")]}, honker.InvalidArgument),
        ({"deep": [*deep(200), float("-inf")]}, honker.InvalidArgument),
        ({1, 2}, honker.InvalidArgument),
        ({"x": Opaque()}, honker.InvalidArgument),
        ({(1, 2): "tuple key"}, honker.InvalidArgument),
        ("\ud800", UnicodeEncodeError),
    ],
    ids=["nan", "inf", "deep-inf", "set", "object", "tuple-key", "surrogate"],
)
def test_what_json_rejects_is_rejected_and_nothing_is_written(db, bad, error):
    q = db.queue("p")
    before = snapshot(db)
    with pytest.raises(error):
        q.enqueue_many([{"fine": 1}, bad, {"fine": 2}])
    assert snapshot(db) == before


def test_a_cycle_is_rejected(db):
    q = db.queue("p")
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular"):
        q.enqueue(cyclic)
    assert q.stats().ready == 0


@pytest.mark.parametrize(
    "text",
    [
        '{"i":0}',
        ' {"a": 1} ',  # another writer's spacing (SQL, another language)
        "\n[1, 2]\n",
        '{"a":1}  ',
        '"x"',
        "1e5",
        "NaN",
        "-Infinity",
        '{"a":1} {"b":2}',  # two values: json.loads's "Extra data"
        "[1,2] trailing",
        "{",
        "",
        '{"big": 123456789012345678901234567890}',
        '"\\ud83c\\udf89 \\u2028"',
    ],
)
def test_stored_text_decodes_exactly_as_json_loads_does(text):
    from honker._payload import decode

    try:
        want = json.loads(text)
    except json.JSONDecodeError as e:
        with pytest.raises(json.JSONDecodeError) as got:
            decode(text)
        assert (got.value.msg, got.value.pos) == (e.msg, e.pos)
        return
    got = decode(text)
    assert got == want or (got != got and want != want)  # NaN
    assert type(got) is type(want)
    assert decode(b'{"a":1}') == b'{"a":1}' and decode(None) is None
