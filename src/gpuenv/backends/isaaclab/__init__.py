"""Isaac Lab 2.3 on Isaac Sim 5.1: GPU PhysX envs stepped with torch actions (not verified here)."""

from __future__ import annotations

from gpuenv.backends.spec import Backend, Image, NativeTask

_ISAAC = "Isaac Lab's own USD robot and reward (not Gymnasium's model); sizes from its env cfg, not verified here"

BACKEND = Backend(
    name="isaaclab",
    adapter="gpuenv.backends.isaaclab.adapter",
    requires=("isaaclab", "isaaclab_tasks", "isaacsim"),
    extra="isaaclab",
    variants=("physx",),
    description="Isaac Lab 2.3 on Isaac Sim 5.1: GPU PhysX envs stepped with torch actions (not verified here)",
    device="gpu",
    variant_notes={"physx": "PhysX GPU pipeline, headless app, torch.cuda.synchronize per value"},
    install_hint="it needs Isaac Sim and an RTX-class GPU: use the gpuenv/isaaclab image (make bench-isaac)",
    packages=("isaaclab", "isaacsim", "torch"),
    library="isaaclab",
    tasks={
        "cartpole": NativeTask(
            "Isaac-Cartpole-Direct-v0", 1 / 60, 2, 1 / 120, 300, (4,), "box", 1, _ISAAC + "; continuous force"
        ),
        "ant": NativeTask("Isaac-Ant-v0", 1 / 60, 2, 1 / 120, 960, (60,), "box", 8, _ISAAC),
        "humanoid": NativeTask("Isaac-Humanoid-v0", 1 / 60, 2, 1 / 120, 960, (87,), "box", 21, _ISAAC),
    },
    image=Image(
        "Isaac Lab 2.3 on Isaac Sim 5.1 (NVIDIA's image), gpuenv on top",
        (),
        "12",
        "docker/isaaclab.Dockerfile",
        base_target=False,
        torch_cpu=False,
        # Isaac Sim's own Linux minimum (its system requirements page; not verified on a GPU here).
        driver_floor="535.129.03",
        # Isaac Sim's Python ships numpy 1.x (Isaac Lab 2.3 pins numpy<2) and psutil; its compiled
        # modules need that numpy, so gpuenv's lock leaves both alone.
        not_locked=("numpy", "psutil"),
    ),
    aliases=("isaac",),
)
