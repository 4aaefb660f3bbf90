"""The recommenders: SASRec (`sasrec`), the TFRS retrieval model (`retrieval`)
that trains it with a negative sampler, and S3-Rec pre-training (`s3rec`).

Imports only `genni.components`.
"""
