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
