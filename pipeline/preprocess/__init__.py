"""`genni preprocess`: review logs to TFRecords + vocabulary.

`beam` holds the Apache Beam graph, `inmemory` the single-process reference with
the same outputs; `formats` reads the input formats, `sequences` turns a user's
items into examples, `outputs` writes (any Beam file system, committed through
`genni.pipeline.atomic`), `synthetic` makes demo logs.
"""
