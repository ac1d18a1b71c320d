# lit configuration for loom's tests.
import os
import shutil
import subprocess
import lit.formats

config.name = "loom"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")

tools_dirs = [
    os.path.join(config.loom_obj_root, "tools"),
    os.path.join(config.loom_obj_root, "tools", "loom"),
    config.llvm_tools_dir,
]
config.environment["PATH"] = os.pathsep.join(tools_dirs + [config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%fixtures", os.path.join(config.loom_src_root, "test", "fixtures")))
config.substitutions.append(("%zoo", config.loom_zoo_dir))
config.substitutions.append(("%examples", os.path.join(config.loom_src_root, "examples")))

# "gpu": this machine has a usable NVIDIA GPU (tests of the no-GPU error
# paths are unsupported there).
if shutil.which("nvidia-smi") and subprocess.call(["nvidia-smi", "-L"], stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("gpu")
