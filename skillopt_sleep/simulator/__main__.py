"""``python -m skillopt_sleep.simulator --persona FILE --port N [--api-key K] [--latency S]
[--jitter S] [--seed N]``.

Starts the deterministic simulator (not a model) on 127.0.0.1 and prints its URL on one
line (``http://127.0.0.1:PORT``) once it accepts connections; stops on SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from skillopt_sleep.simulator.server import Simulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m skillopt_sleep.simulator",
        description=" ".join(__doc__.split("\n\n")[1].split()),
    )
    parser.add_argument("--persona", default="demo", help="persona TOML file (default: demo)")
    parser.add_argument("--port", type=int, default=0, help="port (0 = ephemeral)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address only")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("SKILLOPT_SIM_API_KEY"),
        help="require this API key (default: none)",
    )
    parser.add_argument(
        "--latency", type=float, default=None, help="seconds each model call waits (persona's)"
    )
    parser.add_argument(
        "--jitter",
        type=float,
        default=None,
        help="up to this many seconds more, from a hash of --seed and the request (persona's)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the jitter (persona's)")
    args = parser.parse_args(argv)
    try:
        sim = Simulator(
            args.persona,
            api_key=args.api_key,
            host=args.host,
            port=args.port,
            latency=args.latency,
            jitter=args.jitter,
            seed=args.seed,
        )
    except (OSError, ValueError) as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        return 2

    def _stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    print(sim.url, flush=True)
    try:
        sim.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
