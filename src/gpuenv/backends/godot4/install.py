"""`python -m gpuenv.backends.godot4.install`: make the Godot 4 runtime where this user can, else say
how (gpuenv.backends.godot4.runtime.install); never fails, as `make install` runs it everywhere."""

from gpuenv.backends.godot4.runtime import install

if __name__ == "__main__":
    print(install())
