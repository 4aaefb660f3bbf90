"""Parsers for the review-log formats that `genni preprocess` reads.

Each parser turns one input line into `Event`s, or raises `MalformedRecord` with
a short reason that ends up in the dead-letter output. Parsers are plain
functions, so the Beam pipeline and the single-process implementation share them.
"""

from __future__ import annotations

import calendar
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import NamedTuple

AMAZON = "amazon"
AMAZON_2023 = "amazon2023"
YELP = "yelp"
CSV = "csv"
TSV = "tsv"
MOVIELENS = "movielens"
MOVIELENS_DAT = "movielens_dat"
RECBOLE = "recbole"
SEQUENCES = "sequences"
AUTO = "auto"
FORMATS = (
    AMAZON,
    AMAZON_2023,
    YELP,
    CSV,
    TSV,
    MOVIELENS,
    MOVIELENS_DAT,
    RECBOLE,
    SEQUENCES,
)
# Formats whose first line (a header) says how to read the others.
HEADED = (RECBOLE,)

YELP_DATE_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d")
MS_PER_SECOND = 1000.0
DETECT_LINES = 1000


class Event(NamedTuple):
    """One interaction: `user` acted on `item` at `timestamp` (seconds)."""

    user: str
    item: str
    timestamp: float
    rating: float | None


class MalformedRecord(ValueError):
    """A line that cannot be turned into events; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _load_json(line: str) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise MalformedRecord(f"bad JSON: {e.msg}") from None
    if not isinstance(record, dict):
        raise MalformedRecord("bad JSON: not an object")
    return record


def _field(record: dict, *names: str) -> object:
    for name in names:
        value = record.get(name)
        if value not in (None, ""):
            return value
    raise MalformedRecord(f"missing field: {' or '.join(names)}")


def _id(value: object, name: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    # An id is one non-empty token: no surrounding or inner white space.
    if not isinstance(value, str) or value.split() != [value]:
        raise MalformedRecord(f"bad {name}: {value!r}")
    return value


def _number(value: object, what: str) -> float:
    if isinstance(value, bool):
        raise MalformedRecord(f"bad {what}: {value!r}")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise MalformedRecord(f"bad {what}: {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise MalformedRecord(f"bad {what}: {value!r}")
    return number


def _yelp_timestamp(value: object) -> float:
    if isinstance(value, str):
        for fmt in YELP_DATE_FORMATS:
            try:
                return float(calendar.timegm(time.strptime(value, fmt)))
            except ValueError:
                continue
    raise MalformedRecord(f"bad timestamp: {value!r}")


def parse_amazon(line: str) -> Iterator[Event]:
    """Amazon 2014/2018 reviews: reviewerID, asin, overall, unixReviewTime."""
    record = _load_json(line)
    yield Event(
        _id(_field(record, "reviewerID"), "reviewerID"),
        _id(_field(record, "asin"), "asin"),
        _number(_field(record, "unixReviewTime"), "timestamp"),
        _number(_field(record, "overall"), "rating"),
    )


def parse_amazon_2023(line: str) -> Iterator[Event]:
    """Amazon Reviews 2023: user_id, parent_asin (or asin), rating, timestamp ms."""
    record = _load_json(line)
    yield Event(
        _id(_field(record, "user_id"), "user_id"),
        _id(_field(record, "parent_asin", "asin"), "parent_asin"),
        _number(_field(record, "timestamp"), "timestamp") / MS_PER_SECOND,
        _number(_field(record, "rating"), "rating"),
    )


def parse_yelp(line: str) -> Iterator[Event]:
    """Yelp reviews: user_id, business_id, stars, date ("YYYY-MM-DD HH:MM:SS")."""
    record = _load_json(line)
    yield Event(
        _id(_field(record, "user_id"), "user_id"),
        _id(_field(record, "business_id"), "business_id"),
        _yelp_timestamp(_field(record, "date")),
        _number(_field(record, "stars"), "rating"),
    )


def _user_item_rating_time(line: str, separator: str, what: str) -> Event:
    """One event of a `user<sep>item<sep>rating<sep>timestamp` line."""
    fields = [f.strip() for f in line.split(separator)]
    if len(fields) != 4:
        raise MalformedRecord(f"bad {what}: expected 4 fields, got {len(fields)}")
    user, item, rating, timestamp = fields
    return Event(
        _id(user, "user"),
        _id(item, "item"),
        _number(timestamp, "timestamp"),
        _number(rating, "rating"),
    )


def parse_csv(line: str) -> Iterator[Event]:
    """Headerless Amazon ratings CSV: user,item,rating,timestamp."""
    yield _user_item_rating_time(line, ",", "CSV")


def parse_tsv(line: str) -> Iterator[Event]:
    """Headerless tab-separated user, item, rating, timestamp (MovieLens
    100K's `u.data`)."""
    yield _user_item_rating_time(line, "\t", "TSV")


MOVIELENS_HEADER = ("userid", "movieid", "rating", "timestamp")


def parse_movielens(line: str) -> Iterator[Event]:
    """MovieLens `ratings.csv` (ml-latest, ml-20m, ml-25m, ml-32m):
    `userId,movieId,rating,timestamp`, its header line skipped."""
    fields = [f.strip() for f in line.split(",")]
    if tuple(f.lower() for f in fields) == MOVIELENS_HEADER:
        return
    yield from parse_csv(line)


def parse_movielens_dat(line: str) -> Iterator[Event]:
    """MovieLens `ratings.dat` (ml-1m, ml-10m): `UserID::MovieID::Rating::Timestamp`."""
    yield _user_item_rating_time(line, "::", "ratings.dat")


RECBOLE_TYPES = ("token", "float", "token_seq", "float_seq")


class RecBoleParser:
    """RecBole's atomic `.inter` file: tab-separated, its first line a typed
    header (`user_id:token<TAB>item_id:token<TAB>rating:float<TAB>timestamp:float`)
    that names the columns, in any order; other columns are ignored. The
    header line itself (in every file) yields nothing."""

    def __init__(self, header: str):
        columns = parse_recbole_header(header)
        missing = [c for c in ("user_id", "item_id", "timestamp") if c not in columns]
        if missing:
            raise ValueError(
                f"A RecBole .inter file needs the columns user_id, item_id and "
                f"timestamp (rating is optional); its header {header.strip()!r} "
                f"lacks {', '.join(missing)}."
            )
        self.header = header.strip()
        self.width = len(columns)
        self.at = {name: columns.index(name) for name in columns}

    def __call__(self, line: str) -> Iterator[Event]:
        if line.strip() == self.header:
            return
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != self.width:
            raise MalformedRecord(
                f"bad .inter line: expected {self.width} fields, got {len(fields)}"
            )
        rating = self.at.get("rating")
        yield Event(
            _id(fields[self.at["user_id"]].strip(), "user_id"),
            _id(fields[self.at["item_id"]].strip(), "item_id"),
            _number(fields[self.at["timestamp"]], "timestamp"),
            None if rating is None else _number(fields[rating], "rating"),
        )


def parse_recbole_header(line: str) -> list[str] | None:
    """The column names of a RecBole typed header, None if `line` is not one."""
    names = []
    for field in line.strip().split("\t"):
        name, _, kind = field.partition(":")
        if not name or kind not in RECBOLE_TYPES:
            return None
        names.append(name)
    return names


def parse_sequences(line: str) -> Iterator[Event]:
    """S3-Rec sequence text: `user item item ...`, items in time order.

    The position in the line is the timestamp, so order is kept exactly.
    """
    tokens = line.split()
    if len(tokens) < 2:
        raise MalformedRecord("bad sequence: a user and at least one item needed")
    user = tokens[0]
    for position, item in enumerate(tokens[1:]):
        yield Event(user, item, float(position), None)


PARSERS: dict[str, Callable[[str], Iterator[Event]]] = {
    AMAZON: parse_amazon,
    AMAZON_2023: parse_amazon_2023,
    YELP: parse_yelp,
    CSV: parse_csv,
    TSV: parse_tsv,
    MOVIELENS: parse_movielens,
    MOVIELENS_DAT: parse_movielens_dat,
    SEQUENCES: parse_sequences,
}


def parser_for(fmt: str, header: str | None = None) -> Callable[[str], Iterator[Event]]:
    """The line parser of `fmt`; a headed format (`HEADED`) reads its columns
    from `header`, the log's first non-blank line."""
    if fmt == RECBOLE:
        if header is None:
            raise ValueError("The recbole format needs its header line.")
        return RecBoleParser(header)
    try:
        return PARSERS[fmt]
    except KeyError:
        raise ValueError(
            f"Unknown format {fmt!r}: choose one of {', '.join(FORMATS)}."
        ) from None


def parse_line(line: str, fmt: str, header: str | None = None) -> list[Event]:
    """All events of one line; raises `MalformedRecord` for a bad line."""
    return list(parser_for(fmt, header)(line))


def detect_format(line: str) -> str:
    """Guess the format of a log from its first non-blank line."""
    text = line.strip()
    if parse_recbole_header(text):
        return RECBOLE
    if tuple(f.strip().lower() for f in text.split(",")) == MOVIELENS_HEADER:
        return MOVIELENS
    if text.count("::") == 3:
        return MOVIELENS_DAT
    if _is_tsv(text):
        return TSV
    if text.startswith("{"):
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict):
            if "reviewerID" in record:
                return AMAZON
            if "business_id" in record:
                return YELP
            if "user_id" in record and ("parent_asin" in record or "asin" in record):
                return AMAZON_2023
    elif text.count(",") == 3:
        return CSV
    elif len(text.split()) >= 2 and "," not in text:
        return SEQUENCES
    raise ValueError(
        f"Cannot tell the format of the input from its first line {text[:120]!r}; "
        f"pass --format ({', '.join(FORMATS)})."
    )


def _is_tsv(text: str) -> bool:
    """Four tab-separated fields, the last two numbers (a rating, a time)."""
    try:
        _user_item_rating_time(text, "\t", "TSV")  # What `parse_tsv` reads.
    except MalformedRecord:
        return False
    return True


def dead_letter_record(
    path: str, line: str | bytes, reason: str, line_number: int | None = None
) -> str:
    """One dead-letter line: JSON with the source file, the line's number
    (1-based), the reason and the line (bytes that are not UTF-8 as escapes)."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "backslashreplace")
    record = {"file": path, "line_number": line_number, "reason": reason, "line": line}
    return json.dumps(record)


# A sequences log's event time: its line's number times this, plus its place
# on the line, so that a user on several lines of a file is joined in file
# order (lines up to 2**29, items a line up to 2**24: exact in a float).
SEQUENCE_LINE_SPAN = float(1 << 24)
MAX_SEQUENCE_LINES = 1 << 29


def decode(raw: bytes | str) -> str:
    """One line as text (its line break cut); MalformedRecord if it is not
    UTF-8."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedRecord(
                f"not UTF-8 text (byte {e.start}: {raw[e.start : e.start + 1]!r})"
            ) from None
    return raw.rstrip("\r\n")


def read_line(
    parse: Callable[[str], Iterator[Event]],
    fmt: str,
    raw: bytes | str,
    line_number: int,
) -> list[Event] | None:
    """The events of line `line_number` (1-based) of a file, its bytes `raw`,
    read by `parse` (`parser_for(fmt)`); None for a blank line;
    MalformedRecord for a line that is not UTF-8 or cannot be read. A
    sequences line's events are timed by their place in the file. The Beam
    pipeline and the in-memory reader both read every line here."""
    line = decode(raw)
    if not line.strip():
        return None
    events = list(parse(line))
    if fmt != SEQUENCES:
        return events
    if line_number >= MAX_SEQUENCE_LINES or len(events) >= SEQUENCE_LINE_SPAN:
        raise MalformedRecord("a sequences file past 2**29 lines or 2**24 items a line")
    start = line_number * SEQUENCE_LINE_SPAN
    return [e._replace(timestamp=start + e.timestamp) for e in events]


def kept_events(
    events: list[Event] | None, min_rating: float | None, counts: Counter
) -> Iterator[Event]:
    """The events of one line (`read_line`; None: a blank line) but those
    rated `min_rating` or lower, counted in `counts` as they go: blank_lines,
    events_read, dropped_by_rating. The Beam pipeline and the in-memory reader
    both filter here."""
    if events is None:
        counts["blank_lines"] += 1
        return
    for event in events:
        counts["events_read"] += 1
        if (
            min_rating is not None
            and event.rating is not None
            and event.rating <= min_rating
        ):
            counts["dropped_by_rating"] += 1
            continue
        yield event


def resolve_format(fmt: str, first_lines: Iterator[str]) -> str:
    """`fmt` itself, or the format detected from the first well-formed line.

    A log may start with a broken record, so up to `DETECT_LINES` lines are
    tried; the error names the first one when none can be told.
    """
    if fmt != AUTO:
        if fmt not in FORMATS:
            raise ValueError(
                f"Unknown format {fmt!r}: choose one of {', '.join(FORMATS)}."
            )
        return fmt
    first_error = None
    lines = [line for _, line in zip(range(DETECT_LINES), first_lines, strict=False)]
    for line in lines:
        if not line.strip():
            continue
        try:
            fmt = detect_format(line)
        except ValueError as e:
            first_error = first_error or e
            continue
        if fmt == SEQUENCES:
            _refuse_a_table(lines)
        return fmt
    if first_error is not None:
        raise first_error
    raise ValueError("The input is empty: no line to detect its format from.")


def _refuse_a_table(lines: list[str]) -> None:
    """Whitespace-separated lines read as S3-Rec sequences only if they look
    like them: items separated by spaces (a tab after the user at most, as in
    `sequences.tsv`), lines of varying lengths. Lines of three or more
    tab-separated fields, or all of the same few fields (user item rating
    time), are a table, and `--format` must say how to read it."""
    rows = [line for line in lines if line.strip()]
    widths = {len(line.split()) for line in rows}
    tabs = any(line.strip().count("\t") >= 2 for line in rows)
    if tabs or (len(widths) == 1 and max(widths) <= 5):
        fields = f"{max(widths)} " if len(widths) == 1 else ""
        raise ValueError(
            f"The input looks like a table ({fields}"
            + ("tab-separated " if tabs else "")
            + "fields a line), not S3-Rec sequences (a user, then items, space-"
            "separated): pass --format (csv, tsv, movielens, movielens_dat, recbole; "
            "or sequences if each line is one user's items)."
        )
