"""The items file in each layout `genni.pipeline.preprocess.catalog` reads:
each item's attributes, every unreadable line kept and counted."""

import gzip
import json

import pytest

from genni.pipeline.preprocess.catalog import parse_catalog, read_catalog


def test_movielens_movies_csv_gives_genres_and_the_year():
    catalog = parse_catalog(
        "movieId,title,genres\n"
        "1,Toy Story (1995),Adventure|Animation|Children\n"
        '2,"American President, The (1995)",Comedy|Drama|Romance\n'
        "3,Untitled,(no genres listed)\n"
        "4,too,many,cells\n"
        ",No id (2000),Drama\n"
    )
    assert catalog.layout == "movielens"
    assert catalog.items == {
        "1": ["genre:Adventure", "genre:Animation", "genre:Children", "year:1995"],
        "2": ["genre:Comedy", "genre:Drama", "genre:Romance", "year:1995"],
        "3": [],
    }
    assert catalog.malformed == ["4,too,many,cells", ",No id (2000),Drama"]


def test_movielens_movies_dat_and_u_item_read_as_latin1(tmp_path):
    """ml-1m's movies.dat and ml-100k's u.item, as they come: no header, and
    Latin-1 titles (a UTF-8 decode alone refused the whole file)."""
    dat = tmp_path / "movies.dat"
    dat.write_bytes(
        "1::Toy Story (1995)::Animation|Children's|Comedy\n"
        "73::Misérables, Les (1995)::Drama|Musical\n"
        "9::no genres field\n".encode("latin-1")
    )
    catalog = read_catalog(str(dat))
    assert (catalog.layout, catalog.encoding) == ("movielens_dat", "latin-1")
    assert catalog.items == {
        "1": ["genre:Animation", "genre:Children's", "genre:Comedy", "year:1995"],
        "73": ["genre:Drama", "genre:Musical", "year:1995"],
    }
    assert catalog.malformed == ["9::no genres field"]

    def u_item(item, title, date, flags):
        genres = ["0"] * 19
        for g in flags:
            genres[g] = "1"
        return "|".join([item, title, date, "", "http://x", *genres])

    item = tmp_path / "u.item"
    item.write_bytes(
        "\n".join(
            [
                u_item("1", "Toy Story (1995)", "01-Jan-1995", [3, 4, 5]),
                u_item("267", "unknown", "", [0]),
                u_item("1300", "Café au lait (1993)", "", [8]),
                "5|too|short",
            ]
        ).encode("latin-1")
    )
    catalog = read_catalog(str(item))
    assert (catalog.layout, catalog.encoding) == ("movielens_100k", "latin-1")
    assert catalog.items == {
        "1": ["genre:Animation", "genre:Children's", "genre:Comedy", "year:1995"],
        "267": [],  # Only the "unknown" genre, and no date.
        "1300": ["genre:Drama", "year:1993"],  # The year from the title.
    }
    assert catalog.malformed == ["5|too|short"]


def test_a_recbole_item_file_gives_its_token_fields_not_its_title():
    catalog = parse_catalog(
        "item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq\n"
        "1\tToy Story\t1995\tAnimation Children's Comedy\n"
        "2\tGoldenEye\t\tAction\n"
        "3\tshort row\n"
    )
    assert catalog.layout == "recbole"
    assert catalog.items == {
        "1": [
            "release_year:1995",
            "class:Animation",
            "class:Children's",
            "class:Comedy",
        ],
        "2": ["class:Action"],
    }
    assert catalog.malformed == ["3\tshort row"]


def test_a_plain_csv_and_json_lines():
    table = parse_catalog(
        "sku,brand,tags,name\n"
        "a1,Acme,red|small,Red ball\n"
        "a2,,blue;large,\n"
        "a1,Acme,round,Red ball\n"
        "a3,Zed\n"
    )
    assert table.layout == "table"
    assert table.items == {
        "a1": ["brand:Acme", "tags:red", "tags:small", "tags:round"],
        "a2": ["tags:blue", "tags:large"],
    }
    assert table.malformed == ["a3,Zed"]
    keyed = parse_catalog("id\tgenre\nm1\tDrama|Crime\n")
    assert keyed.items == {"m1": ["genre:Drama", "genre:Crime"]}
    lines = parse_catalog(
        json.dumps({"item_id": "x", "genres": ["a", "b"], "year": 1999, "title": "T"})
        + "\n"
        + json.dumps({"id": 7, "brand": "Acme", "extra": None, "dims": {"w": 1}})
        + "\n{broken\n"
        + json.dumps({"no": "id"})
        + "\n"
    )
    assert lines.layout == "jsonl"
    assert lines.items == {
        "x": ["genres:a", "genres:b", "year:1999"],
        "7": ["brand:Acme"],
    }
    assert len(lines.malformed) == 2


def test_s3rec_and_metadata_layouts_as_before(tmp_path):
    s3rec = tmp_path / "item2attributes.json"
    s3rec.write_text(json.dumps({"1": [3, 4], "2": []}))
    assert read_catalog(str(s3rec)).items == {"1": [3, 4], "2": []}
    meta = tmp_path / "meta.json.gz"
    with gzip.open(meta, "wt") as f:
        f.write("{'asin': 'i0', 'brand': 'Acme', 'categories': [['Toys']]}\n{bad\n")
    catalog = read_catalog(str(meta))
    assert catalog.layout == "metadata"
    assert catalog.items == {"i0": ["brand:Acme", "category:Toys"]}
    assert catalog.malformed == ["{bad"]
    unreadable = tmp_path / "unreadable.txt"
    unreadable.write_text("just one column\nand another\n")
    with pytest.raises(ValueError, match=r"neither an S3-Rec.*1 unreadable"):
        read_catalog(str(unreadable))


def test_listed_items_join_the_vocabulary_in_beam_and_in_memory(tmp_path):
    """Every item of the items file is in the vocabulary, with or without
    events, after the log's items; Beam and in memory alike (the split by
    time; leave-one-out through Beam: test_preprocess_e2e, in memory:
    test_item_tower)."""
    from genni.components import schema
    from genni.pipeline.preprocess import inmemory, outputs
    from genni.pipeline.preprocess.config import PreprocessConfig
    from tests.conftest import review
    from tests.pipeline.test_preprocess_e2e import preprocess, read_lines, read_split

    day = 86400
    lines = [
        review(f"u{u}", f"i{(u + j) % 6}", j * day + u)
        for u in range(12)
        for j in range(8)
    ]
    lines += [
        review(f"u{u}", "late", 9 * day + u) for u in range(3)
    ]  # The test window.
    log = tmp_path / "log.json"
    log.write_text("\n".join(lines) + "\n")
    items = tmp_path / "items.csv"
    items.write_text(
        "item_id,genre\n"
        + "".join(f"i{i},g{i % 2}\n" for i in range(6))
        + "late,g1\nshelf,g0\n"
    )
    flags = dict(
        min_count=2, max_len=8, item_attributes=str(items), split="time", test_days=1.5
    )
    beam_out, mem_out = str(tmp_path / "beam"), str(tmp_path / "mem")
    args = [f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]
    assert preprocess(log, beam_out, *args) == 0
    inmemory.run(PreprocessConfig(str(log), mem_out, **flags))
    vocabulary = read_lines(f"{beam_out}/{schema.ITEMS_FILE}")
    assert vocabulary[-1] == "shelf"  # Listed, no event: after the log's.
    assert set(vocabulary) == {f"i{i}" for i in range(6)} | {"late", "shelf"}
    assert vocabulary == read_lines(f"{mem_out}/{schema.ITEMS_FILE}")
    stats = outputs.read_json(f"{beam_out}/{schema.STATS_FILE}")
    assert stats == outputs.read_json(f"{mem_out}/{schema.STATS_FILE}")
    for part in schema.SPLITS:
        assert read_split(beam_out, part, 8) == read_split(mem_out, part, 8)
