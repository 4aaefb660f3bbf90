"""`genni preprocess`: review logs to TFRecords + vocabulary.

`beam` holds the Apache Beam graph, `inmemory` the single-process reference with
the same outputs; `formats` reads the input formats, `sequences` turns a user's
items into examples, `outputs` writes atomically, `synthetic` makes demo logs.
"""
