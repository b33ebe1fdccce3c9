"""Fetch the jars Spark needs to write s3a:// in the tests, from PyPI (Maven is not reachable here).

    .venv/bin/python scripts/fetch_s3a_jars.py [TARGET_DIR]     # default: <venv>/s3a-jars

pyspark does not bundle hadoop-aws. The sagemaker-pyspark sdist on PyPI ships hadoop-aws 3.3.1
and the AWS SDK v1 bundle it was built against; with a few numeric settings (docs/operations.md, "Journal
on S3") they run on pyspark 4.x's Hadoop 3.5 client well enough for the tests' s3a:// reads and
writes against a moto server. Production clusters should use the hadoop-aws matching their
Hadoop instead. Idempotent; exits 0 with a note when PyPI cannot be reached (the s3a test skips).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "sagemaker-pyspark==1.4.5"
JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")


def main() -> int:
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(sys.prefix, "s3a-jars")
    if all(os.path.isfile(os.path.join(target, jar)) for jar in JARS):
        return 0
    os.makedirs(target, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        fetched = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                PACKAGE,
                "-d",
                folder,
            ]
        )
        archives = [name for name in os.listdir(folder) if name.endswith(".tar.gz")]
        if fetched.returncode != 0 or not archives:
            print(f"fetch_s3a_jars: could not download {PACKAGE}; the s3a:// test will be skipped", file=sys.stderr)
            return 0
        with tarfile.open(os.path.join(folder, archives[0])) as archive:
            for member in archive.getmembers():
                name = os.path.basename(member.name)
                if name in JARS:
                    source = archive.extractfile(member)
                    assert source is not None
                    partial = os.path.join(target, name + ".part")
                    with open(partial, "wb") as handle:
                        handle.write(source.read())
                    os.replace(partial, os.path.join(target, name))
    print(f"fetch_s3a_jars: {', '.join(JARS)} in {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
