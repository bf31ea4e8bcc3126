"""The Docker image matrix, derived from the backends' declarations (`Backend.image`).

Each backend declares its image (Dockerfile, the pyproject extras its lock file covers, the CUDA
major version); this module derives the rest: the lock path, the tag and the minimum NVIDIA driver
that goes with the CUDA version. The bake file
(docker/docker-bake.json) is generated from this module (`gpuenv images --bake`; a test keeps the
committed file in sync), `gpuenv doctor` reads the same driver table, and library versions for labels
and the README come from the hash-locked lock files.
"""

from gpuenv.images.base import base_image, build_local_base, build_local_python_base
from gpuenv.images.build import Built, build, build_commands
from gpuenv.images.catalogue import (
    BASE_TAG,
    CUDA_MIN_DRIVER,
    LOCAL_BASE,
    LOCKS,
    ROOT,
    TORCH_CPU,
    TORCH_CUDA,
    Image,
    aliases,
    bake,
    bake_text,
    base_of,
    get_image,
    image_labels,
    images,
    locked_versions,
    pinned_base,
    python_base_of,
    python_bases,
)
from gpuenv.images.engine import build_client, docker_run_command, docker_status, image_size, is_built, local_image_id, runnable_here
from gpuenv.images.locks import VERSION_LOCKS, lock_command, version_lock, write_locks

__all__ = ["BASE_TAG", "CUDA_MIN_DRIVER", "LOCAL_BASE", "LOCKS", "ROOT", "TORCH_CPU", "TORCH_CUDA", "VERSION_LOCKS", "Built", "Image",
           "aliases", "bake", "bake_text", "base_image", "base_of", "build", "build_client", "build_commands", "build_local_base",
           "build_local_python_base", "docker_run_command", "docker_status", "get_image", "image_labels", "image_size", "images",
           "is_built", "local_image_id", "lock_command", "locked_versions", "pinned_base", "python_base_of", "python_bases",
           "runnable_here", "version_lock", "write_locks"]
