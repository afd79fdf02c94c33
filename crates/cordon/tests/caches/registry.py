"""A package registry stand-in on 127.0.0.1 for tests/caches.rs: one tiny package each for
npm (a packument and its tarball), pip (a simple index and a wheel), cargo (a sparse index
and its .crate) and go (a module proxy), served from a scratch directory as their tools fetch
them.

    python3 registry.py DIR HOST

Prints the port it listens on, then serves until killed. Download URLs name HOST:PORT, the
name the sandboxed command is given for 127.0.0.1.
"""

import base64
import hashlib
import http.server
import io
import json
import os
import sys
import tarfile
import zipfile


def tar_gz(files):
    """A gzipped tar of {path: text}, with fixed times so the bytes are the same each time."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def npm(root, base):
    tgz = tar_gz({
        "package/package.json": json.dumps({"name": "tiny", "version": "1.0.0", "main": "index.js"}),
        "package/index.js": "module.exports = 'tiny from the stand-in';\n",
    })
    write(f"{root}/tarballs/tiny-1.0.0.tgz", tgz)
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    write(f"{root}/tiny", json.dumps({
        "name": "tiny",
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {
            "name": "tiny",
            "version": "1.0.0",
            "main": "index.js",
            "dist": {
                "tarball": f"{base}/tarballs/tiny-1.0.0.tgz",
                "shasum": hashlib.sha1(tgz).hexdigest(),
                "integrity": integrity,
            },
        }},
    }))


def pip(root, base):
    files = {
        "tinypy/__init__.py": "WHO = 'tinypy from the stand-in'\n",
        "tinypy-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypy\nVersion: 1.0\n",
        "tinypy-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: cordon-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append("tinypy-1.0.dist-info/RECORD,,")
    files["tinypy-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as whl:
        for path, text in files.items():
            whl.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), text)
    wheel = out.getvalue()
    name = "tinypy-1.0-py3-none-any.whl"
    write(f"{root}/files/{name}", wheel)
    sha = hashlib.sha256(wheel).hexdigest()
    write(f"{root}/simple/tinypy/index.html",
          f'<html><body><a href="{base}/files/{name}#sha256={sha}">{name}</a></body></html>\n')


def cargo(root, base):
    crate = tar_gz({
        "tiny-0.1.0/Cargo.toml": '[package]\nname = "tiny"\nversion = "0.1.0"\nedition = "2021"\n',
        "tiny-0.1.0/src/lib.rs": 'pub fn who() -> &\'static str { "tiny from the stand-in" }\n',
    })
    write(f"{root}/dl/tiny/0.1.0/download", crate)
    write(f"{root}/index/config.json", json.dumps({"dl": f"{base}/dl/{{crate}}/{{version}}/download"}))
    write(f"{root}/index/ti/ny/tiny", json.dumps({
        "name": "tiny", "vers": "0.1.0", "deps": [], "features": {},
        "cksum": hashlib.sha256(crate).hexdigest(), "yanked": False,
    }) + "\n")


def go(root):
    at = "tiny.test/tiny@v1.0.0"
    mod = "module tiny.test/tiny\n\ngo 1.19\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(zipfile.ZipInfo(f"{at}/go.mod", date_time=(1980, 1, 1, 0, 0, 0)), mod)
        z.writestr(zipfile.ZipInfo(f"{at}/tiny.go", date_time=(1980, 1, 1, 0, 0, 0)),
                   'package tiny\n\nfunc Who() string { return "tiny from the stand-in" }\n')
    base = f"{root}/tiny.test/tiny/@v"
    write(f"{base}/list", "v1.0.0\n")
    write(f"{base}/v1.0.0.info", json.dumps({"Version": "v1.0.0", "Time": "2020-01-01T00:00:00Z"}))
    write(f"{base}/v1.0.0.mod", mod)
    write(f"{base}/v1.0.0.zip", out.getvalue())


def main():
    root, host = sys.argv[1], sys.argv[2]

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def log_message(self, *a):
            pass

        def end_headers(self):
            # As the real registries say: pip keeps only what the server lets it cache.
            self.send_header("Cache-Control", "max-age=600")
            super().end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    base = f"http://{host}:{server.server_address[1]}"
    npm(root, base)
    pip(root, base)
    cargo(root, base)
    go(root)
    print(server.server_address[1], flush=True)
    server.serve_forever()


main()
