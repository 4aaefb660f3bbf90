"""What runs, one sub-package per job.

- `preprocess`: review logs to TFRecords + vocabulary (Apache Beam).
- `training`: train, evaluate, pre-train and tune; run directories.
- `serving`: export to a SavedModel, the TF Serving-compatible server, a client.
- `reproduce`: the paper's tables and figures from archived runs.
- `cli`: the `genni` command; every flag lives there.

`atomic` (stage an output, then move it into place) is shared by the jobs.

Importing never changes the process's environment; the CLI sets what it needs.
"""
