import json

import pytest

from genni.pipeline.preprocess import formats
from genni.pipeline.preprocess.formats import Event, MalformedRecord


def test_amazon():
    line = json.dumps(
        {"reviewerID": "A1", "asin": "B1", "overall": 4.0, "unixReviewTime": 1000}
    )
    assert formats.parse_line(line, formats.AMAZON) == [Event("A1", "B1", 1000.0, 4.0)]


def test_amazon_2023_prefers_parent_asin_and_converts_ms():
    record = {
        "user_id": "U",
        "asin": "child",
        "parent_asin": "P",
        "rating": 5,
        "timestamp": 1588687728923,
    }
    (event,) = formats.parse_line(json.dumps(record), formats.AMAZON_2023)
    assert event == Event("U", "P", 1588687728.923, 5.0)
    del record["parent_asin"]
    assert (
        formats.parse_line(json.dumps(record), formats.AMAZON_2023)[0].item == "child"
    )


def test_yelp_date():
    record = {
        "user_id": "u",
        "business_id": "b",
        "stars": 3,
        "date": "1970-01-02 00:00:01",
    }
    assert formats.parse_line(json.dumps(record), formats.YELP) == [
        Event("u", "b", 86401.0, 3.0)
    ]


def test_csv_and_sequences():
    assert formats.parse_line("u1,i1,5.0,123", formats.CSV) == [
        Event("u1", "i1", 123.0, 5.0)
    ]
    assert formats.parse_line("7 3 3 9", formats.SEQUENCES) == [
        Event("7", "3", 0.0, None),
        Event("7", "3", 1.0, None),
        Event("7", "9", 2.0, None),
    ]


@pytest.mark.parametrize(
    "line, fmt, reason",
    [
        ('{"reviewerID": "A1", ', formats.AMAZON, "bad JSON"),
        ("[1, 2]", formats.AMAZON, "bad JSON: not an object"),
        (
            '{"asin": "B1", "overall": 1, "unixReviewTime": 1}',
            formats.AMAZON,
            "missing field: reviewerID",
        ),
        (
            '{"reviewerID": "A1", "asin": "B1", "overall": 1, "unixReviewTime": "x"}',
            formats.AMAZON,
            "bad timestamp",
        ),
        (
            '{"reviewerID": "A1", "asin": "B 1", "overall": 1, "unixReviewTime": 1}',
            formats.AMAZON,
            "bad asin",
        ),
        (
            '{"reviewerID": "A1", "asin": "B1", "overall": "NaN", "unixReviewTime": 1}',
            formats.AMAZON,
            "bad rating",
        ),
        (
            '{"user_id": "u", "business_id": "b", "stars": 3, "date": "yesterday"}',
            formats.YELP,
            "bad timestamp",
        ),
        (
            '{"user_id": "u", "rating": 3, "timestamp": 1}',
            formats.AMAZON_2023,
            "missing field: parent_asin or asin",
        ),
        ("u1,i1,5.0", formats.CSV, "bad CSV: expected 4 fields, got 3"),
        ("lonely", formats.SEQUENCES, "bad sequence"),
    ],
)
def test_malformed_reasons(line, fmt, reason):
    with pytest.raises(MalformedRecord, match=reason) as info:
        formats.parse_line(line, fmt)
    assert info.value.reason.startswith(reason)


def test_unknown_format():
    with pytest.raises(ValueError, match="Unknown format 'xml'"):
        formats.parse_line("x", "xml")


@pytest.mark.parametrize(
    "line, fmt",
    [
        ('{"reviewerID": "A", "asin": "B"}', formats.AMAZON),
        ('{"user_id": "A", "parent_asin": "B"}', formats.AMAZON_2023),
        ('{"user_id": "A", "business_id": "B"}', formats.YELP),
        ("A,B,5.0,1234", formats.CSV),
        ("1 2 3 4", formats.SEQUENCES),
    ],
)
def test_detect_format(line, fmt):
    assert formats.detect_format(line) == fmt


def test_detect_format_failure_names_the_flag():
    with pytest.raises(ValueError, match="pass --format"):
        formats.detect_format('{"foo": 1}')
    with pytest.raises(ValueError, match="input is empty"):
        formats.resolve_format(formats.AUTO, iter(["", "  "]))
    assert formats.resolve_format(formats.CSV, iter([])) == formats.CSV
    # A broken first record does not hide the format of the rest.
    lines = ['{"reviewerID": "A1", ', '{"reviewerID": "A", "asin": "B"}']
    assert formats.resolve_format(formats.AUTO, iter(lines)) == formats.AMAZON
    with pytest.raises(ValueError, match="pass --format"):
        formats.resolve_format(formats.AUTO, iter(["<a>", "<b>"]))
