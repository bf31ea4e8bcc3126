"""Isaac Lab 3.x in its own Python 3.12 environment: kit-less Newton (MuJoCo-Warp) physics on the
CPU or a GPU; Isaac Sim PhysX where Isaac Sim and an RTX GPU exist (not verified here)."""

from __future__ import annotations

from gpuenv.backends.spec import Backend, Environment, Image, NativeTask

_ISAAC = "Isaac Lab's own robot, reward and sizes (not Gymnasium's model)"
_SUBSTITUTE = "; here with the substitute asset from the newton wheel (see gpuenv.backends.isaaclab.assets)"

BACKEND = Backend(
    name="isaaclab",
    adapter="gpuenv.backends.isaaclab.adapter",
    requires=("isaaclab", "isaaclab_tasks", "torch"),
    extra="isaaclab",
    # Isaac Lab's physics presets (parse_env_cfg overrides physics=<variant>).
    variants=("newton_mjwarp", "physx", "isaacsim_physx"),
    description="Isaac Lab 3.0 kit-less: Newton physics (MuJoCo-Warp), torch actions, on the GPU or the CPU",
    device="gpu",
    variant_notes={
        "newton_mjwarp": "Newton with the MuJoCo-Warp solver, kit-less (no Isaac Sim); runs on the CPU where there is no GPU",
        "physx": "PhysX: OvPhysX kit-less, Isaac Sim's PhysX where Kit is needed; NOT VERIFIED (needs a GPU: on a CPU it fails asking for pinned memory)",
        "isaacsim_physx": "Isaac Sim's PhysX through Kit; NOT VERIFIED (needs Isaac Sim and an RTX GPU)",
    },
    install_hint="`LOCAL=1 make bench-isaac` builds its Python 3.12 environment (about 8.5 GB) on first use",
    packages=("isaaclab", "newton", "warp-lang", "mujoco-warp", "mujoco", "torch"),
    library="isaaclab",
    tasks={
        "cartpole": NativeTask(
            "Isaac-Cartpole-Direct", 1 / 60, 2, 1 / 120, 300, (4,), "box", 1,
            _ISAAC + "; continuous force on the cart" + _SUBSTITUTE,
        ),
        "ant": NativeTask("Isaac-Ant", 1 / 60, 2, 1 / 120, 960, (60,), "box", 8, _ISAAC + _SUBSTITUTE),
        "humanoid": NativeTask(
            "Isaac-Humanoid", 1 / 60, 2, 1 / 120, 960, (87,), "box", 21,
            _ISAAC + "; needs Isaac Lab's own assets (ISAACSIM_ASSET_ROOT): the newton wheel has no substitute",
        ),
    },
    environment=Environment(python="3.12", lock="docker/locks/isaaclab.txt"),
    image=Image(
        "Isaac Lab 3.0 kit-less (Newton, no Isaac Sim) on Python 3.12, torch's CUDA 13 build; runs on the CPU too",
        ("isaaclab",),
        "13",
        "docker/isaaclab.Dockerfile",
        base_target=False,
        torch_cpu=False,
        python="3.12",
        platform="x86_64-manylinux_2_35",  # omniverseclient ships manylinux_2_35 wheels only
        build_gb=12,
    ),
    more_images=(
        Image(
            "Isaac Lab 2.3 on Isaac Sim 5.1 (NVIDIA's image), PhysX through Kit; NOT VERIFIED (needs an RTX GPU)",
            (),
            "12",
            "docker/isaaclab-isaacsim.Dockerfile",
            name="isaaclab-isaacsim",
            base_target=False,
            torch_cpu=False,
            # Isaac Sim's own Linux minimum (its system requirements page; not verified on a GPU here).
            driver_floor="535.129.03",
            # Isaac Sim's Python ships numpy 1.x (Isaac Lab 2.3 pins numpy<2) and psutil; its compiled
            # modules need that numpy, so gpuenv's lock leaves both alone.
            not_locked=("numpy", "psutil"),
            verified=False,
            suite="isaaclab-isaacsim",  # Isaac Lab 2.3 runs PhysX only (isaacsim_physx), at GPU sizes
        ),
    ),
    worker_env="gpuenv.backends.isaaclab.warp_cache:worker_env",
    aliases=("isaac",),
    suite="isaaclab",
)
