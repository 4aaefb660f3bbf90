"""`genni export`, `serve` and `recommend`: the SavedModel (raw ids in, top-K
out), its warm-up requests, a TF Serving-compatible REST/gRPC server, a client.
"""
