"""Builds the package with the wire code generated from the schema:
`flatc --python` (flatbuffers-compiler) writes trainwatch/wire/ from
../../schemas/metrics.fbs (or $TRAINWATCH_SCHEMA) into the build, so
`pip install ./hooks/python` needs flatc and the repository's schema."""
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithWire(build_py):
    def run(self):
        super().run()
        schema = os.environ.get("TRAINWATCH_SCHEMA") or os.path.join(
            HERE, "..", "..", "schemas", "metrics.fbs")
        if not os.path.exists(schema):
            raise SystemExit(f"trainwatch: schema {schema} not found (set "
                             "TRAINWATCH_SCHEMA)")
        flatc = shutil.which("flatc")
        if flatc is None:
            raise SystemExit("trainwatch: flatc not found (Debian package "
                             "flatbuffers-compiler)")
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([flatc, "--python", "-o", tmp, schema], check=True)
            dest = os.path.join(self.build_lib, "trainwatch", "wire")
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(os.path.join(tmp, "trainwatch", "wire"), dest)


setup(packages=["trainwatch"], cmdclass={"build_py": BuildWithWire})
