"""``python -m skillopt_sleep.simulator --persona FILE --port N [--api-key K]``.

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
    args = parser.parse_args(argv)
    try:
        sim = Simulator(args.persona, api_key=args.api_key, host=args.host, port=args.port)
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
