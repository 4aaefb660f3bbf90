"""The recommenders: the sequence encoders (`encoders`: SASRec and the
filter-mixing encoders, one registry), the TFRS retrieval model (`retrieval`)
that trains them with a negative sampler, and S3-Rec pre-training (`s3rec`).

Imports only `genni.components`.
"""
