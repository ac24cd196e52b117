#!/usr/bin/env python3
#===- embed_test.py - examples/embed against a fresh install prefix -------===#
#
# usage: embed_test.py --source-dir SRC --build-dir BUILD --cmake CMAKE
#                      --generator GEN --mpirun MPIRUN --model M.onnx
#                      --input-shape NAME=D0,D1 [--keep]
#
#  1. `cmake --install BUILD --prefix STAGE` into a fresh temporary STAGE,
#     then moved to P (the install is relocatable); the installed package
#     files and the compiler's link line name no path of the source tree,
#     the build tree, STAGE or P.
#  2. examples/embed, copied out of the source tree, configured and built
#     with only P on CMAKE_PREFIX_PATH, in an environment with nothing of
#     the project in it (no HPC_* variable, no LD_LIBRARY_PATH, PATH without
#     the trees); find_package must take P's package, and no generated
#     build file or command names the source or build tree.
#  3. embed-c and embed-cpp compile the model for mesh dp=2, P/bin/hpc-opt
#     the single-rank binary, each linked through a logging linker driver
#     (HPC_LINKER): every link names P's libhpcrt.a and nothing of the trees.
#  4. The single-rank binary runs on a random input; each dp=2 executable
#     runs under `mpirun -n 2` on the same input, and every output agrees
#     with the single rank's (rtol 1e-5, atol 1e-6; the max differences are
#     printed either way).
#  5. Without P/lib/hpc-opt/hpcrt-link.txt, P/bin/hpc-opt fails to link
#     with one line naming that file, and exit status 1.
#
# The temporary directories are removed at the end unless --keep.
#
#===-----------------------------------------------------------------------===#

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

RTOL = 1e-5
ATOL = 1e-6


class Failure(Exception):
    pass


def run(cmd, env, cwd=None, what=None):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Failure(f"{what or cmd[0]} failed (exit {p.returncode}): "
                      f"{' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def clean_env(trees, tmp):
    """The environment of a user who has only the install prefix: the
    system's PATH entries (none inside the project's trees), no HPC_*
    override, no library or CMake search path."""
    path = [d for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if d and not any(os.path.realpath(d).startswith(t) for t in trees)]
    env = {"PATH": os.pathsep.join(path), "HOME": tmp, "TMPDIR": tmp, "LANG": "C"}
    return env


def check_no_paths(files, forbidden, what):
    for f in files:
        with open(f, errors="replace") as fh:
            text = fh.read()
        for name, path in forbidden.items():
            if path in text:
                raise Failure(f"{what} {f} names the {name} ({path})")


def compare(compare_npy, reference_dir, dirs):
    """Each of `dirs` holds the single-rank run's outputs, equal within
    RTOL/ATOL (scripts/compare_npy.py, which prints the differences)."""
    names = sorted(os.listdir(reference_dir))
    if not names:
        raise Failure(f"the single-rank binary wrote no output in {reference_dir}")
    for name in names:
        if not np.all(np.isfinite(np.load(os.path.join(reference_dir, name)))):
            raise Failure(f"{reference_dir}/{name} is not finite")
    for d in dirs:
        if sorted(os.listdir(d)) != names:
            raise Failure(f"{d} holds {sorted(os.listdir(d))}, the single rank {names}")
        done = subprocess.run([sys.executable, compare_npy, reference_dir, d,
                               "--rtol", str(RTOL), "--atol", str(ATOL)])
        if done.returncode != 0:
            raise Failure(f"{d} differs from the single-rank output")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--cmake", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input-shape", required=True, help="NAME=D0,D1 (one input)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    a = ap.parse_args()

    src = os.path.realpath(a.source_dir)
    build = os.path.realpath(a.build_dir)
    tmp = tempfile.mkdtemp(prefix="hpc-embed-")
    if any(os.path.realpath(tmp).startswith(t) for t in (src, build)):
        shutil.rmtree(tmp)
        tmp = tempfile.mkdtemp(prefix="hpc-embed-", dir="/tmp")
    stage = os.path.join(tmp, "stage")
    prefix = os.path.join(tmp, "prefix")
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    trees = {"source tree": src, "build tree": build}
    env = clean_env(list(trees.values()), tmp)
    try:
        # 1. The install.
        run([a.cmake, "--install", build, "--prefix", stage], env, what="cmake --install")
        os.rename(stage, prefix)
        package = os.path.join(prefix, "lib", "cmake", "HPCOpt")
        link_file = os.path.join(prefix, "lib", "hpc-opt", "hpcrt-link.txt")
        installed_text = [os.path.join(package, f) for f in sorted(os.listdir(package))]
        installed_text.append(link_file)
        check_no_paths(installed_text, dict(trees, **{"install prefix": stage}),
                       "the installed file")
        print(f"ok: installed and moved; {len(installed_text)} package and link files name "
              f"no path of the trees or the prefix")

        # 2. examples/embed against the prefix alone.
        example = os.path.join(tmp, "embed-src")
        shutil.copytree(os.path.join(src, "examples", "embed"), example)
        example_build = os.path.join(tmp, "embed-build")
        run([a.cmake, "-S", example, "-B", example_build, "-G", a.generator,
             "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + prefix,
             "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"], env, what="configuring examples/embed")
        with open(os.path.join(example_build, "CMakeCache.txt")) as f:
            cache = f.read()
        if f"HPCOpt_DIR:PATH={package}" not in cache:
            raise Failure(f"examples/embed did not find the package in {package}")
        log = run([a.cmake, "--build", example_build, "-v"], env, what="building examples/embed")
        for name, path in trees.items():
            if path in log:
                raise Failure(f"a command building examples/embed names the {name}:\n{log}")
        generated = [os.path.join(dp, f) for dp, _, fs in os.walk(example_build) for f in fs
                     if f in ("CMakeCache.txt", "build.ninja", "Makefile", "link.txt",
                              "flags.make")]
        check_no_paths(generated, trees, "the generated build file")
        print("ok: examples/embed built against the prefix alone "
              f"({len(generated)} generated build files and every command checked)")

        # 3. The executables: dp=2 by both programs, one rank by the
        # installed hpc-opt, every link logged.
        model = os.path.join(work, os.path.basename(a.model))
        shutil.copy(a.model, model)
        links = os.path.join(work, "links.txt")
        linker = os.path.join(work, "log-link.sh")
        with open(linker, "w") as f:
            f.write(f'#!/bin/sh\necho "$@" >> "{links}"\nexec c++ "$@"\n')
        os.chmod(linker, 0o755)
        compile_env = dict(env, HPC_LINKER=linker)
        shapes = a.input_shape
        for program, out in (("embed-c", "c-dp2.bin"), ("embed-cpp", "cpp-dp2.bin")):
            run([os.path.join(example_build, program), model, shapes, out, "mesh=dp=2"],
                compile_env, cwd=work, what=program)
        run([os.path.join(prefix, "bin", "hpc-opt"), model, "--input-shape", shapes,
             "-o", "single.bin"], compile_env, cwd=work, what="the installed hpc-opt")
        with open(links) as f:
            link_lines = f.read().splitlines()
        runtime = os.path.join(prefix, "lib", "libhpcrt.a")
        if len(link_lines) != 3 or not all(runtime in line.split() for line in link_lines):
            raise Failure(f"the links do not all name {runtime}:\n" + "\n".join(link_lines))
        for name, path in trees.items():
            if any(path in line for line in link_lines):
                raise Failure(f"a link names the {name}:\n" + "\n".join(link_lines))
        print(f"ok: embed-c, embed-cpp and the installed hpc-opt linked {runtime}")

        # 4. Run and compare.
        name, dims = shapes.split("=")
        x = np.random.default_rng(0).standard_normal(
            [int(d) for d in dims.split(",")]).astype(np.float32)
        np.save(os.path.join(work, "input.npy"), x)
        inputs = ["--input", f"{name}=input.npy"]
        run(["./single.bin", "run"] + inputs + ["--output-dir", "out-single"], env, cwd=work,
            what="the single-rank binary")
        mpirun = [os.path.join(src, "test", "mpirun-private.sh"), a.mpirun,
                  "--allow-run-as-root", "--oversubscribe", "-n", "2"]
        for binary in ("c-dp2.bin", "cpp-dp2.bin"):
            run(mpirun + ["./" + binary, "run"] + inputs +
                ["--output-dir", "out-" + binary[:-4]], env, cwd=work,
                what=f"mpirun -n 2 {binary}")
        compare(os.path.join(src, "scripts", "compare_npy.py"), os.path.join(work, "out-single"),
                [os.path.join(work, "out-c-dp2"), os.path.join(work, "out-cpp-dp2")])
        print("ok: the dp=2 executables of embed-c and embed-cpp under mpirun -n 2 give "
              "the installed hpc-opt's single-rank output")

        # 5. The installed compiler without its link line.
        os.rename(link_file, link_file + ".away")
        p = subprocess.run([os.path.join(prefix, "bin", "hpc-opt"), model, "--input-shape",
                            shapes, "-o", "nolink.bin"], env=env, cwd=work,
                           capture_output=True, text=True)
        errors = [line for line in p.stderr.splitlines() if "error" in line]
        expected = f"cannot read the runtime link line '{link_file}'"
        if p.returncode != 1 or len(errors) != 1 or expected not in errors[0]:
            raise Failure(f"without {link_file}, hpc-opt exited {p.returncode} with\n"
                          f"{p.stderr}(expected one error line with: {expected})")
        print(f"ok: without its link line the installed hpc-opt says: {errors[0]}")
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
