#!/usr/bin/env python3
"""A training log to its run record from Python, through libtplua and ctypes: the record
`tplua extract LOG --json OUT` writes, for Python pipelines (no Lua, no subprocess).

    python3 examples/embed/extract.py LOG [FLAG...]  > record.json
    python3 examples/embed/extract.py --lib /opt/tplua/lib/libtplua.so.0 LOG --platform nvd

FLAGs are those of `tplua extract` (--platform, --gpu, --model, --run-id, ...). Without --lib,
libtplua.so.0 is found as the dynamic linker finds it (LD_LIBRARY_PATH, the system's paths).
"""
import ctypes
import json
import sys

TPLUA_OK = 0


class Tplua:
    """One engine (one per thread): a log to its record, as a dict or as JSON text."""

    def __init__(self, lib="libtplua.so.0"):
        self.lib = ctypes.CDLL(lib)
        self.lib.tplua_new.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        self.lib.tplua_close.argtypes = [ctypes.c_void_p]
        self.lib.tplua_errmsg.argtypes = [ctypes.c_void_p]
        self.lib.tplua_errmsg.restype = ctypes.c_char_p
        self.lib.tplua_strerror.restype = ctypes.c_char_p
        # char ** for the JSON: a c_void_p keeps the pointer, so that tplua_free can free it.
        self.lib.tplua_extract.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                           ctypes.POINTER(ctypes.c_char_p),
                                           ctypes.POINTER(ctypes.c_void_p)]
        self.lib.tplua_free.argtypes = [ctypes.c_void_p]
        self.engine = ctypes.c_void_p()
        code = self.lib.tplua_new(ctypes.byref(self.engine), None)
        if code != TPLUA_OK:
            raise RuntimeError("tplua_new: " + self.lib.tplua_strerror(code).decode())

    def close(self):
        if self.engine:
            self.lib.tplua_close(self.engine)
            self.engine = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def extract_json(self, log, flags=()):
        """The run record of `log` as JSON text; raises RuntimeError with tplua's message."""
        argv = (ctypes.c_char_p * (len(flags) + 1))(*[f.encode() for f in flags], None)
        out = ctypes.c_void_p()
        code = self.lib.tplua_extract(self.engine, log.encode(), argv, ctypes.byref(out))
        if code != TPLUA_OK:
            msg = self.lib.tplua_errmsg(self.engine).decode(errors="replace")
            raise RuntimeError("%s (%s)" % (msg, self.lib.tplua_strerror(code).decode()))
        try:
            return ctypes.string_at(out).decode()
        finally:
            self.lib.tplua_free(out)

    def extract(self, log, flags=()):
        """The run record of `log` as a dict."""
        return json.loads(self.extract_json(log, flags))


def main(argv):
    lib = "libtplua.so.0"
    if len(argv) > 2 and argv[1] == "--lib":
        lib, argv = argv[2], argv[:1] + argv[3:]
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    with Tplua(lib) as tp:
        try:
            text = tp.extract_json(argv[1], argv[2:])
        except RuntimeError as err:
            sys.stderr.write("extract.py: %s\n" % err)
            return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
