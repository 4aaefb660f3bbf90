#!/usr/bin/env python3
"""Boot one Beam SDK worker as the SDK's container does: fetch the job's
staged files, install them, run the SDK harness.

For `python -m apache_beam.runners.worker.worker_pool_main
--container_executable docker/beam_worker_boot.py`: a worker pool whose
Python has Beam and genni's dependencies but not genni itself receives genni
by staging (`--setup_file ./setup.py` or `--extra_package dist/genni-*.whl`),
as Flink's, Spark's and Dataflow's workers do inside Beam's SDK container
(whose Go boot program this replaces where no container runs).

The pool calls it with the worker's id and the runner's endpoints. It asks
the provision service for the job's dependencies, fetches each from the
artifact service, installs the Python packages among them with pip (no
dependencies: they are the environment's), then runs the harness in this
interpreter.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

PACKAGES = (".tar.gz", ".whl", ".zip")


def staged_files(provision: str, artifacts: str, worker_id: str, into: str):
    """Fetch the job's staged files into `into`; returns their paths."""
    import grpc
    from apache_beam.portability.api import (
        beam_artifact_api_pb2_grpc,
        beam_provision_api_pb2,
        beam_provision_api_pb2_grpc,
    )
    from apache_beam.runners.portability import artifact_service

    metadata = [("worker_id", worker_id)]
    info = (
        beam_provision_api_pb2_grpc.ProvisionServiceStub(
            grpc.insecure_channel(provision)
        )
        .GetProvisionInfo(
            beam_provision_api_pb2.GetProvisionInfoRequest(), metadata=metadata
        )
        .info
    )
    retrieval = beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceStub(
        grpc.insecure_channel(artifacts)
    )

    class Retrieval:  # The service's calls, with this worker's id.
        def ResolveArtifactss(self, request):
            return retrieval.ResolveArtifacts(request, metadata=metadata)

        def GetArtifact(self, request):
            return retrieval.GetArtifact(request, metadata=metadata)

    def writer(name):
        path = os.path.join(into, name)
        return open(path, "wb"), path

    files = []
    for dep in artifact_service.resolve_as_files(
        Retrieval(), writer, info.dependencies
    ):
        from apache_beam.portability.api import beam_runner_api_pb2

        payload = beam_runner_api_pb2.ArtifactFilePayload.FromString(dep.type_payload)
        files.append(payload.path)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("id", "logging_endpoint", "artifact_endpoint"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--provision_endpoint", required=True)
    parser.add_argument("--control_endpoint", required=True)
    args, _ = parser.parse_known_args()
    into = tempfile.mkdtemp(prefix=f"beam-{args.id}-")
    files = staged_files(args.provision_endpoint, args.artifact_endpoint, args.id, into)
    packages = [f for f in files if f.endswith(PACKAGES)]
    print(
        f"worker {args.id}: staged {[os.path.basename(f) for f in files]}",
        file=sys.stderr,
        flush=True,
    )
    if packages:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                *packages,
            ],
            check=True,
        )
    from apache_beam.runners.worker.sdk_worker import SdkHarness

    SdkHarness(args.control_endpoint, worker_id=args.id).run()


if __name__ == "__main__":
    main()
