"""`genni train`, `evaluate`, `pretrain` and `tune`: the training driver, its
settings (`config`), the tf.data input (`data`) and run directories (`rundir`).
"""
