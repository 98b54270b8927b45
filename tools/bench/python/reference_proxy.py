"""Runs a copy of vLLM's reference EPD proxy (disagg_epd_proxy.py) for Triad's benchmarks and EPD check.

The proxy's code is not part of the Triad repository: the caller passes the path of a copy. Two modes:

  shipped  the script's own __main__ with its own command line (runpy), logging as the script sets it up;
  quiet    the script loaded as a module, its `proxy` logger at WARNING, uvicorn without an access log, and
           the app.state fields its static __main__ would set, set here.

Stand-ins, installed before the script is loaded and only where the real package is missing (Debian 12 has
neither msgspec nor pydantic 2):

  msgspec  a module whose json.encode/json.decode use ujson when installed, else the standard json module. The
           real msgspec is faster, so a proxy running on the stand-in is slower than the same proxy on msgspec.
  pydantic.model_validator  a no-op decorator factory. It only validates /instances bodies in the newest proxy's
           dynamic-registration mode, which the benchmark does not use.

The process asks the kernel to kill it when its parent dies (PR_SET_PDEATHSIG), so a killed benchmark leaves no
proxy behind.
"""

import argparse
import ctypes
import importlib.util
import itertools
import logging
import runpy
import signal
import sys
import types


def die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)


def msgspec_standin() -> types.ModuleType:
    try:
        import ujson as fast

        def dumps(obj):
            return fast.dumps(obj, ensure_ascii=False, escape_forward_slashes=False)

        loads = fast.loads
    except ImportError:
        import json as fast

        def dumps(obj):
            return fast.dumps(obj, separators=(",", ":"), ensure_ascii=False)

        loads = fast.loads

    json_module = types.ModuleType("msgspec.json")
    json_module.encode = lambda obj: dumps(obj).encode("utf-8")
    json_module.decode = lambda data: loads(data if isinstance(data, str) else bytes(data).decode("utf-8"))
    package = types.ModuleType("msgspec")
    package.json = json_module
    package.__triad_standin__ = True
    return package


def install_standins() -> list[str]:
    """Installs what is missing; returns the names of the stand-ins in use."""
    used = []
    try:
        import msgspec  # noqa: F401
    except ImportError:
        standin = msgspec_standin()
        sys.modules["msgspec"] = standin
        sys.modules["msgspec.json"] = standin.json
        used.append("msgspec")
    try:
        import pydantic
    except ImportError:
        pydantic = None
    if pydantic is not None and not hasattr(pydantic, "model_validator"):
        pydantic.model_validator = lambda *args, **kwargs: (lambda fn: fn)
        used.append("pydantic.model_validator")
    return used


def main() -> None:
    die_with_parent()
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--mode", choices=["shipped", "quiet"], default="quiet")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--encode", required=True, help="comma-separated encoder URLs")
    parser.add_argument("--prefill", default="", help="comma-separated prefill URLs; empty for E->PD")
    parser.add_argument("--decode", required=True, help="comma-separated decode (or PD) URLs")
    parser.add_argument("--ec-consumer-zmq-addrs", default="")
    parser.add_argument("--ec-consumer-dp-size", type=int, default=1)
    args = parser.parse_args()
    used = install_standins()
    print(f"reference proxy stand-ins: {', '.join(used) or 'none'}", file=sys.stderr, flush=True)

    if args.mode == "shipped":
        argv = [args.script, "--host", "127.0.0.1", "--port", str(args.port), "--encode-servers-urls", args.encode,
                "--prefill-servers-urls", args.prefill or "none", "--decode-servers-urls", args.decode]
        if args.ec_consumer_zmq_addrs:
            argv += ["--ec-consumer-zmq-addrs", args.ec_consumer_zmq_addrs, "--ec-consumer-dp-size", str(args.ec_consumer_dp_size)]
        sys.argv = argv
        runpy.run_path(args.script, run_name="__main__")
        return

    import uvicorn

    spec = importlib.util.spec_from_file_location("disagg_epd_proxy", args.script)
    proxy = importlib.util.module_from_spec(spec)
    # Dataclasses in a module with postponed annotations look the module up in sys.modules.
    sys.modules[spec.name] = proxy
    spec.loader.exec_module(proxy)
    logging.getLogger("proxy").setLevel(logging.WARNING)
    split = lambda text: [u.strip() for u in text.split(",") if u.strip()]  # noqa: E731
    state = proxy.app.state
    state.e_urls, state.p_urls, state.d_urls = split(args.encode), split(args.prefill), split(args.decode)
    # Read by the newest proxy's static handler; harmless to older ones.
    state.d_ec_urls = split(args.ec_consumer_zmq_addrs)
    state.ec_consumer_dp_size = args.ec_consumer_dp_size
    state.replica_counter = itertools.count()
    uvicorn.run(proxy.app, host="127.0.0.1", port=args.port, log_level="warning", loop="uvloop", access_log=False)


if __name__ == "__main__":
    main()
