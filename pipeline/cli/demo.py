"""The serving part of `make demo`: start the endpoint, ask it over REST and
gRPC for one user's next items, and stop it.

    python -m genni.pipeline.cli.demo \
        --model-base-path demo_out/models --data demo_out/data
"""

from __future__ import annotations

import argparse
import os
import sys

from genni.components import schema
from genni.pipeline import quiet
from genni.pipeline.cli.main import set_process_environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-base-path", required=True)
    parser.add_argument("--data", required=True, help="Dataset, to pick a user.")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    set_process_environment()
    quiet.configure(args.verbose)
    if not args.verbose:
        quiet.start_quietly()
    from genni.pipeline.serving import client
    from genni.pipeline.serving import server as serving

    with open(os.path.join(args.data, schema.SEQUENCES_FILE)) as f:
        user, items = f.readline().rstrip("\n").split("\t")
    history = items.split()[:-1]  # Hold out the last item, as the test split does.
    server = serving.Server(args.model_base_path, rest_port=0, grpc_port=0).start()
    try:
        url = f"http://127.0.0.1:{server.rest_port}"
        print(f"Endpoint up: REST {url}, gRPC 127.0.0.1:{server.grpc_port}")
        print(
            f"User {user}, history {' '.join(history[-5:])} (last 5 of {len(history)})"
        )
        print(f"Held-out next item: {items.split()[-1]}")
        rest_ids, _ = client.recommend_rest(url, "genni", history)
        grpc_ids, _ = client.recommend_grpc(
            f"127.0.0.1:{server.grpc_port}", "genni", history
        )
        print("REST top-10: " + " ".join(rest_ids))
        print("gRPC top-10: " + " ".join(grpc_ids))
        if rest_ids != grpc_ids:
            print("REST and gRPC disagree", file=sys.stderr)
            return 1
    finally:
        server.stop()
        print("Endpoint stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
