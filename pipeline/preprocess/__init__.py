"""`genni preprocess`: review logs to TFRecords + vocabulary.

`beam` holds the Apache Beam graph, `inmemory` the single-process reference with
the same outputs; `formats` reads the input formats, `sequences` turns a user's
items into examples, `outputs` writes (any Beam file system), `atomic` stages a
local output and moves it into place (also used by training and export),
`synthetic` makes demo logs.
"""
