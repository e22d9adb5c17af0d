"""Builds the glimpse package; the gRPC stubs are generated here from the repository's proto/.

The stubs are not committed: build_py runs protoc with grpc_python_plugin (Debian 12:
protobuf-compiler and protobuf-compiler-grpc) on ../../proto, so the package always matches the
API of the server built from the same tree. PROTOC and GRPC_PYTHON_PLUGIN override the tools,
GLIMPSE_PROTO_DIR the proto folder.
"""
import os
import pathlib
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
API_PROTO = "glimpse/v1/image_analytics.proto"
HEALTH_PROTO = "grpc/health/v1/health.proto"


def _tool(env, name, package):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise SystemExit(f"glimpse: {name} not found (Debian 12: apt-get install {package}; "
                         f"or set {env})")
    return path


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        proto_dir = pathlib.Path(os.environ.get("GLIMPSE_PROTO_DIR", HERE.parent.parent / "proto"))
        if not (proto_dir / API_PROTO).is_file():
            raise SystemExit(f"glimpse: {proto_dir / API_PROTO} not found: build from the "
                             "repository (client/python inside it) or set GLIMPSE_PROTO_DIR")
        protoc = _tool("PROTOC", "protoc", "protobuf-compiler")
        plugin = _tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin", "protobuf-compiler-grpc")
        out = pathlib.Path(self.build_lib)
        # The API's stubs land in glimpse/v1/ (the proto's own path), so their imports
        # ("from glimpse.v1 import ...") resolve inside this package.
        subprocess.run([protoc, f"-I{proto_dir}", f"--python_out={out}", f"--pyi_out={out}",
                        f"--grpc_python_out={out}", f"--plugin=protoc-gen-grpc_python={plugin}",
                        API_PROTO], check=True)
        (out / "glimpse" / "v1" / "__init__.py").write_text("")
        # The health service's package is grpc.health.v1, whose generated modules would sit in
        # (and shadow) the grpc package; ship its descriptor instead and build the two message
        # classes from it at run time in a private pool (glimpse/_health.py).
        subprocess.run([protoc, f"-I{proto_dir}",
                        f"--descriptor_set_out={out / 'glimpse' / 'health.desc'}", HEALTH_PROTO],
                       check=True)


setup(cmdclass={"build_py": BuildPyWithStubs})
