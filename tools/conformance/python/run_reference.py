"""Runs a copy of an upstream reference router (a disaggregation proxy) as shipped, for Triad's conformance check.

    run_reference.py SCRIPT [the script's own arguments...]

The script is not part of the Triad repository: the caller passes the path of a local copy. Before the script is
loaded this installs stand-ins for modules the references import that Debian 12 does not package, only where the
real module is missing:

  orjson    (SGLang mini_lb; FastAPI's ORJSONResponse) loads/dumps over the standard json module; dumps returns
            bytes and accepts (and ignores) an `option` argument, as orjson does.
  msgspec   (vLLM's newest EPD proxy) json.encode/json.decode over the standard json module.
  sglang.srt.utils.maybe_wrap_ipv6_address, sglang.srt.disaggregation.utils.PDRegistryRequest  (mini_lb) the
            bracket-wrapping helper and the /register body model (mode, registry_url, bootstrap_port).
  FastAPI(lifespan=...)  FastAPI before 0.93 (Debian 12 has 0.92) takes the argument and ignores it, so a proxy
            that builds its clients in a lifespan (the NIXL toy proxy, vLLM's Mooncake proxy) would start without
            them; the stand-in hands it to Starlette's router, which runs it (Starlette 0.26 supports it).

The process asks the kernel to kill it when its parent dies (PR_SET_PDEATHSIG), so an interrupted check leaves
no proxy behind.
"""

import ctypes
import ipaddress
import json
import runpy
import signal
import sys
import types


def die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)


def missing(name: str) -> bool:
    try:
        __import__(name)
        return False
    except ImportError:
        return True


def orjson_standin() -> types.ModuleType:
    module = types.ModuleType("orjson")

    def dumps(obj, default=None, option=None):
        return json.dumps(obj, default=default, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def loads(data):
        return json.loads(data if isinstance(data, str) else bytes(data).decode("utf-8"))

    module.dumps = dumps
    module.loads = loads
    module.JSONDecodeError = json.JSONDecodeError
    for i, flag in enumerate(["OPT_NON_STR_KEYS", "OPT_SERIALIZE_NUMPY", "OPT_INDENT_2", "OPT_SORT_KEYS"]):
        setattr(module, flag, 1 << i)
    return module


def msgspec_standin() -> types.ModuleType:
    json_module = types.ModuleType("msgspec.json")
    json_module.encode = lambda obj: json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    json_module.decode = lambda data: json.loads(data if isinstance(data, str) else bytes(data).decode("utf-8"))
    package = types.ModuleType("msgspec")
    package.json = json_module
    return package


def sglang_standins() -> dict:
    from typing import Optional

    from pydantic import BaseModel

    def maybe_wrap_ipv6_address(address: str) -> str:
        try:
            ipaddress.IPv6Address(address)
            return f"[{address}]"
        except ValueError:
            return address

    class PDRegistryRequest(BaseModel):
        mode: str
        registry_url: str
        bootstrap_port: Optional[int] = None

    modules = {name: types.ModuleType(name) for name in
               ["sglang", "sglang.srt", "sglang.srt.utils", "sglang.srt.disaggregation", "sglang.srt.disaggregation.utils"]}
    modules["sglang.srt.utils"].maybe_wrap_ipv6_address = maybe_wrap_ipv6_address
    modules["sglang.srt.disaggregation.utils"].PDRegistryRequest = PDRegistryRequest
    return modules


def fastapi_lifespan_standin() -> bool:
    import inspect

    import fastapi

    if "lifespan" in inspect.signature(fastapi.FastAPI.__init__).parameters:
        return False
    original = fastapi.FastAPI.__init__

    def init(self, *args, lifespan=None, **kwargs):
        original(self, *args, **kwargs)
        if lifespan is not None:
            self.router.lifespan_context = lifespan

    fastapi.FastAPI.__init__ = init
    return True


def install_standins() -> list:
    used = []
    # orjson first: fastapi.responses binds it once, when first imported (the FastAPI stand-in imports it).
    if missing("orjson"):
        sys.modules["orjson"] = orjson_standin()
        used.append("orjson")
    if fastapi_lifespan_standin():
        used.append("FastAPI(lifespan=...)")
    if missing("msgspec"):
        standin = msgspec_standin()
        sys.modules["msgspec"] = standin
        sys.modules["msgspec.json"] = standin.json
        used.append("msgspec")
    if missing("sglang"):
        sys.modules.update(sglang_standins())
        used.append("sglang.srt utils")
    return used


def main() -> None:
    die_with_parent()
    if len(sys.argv) < 2:
        sys.exit("usage: run_reference.py SCRIPT [ARGS...]")
    script = sys.argv[1]
    used = install_standins()
    print(f"reference stand-ins: {', '.join(used) or 'none'}", file=sys.stderr, flush=True)
    sys.argv = [script, *sys.argv[2:]]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
