"""Build mamba_ssm's fused selective scan (float32 inputs, real A) on a GPU machine that has no wheel for it.

    python benchmarks/paper/build_mamba_scan.py SRC SITE     # then PYTHONPATH=SITE pytest -m gpu ...

SRC is a checkout of state-spaces/mamba (at least `csrc/selective_scan` and `mamba_ssm/{ops,utils}`; its commit is
read from SRC/COMMIT, or from git). SITE/mamba_ssm gets `ops/` and `utils/` and a one-line `__init__.py`, so that
importing `mamba_ssm.ops.selective_scan_interface` does not pull in Mamba-2/3 and their kernels. The package on PyPI is a
source distribution whose build compiles every dtype for every architecture (tens of minutes); the GPU check of
`tests/reference_models/test_mamba.py` needs the float32 path only, so this compiles the binding with its input-type
dispatch cut to float and weight-type dispatch cut to real float (the authors' sources otherwise untouched), and only
`selective_scan_fwd_fp32.cu` and `selective_scan_bwd_fp32_real.cu`, for this device's architecture, with the
authors' nvcc flags. Writes SITE/mamba_ssm and SITE/selective_scan_cuda*.so, and prints the build time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

NVCC_FLAGS = ["-O3", "-std=c++17", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__", "--expt-relaxed-constexpr",
              "--expt-extended-lambda", "--use_fast_math", "-lineinfo"]  # setup.py of state-spaces/mamba


def float_only_binding(text: str) -> str:
    """selective_scan.cpp with its two dispatch macros used by fwd/bwd reduced to their float branch."""
    for macro, kind in (("DISPATCH_ITYPE_FLOAT_AND_HALF_AND_BF16", "input"), ("DISPATCH_WTYPE_FLOAT_AND_COMPLEX", "weight")):
        pattern = re.compile(rf"#define {macro}\(.*?\n(?:.*\\\n)*.*\n")
        body = (f"#define {macro}(TYPE, NAME, ...) \\\n"
                f"    if (TYPE == at::ScalarType::Float) {{ using {kind}_t = float; __VA_ARGS__(); }} \\\n"
                f"    else {{ TORCH_CHECK(false, #NAME, \" built for float32 only (benchmarks/paper/build_mamba_scan.py)\"); }}\n")
        text, count = pattern.subn(body, text, count=1)
        if count != 1:
            raise SystemExit(f"macro {macro} not found in selective_scan.cpp: the sources changed")
    return text


def main(src: Path, site: Path) -> None:
    import torch
    from torch.utils.cpp_extension import load

    t0 = time.perf_counter()
    for part in ("ops", "utils"):
        shutil.copytree(src / "mamba_ssm" / part, site / "mamba_ssm" / part, dirs_exist_ok=True)
    (site / "mamba_ssm" / "__init__.py").write_text("# only ops/ and utils/ (benchmarks/paper/build_mamba_scan.py)\n")
    csrc = src / "csrc" / "selective_scan"
    work = site / "build"
    work.mkdir(exist_ok=True)
    binding = work / "selective_scan_float32.cpp"
    binding.write_text(float_only_binding((csrc / "selective_scan.cpp").read_text()))
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    load(name="selective_scan_cuda", sources=[str(binding), str(csrc / "selective_scan_fwd_fp32.cu"),
                                             str(csrc / "selective_scan_bwd_fp32_real.cu")],
         extra_include_paths=[str(csrc)], extra_cflags=["-O3", "-std=c++17"], extra_cuda_cflags=NVCC_FLAGS,
         build_directory=str(work), verbose=True)
    for so in work.glob("selective_scan_cuda*.so"):
        shutil.copy2(so, site / so.name)
    commit = (src / "COMMIT").read_text().strip() if (src / "COMMIT").exists() else subprocess.run(
        ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"built selective_scan_cuda for sm_{major}{minor} from state-spaces/mamba {commit or '(commit unknown)'} "
          f"in {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[2])
    main(Path(sys.argv[1]), Path(sys.argv[2]))
