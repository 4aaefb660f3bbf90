"""The catalog: the items a shop lists and their attributes, from an items
file in any of the layouts below (`read_catalog`, told apart by content).

- S3-Rec `item2attributes.json`: one JSON object {item id: [attribute ids]};
  the attribute ids are kept as they are.
- Item metadata, one record per line: Amazon 2014 (Python literals), 2018
  and 2023 (JSON), Yelp `business.json` (`metadata_attributes`):
  "brand:<brand>" and "category:<name>".
- MovieLens `movies.csv` (header `movieId,title,genres`) and `movies.dat`
  (ml-1m, ml-10m: `MovieID::Title::Genres`, no header): "genre:<name>" for
  each `|`-separated genre ("(no genres listed)": none) and "year:<yyyy>"
  from the "(yyyy)" that ends the title.
- MovieLens 100K `u.item` (`|`-separated: id, title, release date, video
  release date, IMDb URL, then 19 genre flags in `u.genre`'s order): a
  "genre:<name>" for each flag set ("unknown": none) and "year:<yyyy>" from
  the release date (else the title).
- RecBole atomic `.item` (tab-separated, header `name:type`, e.g. ml-100k's
  `item_id:token movie_title:token_seq release_year:token class:token_seq`):
  `item_id` (else the first `token` field) is the id; every other `token` field is one
  attribute "<name>:<value>", every `token_seq` field one per space-separated
  value.
- A plain CSV or TSV (a header; the id column `item_id`, `id` or `item`,
  else the first): every other column categorical, "<column>:<value>", a
  cell with `|` or `;` multi-valued, an empty cell none.
- JSON lines (one object a line; the id under `item_id`, `id` or `item`):
  every other key categorical, a list multi-valued, an object or null none.

In the last three, free text (a field whose name holds "title", "name",
"desc", "text", "url" or "image") and numbers that are not ids (RecBole
`float` fields) are not attributes; MovieLens' title gives its year only.
A line that cannot be read (a record without an id, a row of the wrong
width, broken JSON) is kept in `Catalog.malformed` for the dead-letter
output, and counted; an item listed twice has the union of its attributes.
A file that is not UTF-8 is read as Latin-1 (ml-1m's and ml-100k's item
files are), and `Catalog.encoding` says so.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import io
import json
import re

ID_COLUMNS = ("item_id", "id", "item")
FREE_TEXT = ("title", "name", "desc", "text", "url", "image")
MULTI_VALUED = re.compile(r"[|;]")
YEAR = re.compile(r"\((\d{4})\)\s*$")
NO_GENRES = "(no genres listed)"
# MovieLens 100K's `u.genre`, in the order of `u.item`'s flags.
ML100K_GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy",
    "Crime", "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror",
    "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western",
)  # fmt: skip
ML100K_FIELDS = 5 + len(ML100K_GENRES)
RELEASE_YEAR = re.compile(r"(\d{4})\s*$")


@dataclasses.dataclass
class Catalog:
    """Raw item id -> its attributes ("name:value" strings, or S3-Rec's
    attribute ids), the lines that could not be read, and the layout."""

    items: dict[str, list]
    malformed: list[str]
    layout: str
    encoding: str = "utf-8"

    def add(self, item: str, values: list) -> None:
        merged = self.items.setdefault(item, [])
        merged.extend(v for v in values if v not in merged)


def read_catalog(path: str) -> Catalog:
    """The catalog in the items file at `path` (plain or gzip, any Beam file
    system); a `ValueError` names a file none of the layouts reads."""
    from apache_beam.io.filesystems import FileSystems

    try:
        with FileSystems.open(path) as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"Cannot read the items file {path!r}: {e}") from None
    try:
        text, encoding = raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        # Every byte is a Latin-1 character: the titles of ml-1m's movies.dat
        # and ml-100k's u.item are Latin-1, and ids and attributes keep
        # whatever characters they decode to.
        text, encoding = raw.decode("latin-1"), "latin-1"
    catalog = parse_catalog(text)
    catalog.encoding = encoding
    if not catalog.items:
        raise ValueError(
            f"The items file {path!r} is neither an S3-Rec item2attributes.json, "
            "item metadata lines, a MovieLens movies.csv, movies.dat or u.item, "
            "a RecBole .item file, "
            "a CSV with a header nor JSON lines "
            f"({len(catalog.malformed)} unreadable lines)."
        )
    return catalog


def parse_catalog(text: str) -> Catalog:
    """`read_catalog` on the file's text (an empty catalog: none reads it)."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # Not one JSON document: lines.
    if isinstance(whole, dict) and not _record_id(whole):
        if not all(isinstance(v, list) for v in whole.values()):
            raise ValueError("An item2attributes.json maps item ids to lists.")
        return Catalog({str(k): list(v) for k, v in whole.items()}, [], "s3rec")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return Catalog({}, [], "empty")
    head = lines[0].lstrip("\ufeff")
    if head.lstrip().startswith(("{", "[")) or head.startswith("{'"):
        return _records(lines)
    fields = head.split("\t")
    if all(":" in f for f in fields) and any(f.endswith(":token") for f in fields):
        return _recbole(lines)
    if [f.strip() for f in head.split(",")][:3] == ["movieId", "title", "genres"]:
        return _movielens(lines[1:], csv.reader(lines[1:]), "movielens")
    if head.count("::") == 2:
        rows = (line.split("::") for line in lines)
        return _movielens(lines, rows, "movielens_dat")
    if _is_ml100k_item(head):
        return _ml100k_items(lines)
    return _table(lines)


def _record_id(record: dict):
    for key in ("business_id", "parent_asin", "asin", *ID_COLUMNS):
        value = record.get(key)
        usable = isinstance(value, (str, int)) and not isinstance(value, bool)
        if usable and str(value).strip():
            return key, str(value).strip()
    return None


def _records(lines: list[str]) -> Catalog:
    """Metadata lines (Amazon, Yelp) or JSON lines."""
    catalog = Catalog({}, [], "metadata")
    for line in lines:
        parsed = metadata_attributes(line)
        if parsed is None:
            parsed = _json_line(line)
            if parsed is not None:
                catalog.layout = "jsonl"
        if parsed is None:
            catalog.malformed.append(line)
        else:
            catalog.add(*parsed)
    return catalog


def _record(line: str) -> dict | None:
    """One line's record: JSON, or Python literals (Amazon 2014 metadata);
    None if it is neither, or not a mapping."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        try:
            record = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return record if isinstance(record, dict) else None


def _json_line(line: str) -> tuple[str, list[str]] | None:
    record = _record(line)
    if record is None:
        return None
    found = _record_id(record)
    if found is None or found[0] not in ID_COLUMNS:
        return None
    key, item = found
    values = []
    for name, value in record.items():
        if name == key or _free_text(name):
            continue
        cells = value if isinstance(value, list) else [value]
        for cell in cells:
            if isinstance(cell, (str, int, float)) and str(cell).strip():
                values.append(f"{name}:{str(cell).strip()}")
    return item, values


def _free_text(name: str) -> bool:
    name = name.lower()
    return any(word in name for word in FREE_TEXT)


def _recbole(lines: list[str]) -> Catalog:
    fields = [f.split(":", 1) for f in lines[0].lstrip("\ufeff").split("\t")]
    names = [name for name, _ in fields]
    id_at = (
        names.index("item_id")
        if "item_id" in names
        else next(n for n, (_, kind) in enumerate(fields) if kind == "token")
    )
    catalog = Catalog({}, [], "recbole")
    for line in lines[1:]:
        cells = line.rstrip("\n").split("\t")
        if len(cells) != len(fields) or not cells[id_at].strip():
            catalog.malformed.append(line)
            continue
        values = []
        for n, ((name, kind), cell) in enumerate(zip(fields, cells, strict=True)):
            if n == id_at or _free_text(name):
                continue
            if kind == "token" and cell.strip():
                values.append(f"{name}:{cell.strip()}")
            elif kind == "token_seq":
                values.extend(f"{name}:{v}" for v in cell.split())
        catalog.add(cells[id_at].strip(), values)
    return catalog


def _movielens(lines: list[str], rows, layout: str) -> Catalog:
    """`movies.csv` (`rows`: its lines after the header, CSV-parsed) or
    `movies.dat` (its lines split at "::")."""
    catalog = Catalog({}, [], layout)
    for row, line in zip(rows, lines, strict=True):
        if len(row) != 3 or not row[0].strip():
            catalog.malformed.append(line)
            continue
        item, title, genres = (cell.strip() for cell in row)
        values = [f"genre:{g}" for g in genres.split("|") if g and g != NO_GENRES]
        year = YEAR.search(title)
        if year:
            values.append(f"year:{year.group(1)}")
        catalog.add(item, values)
    return catalog


def _is_ml100k_item(line: str) -> bool:
    cells = line.split("|")
    flags = cells[-len(ML100K_GENRES) :]
    return len(cells) == ML100K_FIELDS and all(f.strip() in ("0", "1") for f in flags)


def _ml100k_items(lines: list[str]) -> Catalog:
    catalog = Catalog({}, [], "movielens_100k")
    for line in lines:
        cells = [cell.strip() for cell in line.split("|")]
        if not _is_ml100k_item(line) or not cells[0]:
            catalog.malformed.append(line)
            continue
        flags = cells[5:]
        values = [
            f"genre:{name}"
            for name, flag in zip(ML100K_GENRES, flags, strict=True)
            if flag == "1" and name != "unknown"
        ]
        year = RELEASE_YEAR.search(cells[2]) or YEAR.search(cells[1])
        if year:
            values.append(f"year:{year.group(1)}")
        catalog.add(cells[0], values)
    return catalog


def _table(lines: list[str]) -> Catalog:
    head = lines[0].lstrip("\ufeff")
    delimiter = "\t" if head.count("\t") >= max(head.count(","), 1) else ","
    rows = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter))
    header = [h.strip() for h in rows[0]]
    if len(header) < 2:
        return Catalog({}, list(lines[1:]), "table")
    lowered = [h.lower() for h in header]
    id_at = next((lowered.index(c) for c in ID_COLUMNS if c in lowered), 0)
    catalog = Catalog({}, [], "table")
    for row, line in zip(rows[1:], lines[1:], strict=False):
        if len(row) != len(header) or not row[id_at].strip():
            catalog.malformed.append(line)
            continue
        values = []
        for n, (name, cell) in enumerate(zip(header, row, strict=True)):
            if n == id_at or _free_text(name):
                continue
            values.extend(
                f"{name}:{v.strip()}" for v in MULTI_VALUED.split(cell) if v.strip()
            )
        catalog.add(row[id_at].strip(), values)
    return catalog


def metadata_attributes(line: str) -> tuple[str, list[str]] | None:
    """(item id, attributes) of one metadata record, or None if unreadable."""
    record = _record(line)
    if record is None:
        return None
    item = record.get("business_id") or record.get("parent_asin") or record.get("asin")
    if not isinstance(item, str) or not item:
        return None
    values: list[str] = []
    brand = record.get("brand") or record.get("store")
    details = record.get("details")
    if not brand and isinstance(details, dict):
        brand = details.get("Brand")
    if isinstance(brand, str) and brand.strip():
        values.append(f"brand:{brand.strip()}")
    categories = record.get("categories", record.get("category"))
    if isinstance(categories, str):  # Yelp: "Restaurants, Pizza".
        names = categories.split(",")
    elif isinstance(categories, list):
        names = []
        for entry in categories:  # Amazon 2014: a list of category paths.
            names.extend(entry if isinstance(entry, list) else [entry])
    else:
        names = []
    for name in names:
        if isinstance(name, str) and name.strip():
            value = f"category:{name.strip()}"
            if value not in values:
                values.append(value)
    return item, values
