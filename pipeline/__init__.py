"""What runs, one sub-package per job.

- `preprocess`: review logs to TFRecords + vocabulary (Apache Beam).
- `training`: train, evaluate, pre-train and tune; run directories.
- `serving`: export to a SavedModel, the TF Serving-compatible server, a client.
- `loop`: the pipeline from logs to the served model (`run_pipeline`) and its
  replay over a timestamped log (`run_replay`), one function each.
- `cli`: the `genni` command: every flag, what is printed, the exit codes;
  nothing else imports it.

`atomic` (stage an output, then move it into place) is shared by the jobs;
`quiet` starts a process without TensorFlow's and Beam's start-up noise.

Importing never changes the process's environment; the CLI sets what it needs.
"""
